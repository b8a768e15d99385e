"""Numbers that describe attention weights and scores: entropy, spread, gradient size."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from qkv._checks import as_float_array, real_array


def checked_weights(weights) -> np.ndarray:
    """``weights`` as a float array of rows that are non-negative and sum to 1, or a ValueError."""
    w = as_float_array("weights", weights, min_ndim=1)
    if w.shape[-1] == 0 or (w < 0).any() or not np.allclose(w.sum(axis=-1), 1.0, atol=1e-6):
        raise ValueError(
            f"weights must be non-negative rows that sum to 1 along the last axis "
            f"(softmax's output); got shape {w.shape} with row sums "
            f"{np.round(w.sum(axis=-1), 6).ravel()[:4].tolist()}..."
        )
    return w


# --8<-- [start:entropy]
def entropy(weights) -> np.ndarray:
    """Shannon entropy of each row of weights, in nats, along the last axis.

    0 means all weight on one key; ``log(n)`` means spread evenly over ``n``
    keys. A weight of exactly 0 contributes 0 (the limit of ``w log w``).

    Parameters
    ----------
    weights : array_like, shape (..., n)
        Rows that sum to 1.

    Returns
    -------
    ndarray, shape (...)

    Examples
    --------
    >>> print(entropy([1.0, 0.0, 0.0, 0.0]))
    0.0
    >>> print(entropy([0.25, 0.25, 0.25, 0.25]).round(4))
    1.3863
    """
    w = checked_weights(weights)
    safe = np.where(w > 0, w, 1.0)  # log(1) = 0, so zero weights add nothing
    # 0.0 - x turns -0.0 into 0.0
    return 0.0 - (w * np.log(safe)).sum(axis=-1)


# --8<-- [end:entropy]


class ScoreStats(NamedTuple):
    """Summary of a score array: mean, standard deviation and largest magnitude.

    Examples
    --------
    >>> score_stats([[2.0, -2.0]]).std
    2.0
    """

    mean: float
    std: float
    max_abs: float


def score_stats(scores) -> ScoreStats:
    """Mean, standard deviation and largest absolute value of all scores.

    Examples
    --------
    >>> score_stats([[1.0, -1.0], [3.0, -3.0]])
    ScoreStats(mean=0.0, std=2.23606797749979, max_abs=3.0)
    """
    s = real_array("scores", scores)
    if s.size == 0 or np.isnan(s).any():
        raise ValueError(f"scores must be a non-empty array without NaN, got shape {s.shape}")
    return ScoreStats(float(s.mean()), float(s.std()), float(np.abs(s).max()))


# --8<-- [start:softmax_jacobian]
def softmax_jacobian(weights) -> np.ndarray:
    """The Jacobian of softmax at the point where it produced ``weights``.

    ``J[i, j] = d w_i / d z_j = w_i (δ_ij - w_j)``,
    i.e. ``diag(w) - w wᵀ``.
    When one weight is near 1 and the rest near 0, every entry is near 0: the
    gradient that flows back through a saturated softmax vanishes.

    Parameters
    ----------
    weights : array_like, shape (..., n)

    Returns
    -------
    ndarray, shape (..., n, n)

    Examples
    --------
    >>> print(softmax_jacobian([0.5, 0.5]))
    [[ 0.25 -0.25]
     [-0.25  0.25]]
    >>> print(np.abs(softmax_jacobian([0.999, 0.001])).max().round(4))
    0.001
    """
    w = checked_weights(weights)
    return w[..., :, None] * (np.eye(w.shape[-1]) - w[..., None, :])


# --8<-- [end:softmax_jacobian]
