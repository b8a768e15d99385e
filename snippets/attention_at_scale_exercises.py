"""Solutions to the exercises of docs/attention-at-scale.md.

Run it as `python snippets/attention_at_scale_exercises.py`.
"""

# --8<-- [start:predict]
import math

m, s = -math.inf, 0.0
for z in [2.0, 0.0, 4.0]:
    m_new = max(m, z)
    factor = math.exp(m - m_new)  # what the sum kept so far is multiplied by
    s = s * factor + math.exp(z - m_new)
    m = m_new
    print(f"read {z:.0f}: factor {factor:.3f}, m = {m:.0f}, s = {s:.3f}")
# --8<-- [end:predict]


# --8<-- [start:write_it_skeleton]
from qkv.exercises import check_online_softmax


def online_softmax(z, block):
    """Softmax along the last axis of z, reading each row `block` scores at
    a time, with a running maximum and a running sum per row."""
    raise NotImplementedError("your code here")


print(check_online_softmax(online_softmax))
# --8<-- [end:write_it_skeleton]


# --8<-- [start:write_it]
import numpy as np

import qkv
from qkv.exercises import check_online_softmax


def online_softmax(z, block):
    m = np.full((*z.shape[:-1], 1), -np.inf)  # running maximum, per row
    s = np.zeros_like(m)  # running sum of exp(score - m)
    for start in range(0, z.shape[-1], block):  # the one pass
        chunk = z[..., start : start + block]
        m_new = np.maximum(m, chunk.max(axis=-1, keepdims=True))
        shift = np.where(np.isneginf(m_new), 0, m_new)  # all -inf so far
        s = s * np.exp(m - shift)  # the sum so far, rescaled to m_new
        s = s + np.exp(chunk - shift).sum(axis=-1, keepdims=True)
        m = m_new
    return np.exp(z - m) / s  # the weights, against the final maximum


print(check_online_softmax(online_softmax))
row = 1000 + np.random.default_rng(3).normal(size=1000) * 3  # exp(1000): inf
mine = online_softmax(row, block=64)
print("largest score:", row.max().round(1))
print(
    "largest difference from qkv.softmax:", np.abs(mine - qkv.softmax(row)).max()
)
print("weights sum to:", mine.sum().round(12))
# --8<-- [end:write_it]
