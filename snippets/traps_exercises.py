"""Solutions to the exercises of docs/traps.md.

Run it as `python snippets/traps_exercises.py`.
"""

# --8<-- [start:wrong_axis]
import numpy as np

import qkv

scores = np.array([[2.0, 0.0], [0.0, 0.0]])
wrong = qkv.softmax(scores, axis=0)  # over the queries: each column sums to 1
print("wrong weights:\n", wrong.round(3))
sums = wrong.sum(axis=1)
print("row sums:", sums.round(3), f" their mean: {sums.mean():.3f}")
print("right row sums:", qkv.softmax(scores, axis=-1).sum(axis=1))
# --8<-- [end:wrong_axis]

# --8<-- [start:left_padding]
import textwrap

import numpy as np

import qkv

lengths = np.array([2, 4])  # real tokens per sequence, padded on the left to 4
t = 4
real = np.arange(t) >= t - lengths[:, None]  # (2, 4): True on real tokens
allowed = real[:, None, :] & qkv.causal_mask(t)  # (2, 1, 4) & (4, 4) -> (2, 4, 4)
empty = [
    (int(b), int(i))
    for b, i in zip(*np.nonzero(~allowed.any(axis=-1)), strict=True)
]
print("(sequence, query) pairs left with no key:", empty)
try:
    qkv.attention(
        np.ones((2, t, 3)), np.ones((2, t, 3)), np.ones((2, t, 3)), mask=allowed
    )
except ValueError as err:
    print(textwrap.fill(f"qkv refuses: {err}", 72))
# --8<-- [end:left_padding]


# --8<-- [start:fix_attention_skeleton]
import numpy as np

from qkv.exercises import check_attention


def attention(q, k, v, mask):  # five traps: fix them, then delete the raise
    raise NotImplementedError("your code here")
    scores = q @ k.swapaxes(-1, -2) + mask
    weights = np.exp(scores) / np.exp(scores).sum(axis=-2, keepdims=True)
    return weights, weights


print(check_attention(attention))
# --8<-- [end:fix_attention_skeleton]


# --8<-- [start:fix_attention]
import numpy as np

from qkv.exercises import check_attention


def attention(q, k, v, mask):
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1])  # trap 5: scaled
    scores = np.where(mask, scores, -np.inf)  # trap 3: a hidden key gets -inf
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))  # trap 7: no overflow
    weights = e / e.sum(axis=-1, keepdims=True)  # trap 1: over the keys
    return weights, weights @ v  # trap 2: the blend of the values


print(check_attention(attention))
# --8<-- [end:fix_attention]
