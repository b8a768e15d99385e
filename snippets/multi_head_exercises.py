"""Solutions to the exercises of docs/multi-head.md (and, grouped_shapes, of
docs/multi-head-in-depth.md).

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
import numpy as np

import qkv

g = qkv.MultiHeadWeights.random(
    np.random.default_rng(0), d_model=768, n_heads=12, n_kv_heads=4
)
for name in ("w_q", "w_k", "w_v", "w_o"):
    print(name, getattr(g, name).shape)
grouped = sum(m.size for m in (g.w_q, g.w_k, g.w_v, g.w_o))
print(f"weights in the layer: {grouped:,}")
# --8<-- [end:grouped_shapes]

# --8<-- [start:write_split_heads_skeleton]
from qkv.exercises import check_split_heads


def split_heads(x, n_heads):
    """x of shape (..., T, n_heads * d_head) becomes (..., n_heads, T, d_head):
    head h holds columns h * d_head to (h + 1) * d_head of every position."""
    raise NotImplementedError("your code here")


print(check_split_heads(split_heads))
# --8<-- [end:write_split_heads_skeleton]

# --8<-- [start:write_split_heads]
import numpy as np

from qkv.exercises import check_split_heads


def split_heads(x, n_heads):
    *lead, t, width = x.shape
    x = x.reshape(*lead, t, n_heads, width // n_heads)  # (..., T, heads, d_head)
    return np.swapaxes(x, -3, -2)  # (..., heads, T, d_head)


print(check_split_heads(split_heads))
# --8<-- [end:write_split_heads]
