"""Solutions to the exercises of docs/traps.md.

Run it as `python snippets/traps_exercises.py`.
"""

# --8<-- [start:wrong_axis]
import numpy as np

import qkv

scores = np.array([[2.0, 0.0], [0.0, 0.0]])
right = qkv.softmax(scores, axis=-1)  # over the keys: each row sums to 1
wrong = qkv.softmax(scores, axis=0)  # over the queries: each column sums to 1
print("wrong weights:\n", wrong.round(3))
print(
    "row sums:",
    wrong.sum(axis=1).round(3),
    f" their mean: {wrong.sum(axis=1).mean():.3f}",
)
print("right row sums:", right.sum(axis=1))
# --8<-- [end:wrong_axis]

# --8<-- [start:left_padding]
import textwrap

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
