"""Solutions to the exercises of docs/attention-at-scale.md (chapter 13).

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


# --8<-- [start:write_it]
import numpy as np

import qkv


def online_softmax(row):
    """Softmax of a list of scores, reading each score once, left to right."""
    m, s = -math.inf, 0.0
    for z in row:  # the one pass: a running maximum and a running sum
        m_new = max(m, z)
        s = s * math.exp(m - m_new) + math.exp(z - m_new)
        m = m_new
    return [math.exp(z - m) / s for z in row]  # weights, against the final m


row = 1000 + np.random.default_rng(3).normal(size=1000) * 3  # exp(1000) overflows
mine = np.array(online_softmax(row.tolist()))
print("largest score:", row.max().round(1))
print(
    "largest difference from qkv.softmax:", np.abs(mine - qkv.softmax(row)).max()
)
print("weights sum to:", mine.sum().round(12))
# --8<-- [end:write_it]
