"""Measuring why attention divides by √d_k: score spread, softmax saturation, gradient size.

The argument for the scale is statistical: if the components of a query and a key are
independent with mean 0 and variance 1, the dot product ``q·k`` is a sum of ``d_k`` terms
of variance 1, so its variance is ``d_k`` and its standard deviation ``√d_k``. These
functions draw many such queries and keys and measure what the argument predicts.

Every function is seeded. Draws for different ``d_k`` come from independent random
streams (the generator is seeded with ``[seed, d_k]``), so comparing two ``d_k`` compares
two independent samples.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from qkv.diagnostics import checked_weights, entropy
from qkv.dot_product import attention, scale_factor

_CHUNK = 2048  # draws generated at a time, so d_k = 512 does not need gigabytes
_CHUNK_NUMBERS = _CHUNK * 6 * 512  # and fewer when a draw holds many keys (512 keys)


def _check_counts(**counts: int) -> None:
    for name, value in counts.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive whole number, got {value!r}")


def draw_queries_keys(
    d_k: int, n_draws: int, n_keys: int = 1, seed: int = 0
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield independent standard-normal queries and keys, a chunk of draws at a time.

    Each draw is one query and ``n_keys`` keys whose ``d_k`` components are independent
    with mean 0 and variance 1: exactly the assumptions of the √d_k argument.

    Parameters
    ----------
    d_k : int
        Dimension of each query and key.
    n_draws : int
        Total number of draws, split into chunks of at most 2048 (fewer when
        ``n_keys * d_k`` exceeds 3072, so that a chunk holds at most 6.3 million keys'
        components).
    n_keys : int
        Keys per draw (the query attends over them).
    seed : int
        The generator is seeded with ``[seed, d_k]``.

    Yields
    ------
    (q, k) : ndarray, shapes (m, 1, d_k) and (m, n_keys, d_k)
        ``m`` draws of this chunk; the ``m`` add up to ``n_draws``.

    Examples
    --------
    >>> chunks = list(draw_queries_keys(d_k=64, n_draws=3000, n_keys=6))
    >>> [(q.shape, k.shape) for q, k in chunks]
    [((2048, 1, 64), (2048, 6, 64)), ((952, 1, 64), (952, 6, 64))]
    """
    _check_counts(d_k=d_k, n_draws=n_draws, n_keys=n_keys)
    rng = np.random.default_rng([seed, d_k])
    chunk = max(1, min(_CHUNK, _CHUNK_NUMBERS // (n_keys * d_k)))
    for start in range(0, n_draws, chunk):
        m = min(chunk, n_draws - start)
        q = rng.standard_normal((m, 1, d_k))  # (m, 1, d_k): one query per draw
        k = rng.standard_normal((m, n_keys, d_k))  # (m, n_keys, d_k)
        yield q, k


def score_samples(d_k: int, scale=True, n_draws: int = 20_000, seed: int = 0) -> np.ndarray:
    """Scores ``q·k × scale_factor(scale, d_k)`` of ``n_draws`` independent query-key pairs.

    Parameters
    ----------
    d_k : int
    scale : bool or float
        As in :func:`qkv.attention`: ``True`` divides by ``√d_k``, ``False`` leaves raw.
    n_draws : int
    seed : int

    Returns
    -------
    ndarray, shape (n_draws,)

    Examples
    --------
    The raw scores spread like ``√d_k``; the scaled ones keep a standard deviation of 1:

    >>> print(score_samples(64, scale=False).std().round(1), score_samples(64).std().round(1))
    8.0 1.0
    """
    factor = scale_factor(scale, d_k)
    parts = [
        (q[:, 0] * k[:, 0]).sum(axis=-1) * factor  # (m,): one dot product per draw
        for q, k in draw_queries_keys(d_k, n_draws, n_keys=1, seed=seed)
    ]
    return np.concatenate(parts)


def score_std(d_k: int, scale=True, n_draws: int = 20_000, seed: int = 0) -> float:
    """Standard deviation of :func:`score_samples`: the typical size of a score.

    Examples
    --------
    The raw scores at d_k = 64 are about √64 = 8 times the size of those at d_k = 1:

    >>> print(round(score_std(64, scale=False) / score_std(1, scale=False)))
    8
    """
    return float(score_samples(d_k, scale=scale, n_draws=n_draws, seed=seed).std())


def jacobian_norm(weights) -> np.ndarray:
    """Frobenius norm of the softmax Jacobian at each row of ``weights``.

    The size of the gradient that flows from the weights back to the scores. It is
    ``√(n-1)/n`` for uniform weights over ``n`` keys and 0 for one-hot weights.

    Parameters
    ----------
    weights : array_like, shape (..., n)

    Returns
    -------
    ndarray, shape (...)

    Examples
    --------
    >>> print(jacobian_norm([[0.25, 0.25, 0.25, 0.25], [1.0, 0.0, 0.0, 0.0]]).round(4))
    [0.433 0.   ]
    """
    w = checked_weights(weights)  # (..., n)
    # J = diag(w) - w wᵀ: diagonal entries w_i - w_i², off-diagonal -w_i w_j. Their squares
    # add up to Σw² - 2Σw³ + (Σw²)², so the (n, n) matrix is never built (512 keys).
    squares = (w**2).sum(axis=-1)  # (...)
    cubes = (w**3).sum(axis=-1)
    return np.sqrt(np.maximum(squares - 2 * cubes + squares**2, 0.0))


def query_gradient_norm(weights, k, factor: float = 1.0) -> np.ndarray:
    """Frobenius norm of ∂weights/∂q, for weights = softmax(factor · k q).

    By the chain rule ∂w/∂q = factor · J k with J = diag(w) - w wᵀ. Row i of J k is
    ``w_i (k_i - k̄)``, where ``k̄ = Σ_j w_j k_j`` is the weighted mean key, so the norm
    is ``factor · √(Σ_i w_i² ‖k_i - k̄‖²)`` and needs no (n, n) matrix.

    Parameters
    ----------
    weights : array_like, shape (..., n)
        One query's weights over ``n`` keys.
    k : array_like, shape (..., n, d_k)
        The keys that produced them.
    factor : float
        The scale factor the scores were multiplied by (1 when unscaled).

    Returns
    -------
    ndarray, shape (...)

    Examples
    --------
    One-hot weights do not move when the query moves; even weights over two keys do:

    >>> k = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> print(query_gradient_norm([1.0, 0.0], k), query_gradient_norm([0.5, 0.5], k).round(4))
    0.0 0.5
    """
    w = checked_weights(weights)  # (..., n)
    k = np.asarray(k, dtype=float)
    if k.ndim < 2 or k.shape[:-1] != w.shape:
        raise ValueError(f"k must have shape (..., n, d_k) = {w.shape} + (d_k,), got shape {k.shape}")
    mean_key = (w[..., None] * k).sum(axis=-2, keepdims=True)  # (..., 1, d_k): k̄
    spread = ((k - mean_key) ** 2).sum(axis=-1)  # (..., n): ‖k_i - k̄‖²
    return abs(factor) * np.sqrt((w**2 * spread).sum(axis=-1))


class Saturation(NamedTuple):
    """Per-draw measurements of how peaked softmax is; each field has shape (n_draws,)."""

    max_weight: np.ndarray
    """The largest weight of the query: 1/n_keys when uniform, 1 when one-hot."""
    entropy: np.ndarray
    """Entropy of the weights in nats: log(n_keys) when uniform, 0 when one-hot."""
    jacobian_norm: np.ndarray
    """Frobenius norm of the softmax Jacobian: the size of the gradient to the scores."""
    query_gradient_norm: np.ndarray
    """Frobenius norm of d(weights)/d(query) = factor · J K: the gradient that reaches q."""


def saturation(d_k: int, scale=True, n_keys: int = 6, n_draws: int = 10_000, seed: int = 0) -> Saturation:
    """Run :func:`qkv.attention` on random queries and keys and measure its softmax.

    One query attends over ``n_keys`` keys per draw (6 by default, the length of the
    toy sentence).

    Parameters
    ----------
    d_k : int
    scale : bool or float
        Passed to :func:`qkv.attention`.
    n_keys : int
    n_draws : int
    seed : int

    Returns
    -------
    Saturation
        Largest weight, entropy, softmax-Jacobian norm and query-gradient norm of
        every draw.

    Examples
    --------
    At d_k = 64 the unscaled softmax is close to one-hot on average; the scaled one is not:

    >>> raw, scaled = saturation(64, scale=False), saturation(64, scale=True)
    >>> print(raw.max_weight.mean().round(2), scaled.max_weight.mean().round(2))
    0.89 0.42
    """
    _check_counts(n_keys=n_keys)
    factor = scale_factor(scale, d_k)
    found = []
    for q, k in draw_queries_keys(d_k, n_draws, n_keys=n_keys, seed=seed):
        values = np.zeros((q.shape[0], n_keys, 1))  # values do not change the weights
        w = attention(q, k, values, scale=scale).weights[:, 0]  # (m, n_keys)
        # scores = factor · k q, so d(weights)/dq = J · factor · k: (m, n_keys, d_k)
        query_grad = query_gradient_norm(w, k, factor)  # (m,)
        found.append((w.max(axis=-1), entropy(w), jacobian_norm(w), query_grad))
    return Saturation(*(np.concatenate(parts) for parts in zip(*found, strict=True)))


class ScaleEffect(NamedTuple):
    """What leaving the scale out does for one query over ``n_keys`` keys at one ``d_k``.

    Each pair is ``(unscaled, scaled)``, measured on the same draws.
    """

    n_keys: int
    copying: tuple[float, float]
    """Share of queries whose largest weight exceeds the threshold: they copy one value."""
    median_query_gradient: tuple[float, float]
    """Median of ‖∂weights/∂q‖ over the draws: how much the weights move when q moves."""


def scale_effect(
    d_k: int, n_keys: int, threshold: float = 0.95, n_draws: int = 2_000, seed: int = 0
) -> ScaleEffect:
    """Measure, without the scale and with it, how many queries copy one value and how
    large the gradient that reaches them is.

    Every draw is one query over ``n_keys`` keys with independent N(0, 1) components, as
    in :func:`saturation`; the keys are drawn once and scored both ways.

    Parameters
    ----------
    d_k : int
    n_keys : int
        Keys each query attends over.
    threshold : float
        A query "copies one value" when its largest weight exceeds this (0 < threshold < 1).
    n_draws : int
    seed : int
        Both arms see the same draws (:func:`draw_queries_keys` with this seed).

    Returns
    -------
    ScaleEffect

    Examples
    --------
    At d_k = 64 without the scale, fewer queries copy one value when there are more keys:

    >>> few, many = scale_effect(64, n_keys=6), scale_effect(64, n_keys=64)
    >>> print(few.copying[0] > many.copying[0] > 0.25, many.copying[1])
    True 0.0
    """
    if not 0 < threshold < 1:
        raise ValueError(f"threshold must lie strictly between 0 and 1, got {threshold!r}")
    _check_counts(n_keys=n_keys)
    largest = {False: [], True: []}  # scale -> per chunk, (m,) largest weights
    gradient = {False: [], True: []}  # scale -> per chunk, (m,) norms of d(weights)/dq
    for q, k in draw_queries_keys(d_k, n_draws, n_keys=n_keys, seed=seed):
        values = np.zeros((q.shape[0], n_keys, 1))  # values do not change the weights
        for scale in (False, True):
            w = attention(q, k, values, scale=scale).weights[:, 0]  # (m, n_keys)
            largest[scale].append(w.max(axis=-1))
            gradient[scale].append(query_gradient_norm(w, k, scale_factor(scale, d_k)))
    return ScaleEffect(
        n_keys,
        tuple(float((np.concatenate(largest[s]) > threshold).mean()) for s in (False, True)),
        tuple(float(np.median(np.concatenate(gradient[s]))) for s in (False, True)),
    )
