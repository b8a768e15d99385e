"""The exercises of docs/why-scale.md: the spread of random scores, raw and
divided, for a head of 16 and for components wider than 1.

Run: python snippets/why_scale.py
"""

# --8<-- [start:exercise_d16]
from qkv.lab.scaling import score_std

# 20,000 query-key pairs with independent N(0, 1) components
print(
    f"d_k = 16: std of raw scores {score_std(16, scale=False):.2f}   "
    "(sqrt(16) = 4)"
)
# --8<-- [end:exercise_d16]


# --8<-- [start:exercise_sigma]
import numpy as np

from qkv.lab.scaling import draw_queries_keys

sigma = 2.0  # components of standard deviation 2, d_k = 64, 20,000 pairs
chunks = list(draw_queries_keys(d_k=64, n_draws=20_000, seed=3))
qs = np.concatenate([q for q, _ in chunks])[:, 0] * sigma  # (20000, 64)
ks = np.concatenate([k for _, k in chunks])[:, 0] * sigma
factor = 1 / (sigma**2 * np.sqrt(64))
dots = (qs * ks).sum(axis=-1)
print(
    f"divide by sigma^2 sqrt(d_k) = {1 / factor:.0f}: "
    f"std of scores {(dots * factor).std():.3f}"
)
# --8<-- [end:exercise_sigma]


# --8<-- [start:write_scaled_scores_skeleton]
from qkv.exercises import check_scaled_scores


def scaled_scores(q, k):
    """Scores of queries q (T_q, d_k) against keys k (T_k, d_k), a (T_q, T_k)
    table whose spread stays near 1 at every width d_k."""
    raise NotImplementedError("your code here")


print(check_scaled_scores(scaled_scores))
# --8<-- [end:write_scaled_scores_skeleton]


# --8<-- [start:write_scaled_scores]
import numpy as np

from qkv.exercises import check_scaled_scores


def scaled_scores(q, k):
    d_k = q.shape[-1]  # the width the queries and keys share
    return q @ k.T / np.sqrt(d_k)


print(check_scaled_scores(scaled_scores))
# --8<-- [end:write_scaled_scores]
