"""Solutions to the exercises of docs/multi-head.md (chapter 11).

Run it as `python snippets/multi_head_exercises.py`.
"""

# --8<-- [start:gpt2_sizes]
import numpy as np

import qkv

w = qkv.MultiHeadWeights.random(np.random.default_rng(0), d_model=768, n_heads=12)
params = sum(m.size for m in (w.w_q, w.w_k, w.w_v, w.w_o))
print("d_head =", w.d_head)
print(f"weights in the layer: {params:,}")
# --8<-- [end:gpt2_sizes]

# --8<-- [start:grouped_shapes]
g = qkv.MultiHeadWeights.random(
    np.random.default_rng(0), d_model=768, n_heads=12, n_kv_heads=4
)
for name in ("w_q", "w_k", "w_v", "w_o"):
    print(name, getattr(g, name).shape)
grouped = sum(m.size for m in (g.w_q, g.w_k, g.w_v, g.w_o))
print(f"weights in the layer: {grouped:,}")
# --8<-- [end:grouped_shapes]
