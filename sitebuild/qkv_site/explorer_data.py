"""The attention explorer's data: every state of ``qkv.toy.query_state``, packed as JSON.

The site build writes :func:`explorer_json` to ``explorer/data.json``; the page only looks
numbers up in it. Numbers are stored as integer millionths (:data:`DECIMALS`), so the
file is small and the browser shows exactly the decimals that ``qkv`` computed.
"""

from __future__ import annotations

import json

import numpy as np

from qkv import toy
from qkv.diagnostics import entropy
from qkv.projections import project
from qkv.toy import D_K_MAX, D_V, query_state

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
    >>> state = query_state("drank", 16, True)
    >>> data["entropy"][1][1][15] == to_fixed(state.entropy)
    True
    >>> print(data["max_weight"][1][1][15] / 10**data["decimals"] == round(state.max_weight, 6))
    True
    """
    words = list(words)
    states = {
        (s, qi, d): query_state(word, d + 1, bool(s), words, d_v)
        for s in (0, 1)
        for qi, word in enumerate(words)
        for d in range(D_K_MAX)
    }
    _, _, values = project(toy.embeddings(words), toy.projections(1, d_v=d_v))  # (T, d_v)

    def table(field: str, s: int = 0) -> list:
        return [
            [to_fixed(getattr(states[s, qi, d], field)) for d in range(D_K_MAX)] for qi in range(len(words))
        ]

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
