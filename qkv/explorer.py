"""Every state of the attention explorer, computed with qkv and packed for the browser.

The explorer page (URL ``explorer/``) lets a reader pick a query word, a head dimension
``d_k`` from 1 to 64 and whether to divide by ``√d_k``. It does no maths of its own: the
site build calls :func:`explorer_json` and the page only looks numbers up, so the browser
shows exactly what the tested functions compute.

The data are the shared toy example of :mod:`qkv.toy` (the words of ``SENTENCE``, seeded
random embeddings, and projections whose first ``d_k`` columns do not depend on ``d_k``,
so dragging the ``d_k`` slider adds dimensions to the same queries and keys).
"""

from __future__ import annotations

import json
from typing import NamedTuple

import numpy as np

from qkv import toy
from qkv.diagnostics import entropy
from qkv.dot_product import attention, scale_factor
from qkv.projections import project

D_K_MAX = 64
"""The largest head dimension the explorer offers (the seed's "typically 64")."""

D_V = 4
"""Width of the value vectors: small, so the blended output fits on a phone screen."""

DEFAULTS = {"stage": 3, "query": "she", "dk": 16, "scale": 1}
"""The state the page shows when its URL names none (the keys of its URL query)."""

STAGES = ("raw scores", "scaled scores", "softmax weights", "output")
"""What stage 1, 2, 3 and 4 of the explorer show."""

DECIMALS = 6
"""Every number in the exported data is rounded to this many decimals.

The JSON stores each number as an integer count of millionths (``0.553312`` is
``553312``): that drops the ``0.`` of every weight and keeps the page's data near 100 KB.
The page divides by ``10**DECIMALS``, which gives back the correctly rounded decimal.
"""


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


def explorer_state(query: str, d_k: int, scale: bool, words=toy.SENTENCE,
                   d_v: int = D_V) -> ExplorerState:
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


def to_fixed(x) -> list | int:
    """Numbers as integer counts of ``10**-DECIMALS`` (millionths), rounded to nearest.

    Examples
    --------
    >>> to_fixed([0.5533124, -10.8, 1e-9])
    [553312, -10800000, 0]
    """
    return np.rint(np.asarray(x, dtype=float) * 10**DECIMALS).astype(np.int64).tolist()


def explorer_data(words=toy.SENTENCE, d_v: int = D_V) -> dict:
    """Every state of the explorer as a JSON-able dict of millionths (see :data:`DECIMALS`).

    Indices: ``q`` is the query word's position in ``words``, ``d`` is ``d_k - 1`` and
    ``s`` is 0 for raw scores and 1 for scores divided by ``√d_k``.

    - ``raw[q][d]``: the T raw scores (they do not depend on the scale setting);
    - ``scaled[q][d]``: the T scores divided by ``√d_k`` (with scaling off the scores that
      reach the softmax are ``raw``, divided by 1);
    - ``weights[s][q][d]`` (T numbers), ``entropy[s][q][d]``, ``max_weight[s][q][d]``,
      ``output[s][q][d]`` (d_v numbers);
    - ``entropy_even``: the entropy of an even spread over the T keys, ``log T``;
    - ``values``: the T value vectors (T x d_v). They do not depend on ``d_k`` because the
      toy projections fix the value columns, so they are stored once.

    Examples
    --------
    >>> data = explorer_data()
    >>> data["words"], len(data["raw"][0]), len(data["weights"][1][0][15])
    (['she', 'drank', 'milk', 'from', 'a', 'cup'], 64, 6)
    >>> state = explorer_state("drank", 16, True)
    >>> data["entropy"][1][1][15] == to_fixed(state.entropy)
    True
    >>> print(data["max_weight"][1][1][15] / 10**data["decimals"] == round(state.max_weight, 6))
    True
    """
    words = list(words)
    states = {
        (s, qi, d): explorer_state(word, d + 1, bool(s), words, d_v)
        for s in (0, 1)
        for qi, word in enumerate(words)
        for d in range(D_K_MAX)
    }
    _, _, values = project(toy.embeddings(words), toy.projections(1, d_v=d_v))  # (T, d_v)

    def table(field: str, s: int = 0) -> list:
        return [[to_fixed(getattr(states[s, qi, d], field)) for d in range(D_K_MAX)]
                for qi in range(len(words))]

    return {
        "words": words,
        "d_model": toy.D_MODEL,
        "d_v": d_v,
        "d_k_max": D_K_MAX,
        "decimals": DECIMALS,
        "defaults": dict(DEFAULTS),
        "stages": list(STAGES),
        "values": to_fixed(values),
        "entropy_even": to_fixed(entropy(np.full(len(words), 1.0 / len(words)))),
        "raw": table("raw"),
        "scaled": table("scaled", s=1),
        "weights": [table("weights", s) for s in (0, 1)],
        "entropy": [table("entropy", s) for s in (0, 1)],
        "max_weight": [table("max_weight", s) for s in (0, 1)],
        "output": [table("output", s) for s in (0, 1)],
    }


def explorer_json() -> str:
    """:func:`explorer_data` as compact JSON text, as the site build writes it.

    Examples
    --------
    >>> text = explorer_json()
    >>> json.loads(text)["d_k_max"], ", " in text
    (64, False)
    """
    return json.dumps(explorer_data(), separators=(",", ":"), allow_nan=False)
