"""Scaled dot-product attention: ``softmax(Q Kᵀ / √d_k) V``, and the softmax under it.

Shapes follow PyTorch: leading batch/head dimensions, then ``(T, d)``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from qkv._checks import as_float_array, check_mask, real_array, whole_number


# --8<-- [start:softmax]
def softmax(z, axis: int = -1) -> np.ndarray:
    """Turn scores into weights that are positive and sum to 1 along ``axis``.

    Subtracting each row's maximum first changes nothing mathematically
    (softmax ignores a constant shift) but keeps ``exp`` from overflowing. A
    score of ``-inf`` gets a weight of exactly 0.

    Parameters
    ----------
    z : array_like, shape (..., n)
        Scores. ``-inf`` is allowed (it means "masked"); NaN and ``+inf`` are
        not.
    axis : int
        The axis that sums to 1.

    Returns
    -------
    ndarray, same shape as ``z``

    Raises
    ------
    ValueError
        If a row contains NaN or ``+inf``, or every entry of a row is
        ``-inf``.

    Examples
    --------
    >>> w = softmax([1.0, 2.0, 3.0])
    >>> print(w.round(4), w.sum().round(12))
    [0.09   0.2447 0.6652] 1.0

    Huge scores do not overflow, and ``-inf`` gives an exact zero:

    >>> print(softmax([1e4, 1e4 - 1.0, -np.inf]).round(4))
    [0.7311 0.2689 0.    ]
    """
    z = real_array("z", z)
    if z.ndim == 0 or z.shape[axis] == 0:
        raise ValueError(f"softmax needs at least one score along axis {axis}, got shape {z.shape}")
    # a float copy we may overwrite
    z = np.array(z, dtype=np.result_type(z.dtype, np.float32))
    return softmax_in_place(z, axis)


def softmax_in_place(z: np.ndarray, axis: int = -1) -> np.ndarray:
    """:func:`softmax` that overwrites the float array ``z``.

    No temporary arrays: faster on big inputs.

    Examples
    --------
    >>> z = np.array([0.0, np.log(3.0)])
    >>> softmax_in_place(z) is z, z.round(6).tolist()
    (True, [0.25, 0.75])
    """
    # NaN and +inf propagate into the max, so one check covers them
    peak = z.max(axis=axis, keepdims=True)
    if not np.isfinite(peak).all():
        row = tuple(int(i) for i in np.argwhere(~np.isfinite(peak))[0])
        raise ValueError(
            f"softmax row {row} has NaN or +inf, or no finite score at all "
            f"(max = {peak[row]}); every row needs at least one finite score"
        )
    z -= peak  # the largest score becomes 0, so exp cannot overflow
    np.exp(z, out=z)
    z /= z.sum(axis=axis, keepdims=True)
    return z


# --8<-- [end:softmax]


class Attention(NamedTuple):
    """What :func:`attention` returns: the weights and the blended values.

    A named tuple, so it unpacks like a pair or reads by name.

    Examples
    --------
    >>> result = attention(np.eye(2), np.eye(2), np.ones((2, 3)))
    >>> weights, output = result
    >>> result.weights is weights, output.shape
    (True, (2, 3))
    """

    weights: np.ndarray
    """(..., Tq, Tk): row i says how much query i takes from each key; rows sum to 1."""
    output: np.ndarray
    """(..., Tq, d_v): row i is the weighted mixture of the value rows."""


def scale_factor(scale, d_k: int) -> float:
    """The number the raw scores are multiplied by.

    ``True`` means ``1/√d_k``, ``False`` means 1 (raw dot products), a float
    is used as is.

    Examples
    --------
    >>> scale_factor(True, 64), scale_factor(False, 64), scale_factor(0.5, 64)
    (0.125, 1.0, 0.5)
    """
    d_k = whole_number("d_k", d_k, minimum=1)
    if scale is True or scale is np.True_:
        return 1.0 / float(np.sqrt(d_k))
    if scale is False or scale is np.False_:
        return 1.0
    if isinstance(scale, (int, float, np.floating, np.integer)) and np.isfinite(scale):
        return float(scale)
    raise ValueError(f"scale must be True, False or a finite number, got {scale!r}")


# --8<-- [start:attention]
def attention(q, k, v, mask=None, scale=True) -> Attention:
    """Scaled dot-product attention: ``softmax(q @ kᵀ · scale) @ v``.

    Parameters
    ----------
    q : array_like, shape (..., Tq, d_k)
        Queries, one row per position that reads.
    k : array_like, shape (..., Tk, d_k)
        Keys, one row per position that can be read. Each is dotted with every
        query, so it has the queries' width ``d_k``.
    v : array_like, shape (..., Tk, d_v)
        Values, one row per key: the rows that each output row averages. Their
        width ``d_v`` need not be ``d_k``.
    mask : array_like of bool, broadcastable to (..., Tq, Tk), optional
        ``True`` where a query may attend, the convention of the boolean
        ``attn_mask`` of PyTorch's ``scaled_dot_product_attention``. A query
        row without a single ``True`` raises ``ValueError``, naming the row:
        its softmax would be 0/0, which a hand-written softmax turns into NaN
        and PyTorch's SDPA into zeros; neither is an average of anything.
    scale : bool or float
        ``True`` divides the scores by ``√d_k``; ``False`` leaves them raw; a
        number multiplies them by that number.

    Returns
    -------
    Attention
        ``(weights, output)`` with shapes ``(..., Tq, Tk)`` and ``(..., Tq,
        d_v)``. Leading dimensions broadcast as in PyTorch.

    Raises
    ------
    ValueError
        On mismatched shapes, a non-boolean or non-broadcasting mask, NaN or
        inf in the inputs, or a query row whose mask allows no key.

    Examples
    --------
    Two queries, three keys: every row of weights sums to 1, and the output
    has one row per query and one column per value dimension.

    >>> q = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> k = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> v = np.array([[1.0], [2.0], [3.0]])
    >>> weights, output = attention(q, k, v)
    >>> weights.shape, output.shape
    ((2, 3), (2, 1))
    >>> print(weights.sum(axis=-1))
    [1. 1.]

    A masked key gets a weight of exactly zero:

    >>> mask = np.array([[True, True, False], [True, True, True]])
    >>> print(attention(q, k, v, mask=mask).weights[0, 2])
    0.0

    A query whose mask hides every key has nothing to average, and is refused:

    >>> attention(q, k, v, mask=np.array([[False, False, False], [True, True, True]]))
    Traceback (most recent call last):
    ...
    ValueError: mask allows no key for query row (0,) (index into (..., Tq));
    every query must be allowed to attend to at least one key
    """
    # --8<-- [start:attention_body]
    q = as_float_array("q", q)
    k = as_float_array("k", k)
    v = as_float_array("v", v)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must share d_k (their last dimension) because they are "
            f"dotted together: got q {q.shape} and k {k.shape}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same number of positions Tk (one value "
            f"per key): got k {k.shape} and v {v.shape}"
        )
    d_k = q.shape[-1]
    factor = scale_factor(scale, d_k)

    # (..., Tq, Tk): q·k/√d_k for every pair of query and key
    scores = (q * factor) @ np.swapaxes(k, -1, -2)
    if mask is not None:
        mask = check_mask(mask, scores.shape)
        # masked pairs score -inf, so their weight comes out exactly 0
        scores = np.where(mask, scores, -np.inf)
    # (..., Tq, Tk): softmax along the keys; each row sums to 1
    weights = softmax_in_place(scores, axis=-1)
    # (..., Tq, d_v): each row a weighted mixture of the value rows
    output = weights @ v
    return Attention(weights, output)
    # --8<-- [end:attention_body]


# --8<-- [end:attention]
