"""Attention without the ``T × T`` matrix: the online softmax, FlashAttention's tiling,
and linear attention.

:func:`online_softmax` finds a row's maximum and normaliser in one pass over its
blocks (Milakov & Gimelshein 2018). :func:`tiled_attention` runs the same running
maximum and sum over blocks of keys, so it never holds more than a block of scores
(Rabe & Staats 2021), in the loop order of FlashAttention-2 (Dao 2023): query blocks
outside, key blocks inside. :func:`linear_attention` replaces the softmax
by a feature map, so the keys and values can be summed first (Katharopoulos et al.
2020).

Shapes follow PyTorch: leading batch/head dimensions, then ``(T, d)``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from qkv._checks import as_float_array, check_mask, real_array, whole_number
from qkv.dot_product import scale_factor


# --8<-- [start:online_softmax]
def online_softmax(z, block: int = 65536) -> np.ndarray:
    """Softmax along the last axis, reading the scores once, a block at a time.

    The row is read in blocks of ``block`` scores, left to right. After each
    block the running maximum ``m`` and the running sum ``s`` of
    ``exp(score - m)`` describe every score read so far; when a block raises
    the maximum, the sum kept so far is rescaled by ``exp(m_old - m_new)``.
    Each block's exponentials are written out with the maximum known at the
    time, and one multiplication per block at the end brings them all to the
    final maximum. With ``block=1`` this is the one-score-at-a-time loop of
    Milakov & Gimelshein (2018); blocks of many scores let NumPy do the work
    of each block at once, which is what makes it as fast as :func:`softmax`.

    Parameters
    ----------
    z : array_like, shape (..., n)
        Scores. ``-inf`` is allowed (weight exactly 0); NaN and ``+inf`` are
        not, and every row needs a finite score.
    block : int
        How many scores of a row are read at a time.

    Returns
    -------
    ndarray, same shape as ``z``
        Equal to ``softmax(z, axis=-1)`` up to rounding.

    Raises
    ------
    ValueError
        If ``z`` has no scores, a row has NaN or ``+inf`` or no finite score,
        or ``block`` is not a whole number >= 1.

    Examples
    --------
    The scores 1, 3, 2 read one at a time: the maximum goes 1, 3, 3 and the
    sum goes 1, then 1·e⁻² + 1 (rescaled to the new maximum), then adds e⁻¹.

    >>> print(online_softmax([1.0, 3.0, 2.0], block=1).round(4))
    [0.09   0.6652 0.2447]

    Scores far beyond ``exp``'s range do not overflow:

    >>> print(online_softmax([1000.0, 999.0], block=1).round(4))
    [0.7311 0.2689]
    """
    z = real_array("z", z)
    block = whole_number("block", block, minimum=1)
    if z.ndim == 0 or z.shape[-1] == 0:
        raise ValueError(f"online_softmax needs at least one score along the last axis, got shape {z.shape}")
    z = z.astype(np.result_type(z.dtype, np.float32), copy=False)
    n = z.shape[-1]
    out = np.empty_like(z)
    # (..., 1): the running maximum and the running sum of exp(score - maximum)
    m = np.full((*z.shape[:-1], 1), -np.inf, dtype=z.dtype)
    s = np.zeros_like(m)
    maxima = []  # the maximum each block's exponentials were taken against
    for start in range(0, n, block):
        chunk = z[..., start : start + block]  # (..., b)
        m_new = np.maximum(m, chunk.max(axis=-1, keepdims=True))
        # a row with only -inf so far keeps m = -inf: shift it by 0 to avoid inf - inf
        shift = np.where(np.isneginf(m_new), 0, m_new)
        e = out[..., start : start + block]  # a view: the exponentials go straight into out
        np.subtract(chunk, shift, out=e)
        np.exp(e, out=e)
        # the rescaling: the old sum was of exp(score - m); it must be of exp(score - m_new)
        s = s * np.exp(m - shift) + e.sum(axis=-1, keepdims=True)
        m = m_new
        maxima.append(m_new)  # -inf only if the block's row was all -inf (its exps are 0)
    # NaN and +inf propagate into the running maximum, so one check covers them
    if not np.isfinite(m).all():
        row = tuple(int(i) for i in np.argwhere(~np.isfinite(m[..., 0]))[0])
        raise ValueError(
            f"online_softmax row {row} has NaN or +inf, or no finite score at all "
            f"(max = {m[row][0]}); every row needs at least one finite score"
        )
    # bring each block from the maximum it used to the final one, and normalise
    for start, m_then in zip(range(0, n, block), maxima, strict=True):
        out[..., start : start + block] *= np.exp(m_then - m) / s
    return out


# --8<-- [end:online_softmax]


class TiledAttention(NamedTuple):
    """What :func:`tiled_attention` returns: the output and each row's log-sum-exp.

    Examples
    --------
    >>> output, lse = tiled_attention(np.zeros((2, 4)), np.zeros((3, 4)), np.ones((3, 1)))
    >>> output.shape, lse.shape
    ((2, 1), (2,))
    """

    output: np.ndarray
    """(..., Tq, d_v): the same as ``attention(q, k, v, mask).output``."""
    logsumexp: np.ndarray
    """(..., Tq): ``log Σ_j exp(score_ij)`` over the keys query i may attend to;
    FlashAttention-2 keeps it for the backward pass, which recomputes the weights
    from it as ``exp(score_ij - logsumexp_i)``."""


# --8<-- [start:tiled_attention]
def tiled_attention(
    q, k, v, mask=None, block_q: int = 1024, block_k: int = 2048, scale=True
) -> TiledAttention:
    """Scaled dot-product attention computed block by block, in the order of FlashAttention-2.

    The queries are cut into blocks of ``block_q`` rows and the keys and
    values into blocks of ``block_k``. For each block of queries, the key
    blocks are visited in turn, keeping per query row a running maximum
    ``m``, a running sum ``l_sum`` of ``exp(score - m)`` and a running,
    unnormalised output ``acc``; a block that raises the maximum rescales
    ``l_sum`` and ``acc`` by ``exp(m_old - m_new)``, exactly as in
    :func:`online_softmax`. At most ``block_q × block_k`` scores exist at any
    time, never the ``Tq × Tk`` matrix (Rabe & Staats 2021). The loops are
    nested as in FlashAttention-2 (Dao 2023, Algorithm 1): each block of
    queries is finished, divided by its sum and given its log-sum-exp, before
    the next starts. FlashAttention (Dao et al. 2022) nests them the other way
    round, key blocks outside, and keeps every row's maximum and sum between
    visits. Blocks need not divide ``Tq`` or ``Tk``: the last one is shorter.

    Parameters
    ----------
    q : array_like, shape (..., Tq, d_k)
    k : array_like, shape (..., Tk, d_k)
    v : array_like, shape (..., Tk, d_v)
    mask : array_like of bool, broadcastable to (..., Tq, Tk), optional
        ``True`` where a query may attend, as in :func:`~qkv.attention`.
        Every query needs at least one ``True``: a row that may attend to
        nothing is refused with a ``ValueError``, as :func:`~qkv.attention`
        refuses it (PyTorch returns NaN or zeros there).
    block_q, block_k : int
        Rows of queries and of keys per block. The defaults were the best
        measured by ``benchmarks/tiled_attention.py`` at d_k = 64 in float32 on
        a 2-core machine: as fast as smaller blocks with one BLAS thread, much
        faster with two, and at T = 16,384 still under 1/32 of
        :func:`~qkv.attention`'s peak memory.
    scale : bool or float
        As in :func:`~qkv.attention`.

    Returns
    -------
    TiledAttention
        ``(output, logsumexp)`` with shapes ``(..., Tq, d_v)`` and
        ``(..., Tq)``; ``output`` equals :func:`~qkv.attention`'s up to
        rounding.

    Raises
    ------
    ValueError
        On mismatched shapes, NaN or inf in the inputs, a bad mask, or block
        sizes that are not whole numbers >= 1.

    Examples
    --------
    Five keys in blocks of two (2 + 2 + 1) give attention's output:

    >>> from qkv import attention
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = rng.normal(size=(3, 5, 4))
    >>> tiled = tiled_attention(q, k, v, block_q=2, block_k=2)
    >>> bool(np.allclose(tiled.output, attention(q, k, v).output))
    True

    The log-sum-exp gives back any weight without the matrix being kept:

    >>> weights = attention(q, k, v).weights
    >>> scores = q @ k.T / 2.0  # √d_k = 2
    >>> bool(np.allclose(np.exp(scores[0] - tiled.logsumexp[0]), weights[0]))
    True
    """
    q = as_float_array("q", q)
    k = as_float_array("k", k)
    v = as_float_array("v", v)
    block_q = whole_number("block_q", block_q, minimum=1)
    block_k = whole_number("block_k", block_k, minimum=1)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must share d_k (their last dimension): got q {q.shape} and k {k.shape}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same number of positions Tk: got k {k.shape} and v {v.shape}"
        )
    dtype = np.result_type(q.dtype, k.dtype, v.dtype)
    t_q, t_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    if mask is not None:  # refuses a row that may attend to nothing, as attention does
        mask = check_mask(mask, (*lead, t_q, t_k))
    factor = dtype.type(scale_factor(scale, q.shape[-1]))

    output = np.empty((*lead, t_q, d_v), dtype=dtype)
    lse = np.empty((*lead, t_q), dtype=dtype)
    # --8<-- [start:tiled_loop]
    for i in range(0, t_q, block_q):
        qi = q[..., i : i + block_q, :] * factor  # (..., bq, d_k), scaled
        rows = qi.shape[-2]
        m = np.full((*lead, rows, 1), -np.inf, dtype=dtype)  # running maximum
        l_sum = np.zeros((*lead, rows, 1), dtype=dtype)  # running sum of exp(score - m)
        acc = np.zeros((*lead, rows, d_v), dtype=dtype)  # running sum of exp(score - m) v
        for j in range(0, t_k, block_k):
            # (..., bq, bk): the only scores that exist at this moment
            s = qi @ np.swapaxes(k[..., j : j + block_k, :], -1, -2)
            if mask is not None:
                s = np.where(mask[..., i : i + block_q, j : j + block_k], s, -np.inf)
            m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
            # a row with every key masked so far keeps m = -inf: shift it by 0, not inf - inf
            shift = m_new if mask is None else np.where(np.isneginf(m_new), 0, m_new)
            s -= shift
            p = np.exp(s, out=s)  # (..., bq, bk), unnormalised weights
            # the rescaling: l_sum and acc were sums against m; bring them to m_new
            correction = np.exp(m - shift)  # (..., bq, 1); 0 on the first block
            l_sum = l_sum * correction + p.sum(axis=-1, keepdims=True)
            acc *= correction
            acc += p @ v[..., j : j + block_k, :]
            m = m_new
            del s, p  # free this block before the next one is computed
        # (..., bq, d_v): divide by the sum once, at the end
        output[..., i : i + block_q, :] = acc / l_sum
        lse[..., i : i + block_q] = (m + np.log(l_sum))[..., 0]
    # --8<-- [end:tiled_loop]
    return TiledAttention(output, lse)


# --8<-- [end:tiled_attention]


def elu_plus_one(x) -> np.ndarray:
    """The feature map of Katharopoulos et al. (2020): ``elu(x) + 1``, positive everywhere.

    ``x + 1`` where ``x > 0`` and ``exp(x)`` elsewhere.

    Examples
    --------
    >>> print(elu_plus_one(np.array([-1.0, 0.0, 2.0])).round(4))
    [0.3679 1.     3.    ]
    """
    x = real_array("x", x)
    return np.where(x > 0, x + 1, np.exp(np.minimum(x, 0)))


# --8<-- [start:linear_attention]
def linear_attention(q, k, v, feature_map=elu_plus_one, causal: bool = False) -> np.ndarray:
    """Linear attention: softmax's ``exp(q·k)`` replaced by ``φ(q)·φ(k)``.

    Row i of the output is ``Σ_j φ(q_i)·φ(k_j) v_j / Σ_j φ(q_i)·φ(k_j)``
    (Katharopoulos et al. 2020). Because the weight factors into a part of
    the query and a part of the key, the sums over keys can be taken first:
    ``φ(K)ᵀ V`` is a ``d_k × d_v`` matrix, whatever ``T`` is. That costs
    about ``T·d_k·d_v`` multiply-adds against softmax attention's
    ``T²·(d_k + d_v)``: linear in ``T``, and fewer once ``T`` exceeds the
    head width (:func:`~qkv.linear_attention_flops` counts both). The
    weights are no longer a softmax of ``q·k``: a key's weight grows in
    proportion to its score, not exponentially, so one key takes nearly all
    the weight only with a far larger lead over the others than ``exp`` needs.

    With ``causal=True`` query i sums over keys ``0..i`` only: a running
    ``d_k × d_v`` state, updated once per position as a recurrent network
    would, so memory stays ``d_k × d_v`` per head.

    Parameters
    ----------
    q : array_like, shape (..., Tq, d_k)
    k : array_like, shape (..., Tk, d_k)
    v : array_like, shape (..., Tk, d_v)
    feature_map : callable
        ``φ``, applied to every row of ``q`` and ``k``; it must return an
        array of the same shape with no negative entries (so the weights are
        positive). Default :func:`elu_plus_one`.
    causal : bool
        Each query sees the keys up to its own position (needs Tq == Tk).

    Returns
    -------
    ndarray, shape (..., Tq, d_v)

    Raises
    ------
    ValueError
        On mismatched shapes, NaN or inf in the inputs, a feature map that
        returns another shape or negative numbers, a query whose weights sum
        to 0, or ``causal=True`` with ``Tq != Tk``.

    Examples
    --------
    With ``φ(x) = 1`` every key weighs the same, so each output row is the
    mean of the values (of those so far, when causal):

    >>> v = np.array([[1.0], [2.0], [6.0]])
    >>> ones = np.ones((3, 2))
    >>> print(linear_attention(ones, ones, v, feature_map=np.ones_like).ravel())
    [3. 3. 3.]
    >>> print(linear_attention(ones, ones, v, feature_map=np.ones_like, causal=True).ravel())
    [1.  1.5 3. ]
    """
    q = as_float_array("q", q)
    k = as_float_array("k", k)
    v = as_float_array("v", v)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must share d_k (their last dimension): got q {q.shape} and k {k.shape}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same number of positions Tk: got k {k.shape} and v {v.shape}"
        )
    if causal and q.shape[-2] != k.shape[-2]:
        raise ValueError(f"causal linear attention needs Tq == Tk, got q {q.shape} and k {k.shape}")
    if not callable(feature_map):
        raise ValueError(f"feature_map must be a function of an array, got {feature_map!r}")
    phi_q, phi_k = _features(feature_map, q, "q"), _features(feature_map, k, "k")

    if not causal:
        kv = np.swapaxes(phi_k, -1, -2) @ v  # (..., d_k, d_v): Σ_j φ(k_j) v_jᵀ, T·d_k·d_v
        z = phi_k.sum(axis=-2)  # (..., d_k): Σ_j φ(k_j)
        numerator = phi_q @ kv  # (..., Tq, d_v): T·d_k·d_v
        denominator = (phi_q @ z[..., None])[..., 0]  # (..., Tq)
    else:
        lead = np.broadcast_shapes(phi_q.shape[:-2], phi_k.shape[:-2], v.shape[:-2])
        d_k, d_v = phi_k.shape[-1], v.shape[-1]
        dtype = np.result_type(phi_q, phi_k, v)
        state = np.zeros((*lead, d_k, d_v), dtype=dtype)  # Σ_{j<=i} φ(k_j) v_jᵀ
        z = np.zeros((*lead, d_k), dtype=dtype)  # Σ_{j<=i} φ(k_j)
        numerator = np.empty((*lead, q.shape[-2], d_v), dtype=dtype)
        denominator = np.empty((*lead, q.shape[-2]), dtype=dtype)
        for i in range(q.shape[-2]):
            state += phi_k[..., i, :, None] * v[..., i, None, :]  # add key i's outer product
            z += phi_k[..., i, :]
            numerator[..., i, :] = (phi_q[..., i, None, :] @ state)[..., 0, :]
            denominator[..., i] = (phi_q[..., i, :] * z).sum(axis=-1)
    if not (denominator > 0).all():
        row = tuple(int(i) for i in np.argwhere(~(denominator > 0))[0])
        raise ValueError(
            f"linear_attention: the weights of query row {row} sum to 0; the feature map "
            f"must give every query some positive weight"
        )
    return numerator / denominator[..., None]


# --8<-- [end:linear_attention]


def _features(feature_map, x: np.ndarray, name: str) -> np.ndarray:
    """``feature_map(x)``, checked: same shape, finite, no negative entry."""
    phi = np.asarray(feature_map(x))
    if phi.shape != x.shape:
        raise ValueError(f"feature_map must keep the shape: {name} {x.shape} became {phi.shape}")
    if not np.isfinite(phi).all() or (phi < 0).any():
        raise ValueError(
            f"feature_map({name}) must be finite and >= 0 everywhere (the weights must be positive)"
        )
    return phi
