"""Multi-head attention: split, attend in each head, concatenate, project.

Shown on docs/multi-head.md and docs/multi-head-in-depth.md.
Run it as `python snippets/multi_head.py`.
"""

# --8<-- [start:setup]
import numpy as np

import qkv

rng = np.random.default_rng(0)
d_model, n_heads = 512, 8  # the original Transformer's base model
w = qkv.MultiHeadWeights.random(rng, d_model=d_model, n_heads=n_heads)
x = rng.normal(size=(6, d_model))  # six tokens, one row each
print("d_head =", w.d_head)
for name in ("w_q", "w_k", "w_v", "w_o"):
    print(name, getattr(w, name).shape)
# --8<-- [end:setup]

# --8<-- [start:shapes]
q = qkv.split_heads(x @ w.w_q, n_heads)  # (heads, T, d_head)
k = qkv.split_heads(x @ w.w_k, n_heads)
v = qkv.split_heads(x @ w.w_v, n_heads)
weights, per_head = qkv.attention(q, k, v)  # all heads side by side
concat = qkv.merge_heads(per_head)  # heads laid back side by side
out = concat @ w.w_o  # the output projection mixes the heads

print(f"{'x':<20}{x.shape}")
print(f"{'x @ W_Q':<20}{(x @ w.w_q).shape}")
print(f"{'split_heads -> q':<20}{q.shape}")
print(f"{'weights':<20}{weights.shape}")
print(f"{'weights @ v':<20}{per_head.shape}")
print(f"{'merge_heads':<20}{concat.shape}")
print(f"{'@ W_O -> output':<20}{out.shape}")

layer = qkv.multi_head_attention(x, x, w)
print(
    "steps above vs multi_head_attention, max difference:",
    np.abs(out - layer.output).max(),
)
# --8<-- [end:shapes]

# --8<-- [start:cost]
w_one = qkv.MultiHeadWeights.random(rng, d_model=512, n_heads=1)
T = 1024
print(
    f"{'':<8}{'flops at T=1024':>16}{'parameters':>12}   weight maps for 6 tokens"
)
for label, m in (("8 heads", w), ("1 head", w_one)):
    flops = qkv.attention_flops(T, T, m.d_head, m.d_head, m.n_heads)
    params = m.w_q.size + m.w_k.size + m.w_v.size + m.w_o.size
    maps = qkv.multi_head_attention(x, x, m).weights
    print(
        f"{label:<8}{flops:>16,}{params:>12,}   "
        f"{maps.shape}, {maps.nbytes:,} bytes"
    )
# --8<-- [end:cost]

# --8<-- [start:padding]
lengths = np.array([4, 6])  # the first sequence is padded from 4 to 6
batch = rng.normal(size=(2, 6, d_model))  # whatever sits in the padding
pad = qkv.padding_mask(lengths, 6)  # (2, 1, 6)
allowed = pad & qkv.causal_mask(6)  # (2, 1, 6) & (6, 6) -> (2, 6, 6)
padded = qkv.multi_head_attention(batch, batch, w, mask=allowed)
print(
    "mask",
    allowed.shape,
    " weights",
    padded.weights.shape,
    " output",
    padded.output.shape,
)
print("largest weight on a padding key:", padded.weights[0, :, :, 4:].max())

short = batch[0, :4]  # the first sequence without its padding
alone = qkv.multi_head_attention(short, short, w, mask=qkv.causal_mask(4))
gap = np.abs(padded.output[0, :4] - alone.output).max()
print(f"short sequence, padded vs alone: max difference {gap:.1e}")
# --8<-- [end:padding]
