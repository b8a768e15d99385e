"""Every state of the attention explorer, computed with qkv.

The explorer page (docs/explorer.md) lets a reader pick a query word, a head
dimension d_k from 1 to 64 and whether to divide by √d_k. It does no maths of its
own: the site build packs every explorer_state into JSON (qkv_site.explorer_data)
and the page only looks numbers up, so the browser shows what qkv computes.
docs/things-to-try.md (snippets/things_to_try.py) prints its numbers with the
same function.

The data are qkv's shared toy example (qkv.toy): the words of SENTENCE, seeded
random embeddings, and projections whose first d_k columns do not depend on d_k,
so dragging the d_k slider adds dimensions to the same queries and keys.
"""

from typing import NamedTuple

import numpy as np

import qkv
from qkv import toy
from qkv.toy import D_K_MAX, D_V


class ExplorerState(NamedTuple):
    """What the explorer shows for one query word, d_k and scale setting."""

    raw: np.ndarray  # (T,): the query's dot product with every key, q · k_j
    scaled: np.ndarray  # (T,): raw times the scale factor (1/√d_k, or 1 when off)
    weights: np.ndarray  # (T,): softmax of the scaled scores; sums to 1
    entropy: float  # of the weights, in nats: 0 is one key, log T is even
    max_weight: float  # the largest weight
    output: np.ndarray  # (d_v,): the weighted blend of the value vectors


def _check(words, query, d_k, scale) -> None:
    if query not in words:
        raise ValueError(
            f"query must be one of the words {tuple(words)}, got {query!r}"
        )
    if (
        isinstance(d_k, bool)
        or not isinstance(d_k, int | np.integer)
        or not 1 <= d_k <= D_K_MAX
    ):
        raise ValueError(
            f"d_k must be an integer from 1 to {D_K_MAX}, got {d_k!r}"
        )
    if not isinstance(scale, bool | np.bool_):
        raise ValueError(f"scale must be True or False, got {scale!r}")


def explorer_state(
    query: str, d_k: int, scale: bool, words=toy.SENTENCE, d_v: int = D_V
) -> ExplorerState:
    """One state of the explorer: qkv.attention on the toy data.

    query: the word whose query vector asks, one of ``words``; d_k: the head
    dimension, 1 to 64; scale: True divides the scores by √d_k before the
    softmax; words: the sentence (embedded by qkv.toy.embeddings); d_v: the
    width of the values and the output. Raises ValueError for a query not in
    ``words``, a d_k that is not an integer in 1..64, or a scale not a bool.
    """
    # --8<-- [start:explorer_state]
    _check(words, query, d_k, scale)
    x = toy.embeddings(words)  # (T, d_model)
    # (T, d_k), (T, d_k), (T, d_v)
    q, k, v = qkv.project(x, toy.projections(d_k, d_v=d_v))
    i = list(words).index(query)
    raw = q[i] @ k.T  # (T,): one dot product per key
    scaled = raw * qkv.scale_factor(bool(scale), d_k)
    # (1, T), (1, d_v): one query row against all six keys
    weights, output = qkv.attention(q[i : i + 1], k, v, scale=bool(scale))
    return ExplorerState(
        raw=raw,
        scaled=scaled,
        weights=weights[0],
        entropy=float(qkv.entropy(weights[0])),
        max_weight=float(weights[0].max()),
        output=output[0],
    )
    # --8<-- [end:explorer_state]


if (
    __name__ == "__main__"
):  # run as a script: the default state of the explorer page
    she = explorer_state("she", d_k=16, scale=True)
    print("she, d_k = 16, scaled: weights", np.round(she.weights, 4))
