"""Every state of the attention explorer, computed with qkv.

The explorer page (URL ``explorer/``) lets a reader pick a query word, a head dimension
``d_k`` from 1 to 64 and whether to divide by ``√d_k``. It does no maths of its own: the
site build packs every :func:`explorer_state` into JSON (``qkv_site.explorer_data``, in
``sitebuild/``) and the page only looks numbers up, so the browser shows exactly what the
tested functions compute.

The data are the shared toy example of :mod:`qkv.toy` (the words of ``SENTENCE``, seeded
random embeddings, and projections whose first ``d_k`` columns do not depend on ``d_k``,
so dragging the ``d_k`` slider adds dimensions to the same queries and keys).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from qkv import toy
from qkv.diagnostics import entropy
from qkv.dot_product import attention, scale_factor
from qkv.projections import project
from qkv.toy import D_K_MAX, D_V


class ExplorerState(NamedTuple):
    """What the explorer shows for one query word, one ``d_k`` and one scale setting."""

    raw: np.ndarray
    """(T,): the query's dot product with every key, ``q · k_j``."""
    scaled: np.ndarray
    """(T,): the raw scores times the scale factor (``1/√d_k``, or 1 when scaling is off)."""
    weights: np.ndarray
    """(T,): softmax of the scaled scores; sums to 1."""
    entropy: float
    """Entropy of the weights in nats: 0 is all weight on one key, ``log T`` is even."""
    max_weight: float
    """The largest weight."""
    output: np.ndarray
    """(d_v,): the weighted blend of the value vectors."""


def _check(words, query: str, d_k: int, scale) -> None:
    if query not in words:
        raise ValueError(f"query must be one of the words {tuple(words)}, got {query!r}")
    if isinstance(d_k, bool) or not isinstance(d_k, int | np.integer) or not 1 <= d_k <= D_K_MAX:
        raise ValueError(f"d_k must be an integer from 1 to {D_K_MAX}, got {d_k!r}")
    if not isinstance(scale, bool | np.bool_):
        raise ValueError(f"scale must be True or False, got {scale!r}")


def explorer_state(query: str, d_k: int, scale: bool, words=toy.SENTENCE, d_v: int = D_V) -> ExplorerState:
    """Compute one state of the explorer with :func:`qkv.attention` on the toy data.

    Parameters
    ----------
    query : str
        The word whose query vector asks; one of ``words``.
    d_k : int
        Head dimension, 1 to 64: the width of the query and key vectors.
    scale : bool
        ``True`` divides the scores by ``√d_k`` before the softmax.
    words : sequence of str
        The sentence; its embeddings come from :func:`qkv.toy.embeddings`.
    d_v : int
        Width of the value vectors (and of the output).

    Returns
    -------
    ExplorerState
        Raw and scaled scores and weights, each ``(T,)``; the entropy and the largest
        weight; the output ``(d_v,)``.

    Raises
    ------
    ValueError
        If ``query`` is not one of ``words``, ``d_k`` is not an integer in 1..64, or
        ``scale`` is not a bool.

    Examples
    --------
    At ``d_k = 1`` the scale factor is ``1/√1 = 1``, so scaling changes nothing at all:

    >>> on, off = explorer_state("she", 1, True), explorer_state("she", 1, False)
    >>> bool(np.array_equal(on.weights, off.weights))
    True

    At ``d_k = 64`` without scaling the weights of "she" collapse onto one key:

    >>> collapsed = explorer_state("she", 64, False)
    >>> bool(collapsed.max_weight > 0.9), bool(collapsed.entropy < 0.01)
    (True, True)
    >>> print(explorer_state("she", 64, True).max_weight < 0.9)
    True
    """
    # --8<-- [start:explorer_state]
    _check(words, query, d_k, scale)
    x = toy.embeddings(words)  # (T, d_model)
    # (T, d_k), (T, d_k), (T, d_v)
    q, k, v = project(x, toy.projections(d_k, d_v=d_v))
    i = list(words).index(query)
    raw = q[i] @ k.T  # (T,): one dot product per key
    scaled = raw * scale_factor(bool(scale), d_k)
    # (1, T), (1, d_v): one query row against all six keys
    weights, output = attention(q[i : i + 1], k, v, scale=bool(scale))
    return ExplorerState(
        raw=raw,
        scaled=scaled,
        weights=weights[0],
        entropy=float(entropy(weights[0])),
        max_weight=float(weights[0].max()),
        output=output[0],
    )
    # --8<-- [end:explorer_state]
