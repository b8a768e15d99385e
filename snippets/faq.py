"""Short answers to common questions about queries, keys and values.

Shown on docs/faq.md. Run it as `python snippets/faq.py`.
"""

# --8<-- [start:setup]
import textwrap

import numpy as np

import qkv

# --8<-- [end:setup]


# --8<-- [start:cosine]
rng = np.random.default_rng(3)


def cosine_scores(q, k):
    """Cosine of every query with every key: (Tq, d), (Tk, d) -> (Tq, Tk)."""
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    k = k / np.linalg.norm(k, axis=-1, keepdims=True)
    return q @ k.T


T, d = 6, 64
q, k = rng.normal(size=(T, d)), rng.normal(size=(T, d))
cos = cosine_scores(q, k)
print(
    f"random vectors: cosines in [{cos.min():.2f}, {cos.max():.2f}],"
    f" largest weight {qkv.softmax(cos).max():.3f}"
)
ceiling = np.e**2 / (np.e**2 + T - 1)  # one key at +1, five at -1
lined_up = np.vstack([q[0], -np.repeat(q[:1], T - 1, axis=0)])
best_case = cosine_scores(q[:1], lined_up)  # key 0 with q[0], rest against
print(
    f"best case: largest weight {qkv.softmax(best_case).max():.3f}, "
    f"ceiling {ceiling:.3f}"
)
sharp = qkv.softmax(best_case / 0.05).max()
print(f"best case, temperature 0.05: largest weight {sharp:.3f}")

louder = 3 * q[:1]  # the same direction, three times the norm
h_1 = qkv.entropy(qkv.softmax(q[:1] @ k.T / np.sqrt(d)))[0]
h_3 = qkv.entropy(qkv.softmax(louder @ k.T / np.sqrt(d)))[0]
print(f"dot product, query x3: entropy {h_1:.3f} -> {h_3:.3f} nats")
same = np.allclose(
    qkv.softmax(cosine_scores(q[:1], k)), qkv.softmax(cosine_scores(louder, k))
)
print("cosine,      query x3: weights unchanged:", same)
# --8<-- [end:cosine]


# --8<-- [start:cosine_variations]
rng = np.random.default_rng(0)
print("keys  width  ceiling  largest weight seen  draws above half the ceiling")
for T in (6, 64):
    ceiling = np.e**2 / (np.e**2 + T - 1)
    for d in (4, 16, 64, 512):
        largest = np.array(
            [
                qkv.softmax(cosine_scores(*rng.normal(size=(2, T, d)))).max()
                for _ in range(200)
            ]
        )
        print(
            f"{T:4}  {d:5}  {ceiling:7.3f}  {largest.max():19.3f}  "
            f"{np.mean(largest > ceiling / 2):28.1%}"
        )
# --8<-- [end:cosine_variations]


# --8<-- [start:nothing]
rng = np.random.default_rng(5)
useless = rng.normal(size=(1, 8)) - 1000  # every score near -1,000
weights = qkv.softmax(useless)
print("scores:", useless.round(1))
print("weights:", weights.round(3), " sum:", weights.sum().round(12))
# --8<-- [end:nothing]


# --8<-- [start:quadratic]
w = qkv.MultiHeadWeights.random(np.random.default_rng(6), d_model=64, n_heads=8)
for T in (64, 128, 256):
    x = np.random.default_rng(T).normal(size=(T, 64))
    maps = qkv.multi_head_attention(x, x, w).weights  # (8, T, T)
    flops = qkv.attention_flops(T, T, w.d_head, w.d_head, w.n_heads)
    print(
        f"T = {T:>3}: attention flops {flops:>11,}",
        f"  weight maps {maps.nbytes:>9,} bytes",
    )
# --8<-- [end:quadratic]


# --8<-- [start:d_k]
for m in qkv.MODELS:
    root = np.sqrt(m.d_head)
    print(f"{m.name:<13} d_k = {m.d_head:>3}, sqrt(d_k) = {root:.2f}")
rng = np.random.default_rng(7)
layer_w = qkv.MultiHeadWeights.random(rng, d_model=512, n_heads=8)
x = rng.normal(size=(6, 512))  # six tokens
q_h = qkv.split_heads(x @ layer_w.w_q, 8)  # (8, 6, 64)
k_h = qkv.split_heads(x @ layer_w.w_k, 8)
by_head = qkv.softmax(q_h @ k_h.swapaxes(-1, -2) / np.sqrt(64))
layer = qkv.multi_head_attention(x, x, layer_w).weights
print("the 512-wide layer divides by sqrt(64):", np.allclose(layer, by_head))
# --8<-- [end:d_k]


# --8<-- [start:sizes]
rng = np.random.default_rng(1)
q = rng.normal(size=(3, 4))  # 3 queries, d_k = 4
k = rng.normal(size=(5, 4))  # 5 keys,    d_k = 4
v = rng.normal(size=(5, 7))  # 5 values,  d_v = 7
weights, out = qkv.attention(q, k, v)
print("weights", weights.shape, " output", out.shape)
try:
    qkv.attention(q, rng.normal(size=(5, 6)), v)  # keys with d_k = 6
except ValueError as err:
    print(textwrap.fill(f"ValueError: {err}", 72))
# --8<-- [end:sizes]


# --8<-- [start:weights]
rng = np.random.default_rng(2)
w = qkv.MultiHeadWeights.random(rng, d_model=512, n_heads=8)
x = rng.normal(size=(6, 512))
head = 3
cols = slice(head * w.d_head, (head + 1) * w.d_head)  # its 64 columns
w_q3, w_k3, w_v3 = w.w_q[:, cols], w.w_k[:, cols], w.w_v[:, cols]
q_all = qkv.split_heads(x @ w.w_q, w.n_heads)  # (8, 6, 64)
print("head 3's queries == x @ its own W_Q:", np.allclose(q_all[head], x @ w_q3))
for name in ("w_q", "w_k", "w_v", "w_o"):
    print(f"{name} {getattr(w, name).shape}: {getattr(w, name).size:,}")
one_head = w_q3.size + w_k3.size + w_v3.size
print(f"of which one head's bands of W_Q, W_K, W_V: {one_head:,}")
print(f"per layer: {sum(m.size for m in (w.w_q, w.w_k, w.w_v, w.w_o)):,}")
# --8<-- [end:weights]


# --8<-- [start:weight_shapes]
def layer_shapes(d_model, n_heads, n_kv_heads, d_head):
    """The four matrices of an attention layer, as (rows, columns)."""
    return {
        "W_Q": (d_model, n_heads * d_head),
        "W_K": (d_model, n_kv_heads * d_head),
        "W_V": (d_model, n_kv_heads * d_head),
        "W_O": (n_heads * d_head, d_model),
    }


layers = {  # d_model, query heads, key/value heads, d_head
    "the layer above": (512, 8, 8, 64),
    "SmolLM2-135M": (576, 9, 3, 64),
    "Gemma 7B": (3072, 16, 16, 256),
}
for name, sizes in layers.items():
    shown = ", ".join(
        f"{m} {r}x{c}" for m, (r, c) in layer_shapes(*sizes).items()
    )
    print(f"{name:<16}{shown}")
small = qkv.MultiHeadWeights.random(rng, 576, n_heads=9, n_kv_heads=3)
drawn = {m: getattr(small, m.lower()).shape for m in ("W_Q", "W_K", "W_V", "W_O")}
print(
    "qkv.MultiHeadWeights agrees:", drawn == layer_shapes(*layers["SmolLM2-135M"])
)
# --8<-- [end:weight_shapes]


# --8<-- [start:other_source]
rng = np.random.default_rng(4)
d_dec, d_enc, d_k, d_v = 16, 24, 8, 6  # the two sequences need not be as wide
decoder_states = rng.normal(size=(4, d_dec))  # the sequence that asks
encoder_states = rng.normal(size=(11, d_enc))  # the sequence that is read
w_q = rng.normal(size=(d_dec, d_k)) / np.sqrt(d_dec)  # reads the decoder
w_k = rng.normal(size=(d_enc, d_k)) / np.sqrt(d_enc)  # reads the encoder
w_v = rng.normal(size=(d_enc, d_v)) / np.sqrt(d_enc)  # reads the encoder
w_o = rng.normal(size=(d_v, d_dec)) / np.sqrt(d_v)  # back to the decoder's width
for name, m in (("W_Q", w_q), ("W_K", w_k), ("W_V", w_v), ("W_O", w_o)):
    print(name, m.shape)
q = decoder_states @ w_q  # (4, d_k)
k, v = encoder_states @ w_k, encoder_states @ w_v  # (11, d_k), (11, d_v)
weights, out = qkv.attention(q, k, v)
print(
    "weights",
    weights.shape,
    " output",
    out.shape,
    " after W_O",
    (out @ w_o).shape,
)
keys = rng.normal(size=(6, 64))
values = rng.normal(size=(7, 64))  # one value too many
try:
    qkv.attention(rng.normal(size=(2, 64)), keys, values)
except ValueError as err:
    print(textwrap.fill(f"ValueError: {err}", 72))
# --8<-- [end:other_source]


# --8<-- [start:names]
rng = np.random.default_rng(0)
keys = rng.normal(size=(5, 8))  # five entries' labels
values = rng.normal(size=(5, 3))  # and their contents
query = keys[2] + 0.5 * rng.normal(size=8)  # near entry 2's label, not on it
best = int(np.argmax(keys @ query))
print("best-matching key:", best)
print(f"query    weights{'':<28}|output - values[{best}]|")
for sharpness in (1, 4, 16):  # the same direction, a larger norm
    weights, out = qkv.attention(sharpness * query[None], keys, values)
    miss = np.linalg.norm(out[0] - values[best])
    print(f"x{sharpness:<7}{weights[0].round(3)!s:<35}{miss:.3f}")
# --8<-- [end:names]
