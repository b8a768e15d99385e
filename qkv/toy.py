"""The small, seeded examples the chapters, figures and explorer share.

Every example on the site starts here, so a number on one page can be checked
against the same number on another.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from qkv._checks import whole_number
from qkv.diagnostics import entropy
from qkv.dot_product import attention, scale_factor
from qkv.projections import Projections, project

SENTENCE = ("she", "drank", "milk", "from", "a", "cup")
"""Six words, each once, so a word names one query and one key."""

D_MODEL = 16
"""Width of the toy embeddings."""

D_K = 8
"""The site's one toy head width for queries and keys (pages that vary it say so)."""

D_V = 4
"""The site's one toy value width: different from ``D_K`` so a reader can tell them apart."""

D_K_MAX = 64
"""The widest query/key width :func:`projections` draws (the seed's "typically 64"); every
narrower head is its first columns."""


def embeddings(words=SENTENCE, d_model: int = D_MODEL, seed: int = 0) -> np.ndarray:
    """Seeded embeddings with unit-variance entries, one row per word: (T, d_model).

    Examples
    --------
    >>> embeddings().shape
    (6, 16)
    """
    rng = np.random.default_rng(seed)
    return rng.normal(0.0, 1.0, (len(words), whole_number("d_model", d_model, minimum=1)))


def projections(
    d_k: int,
    d_v: int | None = None,
    d_model: int = D_MODEL,
    seed: int = 1,
    max_d: int = D_K_MAX,
) -> Projections:
    """Seeded projections whose first ``d_k`` columns do not depend on ``d_k``.

    The matrices for ``d_k`` are the first ``d_k`` columns of those for ``max_d``, so
    growing ``d_k`` adds dimensions to the same queries and keys instead of drawing new
    ones: a slider over ``d_k`` moves smoothly.

    Examples
    --------
    >>> small, big = projections(4), projections(64)
    >>> bool(np.array_equal(small.w_q, big.w_q[:, :4]))
    True
    """
    d_v = d_k if d_v is None else d_v
    for name, value in (("d_k", d_k), ("d_v", d_v)):
        if whole_number(name, value, minimum=1) > max_d:
            raise ValueError(f"{name} must be between 1 and {max_d}, got {name}={value}")
    full = Projections.random(np.random.default_rng(seed), d_model, max_d, max_d)
    return Projections(full.w_q[:, :d_k], full.w_k[:, :d_k], full.w_v[:, :d_v])


# The hand-built toy: the same sentence with embeddings and matrices written by hand, so
# that every weight can be explained. The random toy above is for the mechanism (shapes,
# statistics, what tying two matrices does); this one is for the story (why *drank*
# looks for *milk*). Both use D_K and D_V.

# --8<-- [start:features]
FEATURES = ("person", "verb", "liquid", "container", "countable", "preposition", "article", "dairy")
"""The named features of the hand-built toy: one embedding column each."""

WORD_FEATURES = {
    "she": ("person",),
    "drank": ("verb",),
    "milk": ("liquid", "dairy"),
    "from": ("preposition",),
    "a": ("article",),
    "cup": ("container", "countable"),
}
"""Which features each word of SENTENCE has."""


def feature_embeddings() -> np.ndarray:
    """The hand-built embeddings: 1 where a word has a feature, else 0. (T, len(FEATURES))

    Examples
    --------
    >>> x = feature_embeddings()
    >>> x.shape, x[SENTENCE.index("milk")].tolist()
    ((6, 8), [0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0])
    """
    x = np.zeros((len(SENTENCE), len(FEATURES)))
    for i, word in enumerate(SENTENCE):
        for feature in WORD_FEATURES[word]:
            x[i, FEATURES.index(feature)] = 1.0
    return x


# --8<-- [end:features]


# --8<-- [start:hand_built]
VALUE_COLUMNS = ("person", "verb", "dairy", "container")
"""What the hand-built values carry: D_V = 4 of the eight features."""


def hand_built_projections() -> Projections:
    """W_Q, W_K, W_V written by hand over FEATURES: (8, D_K), (8, D_K), (8, D_V).

    Queries and keys share one column per feature (D_K = 8 = len(FEATURES)): a query
    puts weight on the features its word looks for, a key shows the features its word
    can be found by, so a score is large when one word has what the other looks for.

    Examples
    --------
    >>> from qkv import self_attention
    >>> weights = self_attention(feature_embeddings(), hand_built_projections()).weights
    >>> drank, milk = SENTENCE.index("drank"), SENTENCE.index("milk")
    >>> int(weights[drank].argmax()) == milk
    True
    """
    f = FEATURES.index
    w_q = np.zeros((len(FEATURES), D_K))  # row: what a word is; column: what it looks for
    w_q[f("verb"), f("liquid")] = 8.0  # the verb (drank) looks for something to drink
    w_q[f("verb"), f("person")] = 4.0  # and, less keenly, for who did it
    w_q[f("person"), f("verb")] = 4.0  # a subject looks for its verb
    w_q[f("liquid"), f("verb")] = 4.0  # so does the thing that was drunk
    w_q[f("preposition"), f("container")] = 8.0  # "from" looks for what held it
    w_q[f("article"), f("countable")] = 8.0  # "a" looks for something you can count
    w_q[f("container"), f("liquid")] = 4.0  # a container looks for what it holds

    w_k = np.zeros((len(FEATURES), D_K))  # row: what a word is; column: what it shows
    for name in ("person", "verb", "liquid", "container", "countable"):
        w_k[f(name), f(name)] = 1.0  # no one looks for the last three features here

    w_v = np.zeros((len(FEATURES), D_V))  # row: what a word is; column: what it hands over
    for column, name in enumerate(VALUE_COLUMNS):
        w_v[f(name), column] = 1.0  # milk is found as a liquid but hands over "dairy"
    return Projections(w_q, w_k, w_v)


# --8<-- [end:hand_built]


class QueryState(NamedTuple):
    """One query word's attention over the toy sentence, stage by stage."""

    raw: np.ndarray  # (T,): the query's dot product with every key, q · k_j
    scaled: np.ndarray  # (T,): raw times the scale factor (1/√d_k, or 1 when off)
    weights: np.ndarray  # (T,): softmax of the scaled scores; sums to 1
    entropy: float  # of the weights, in nats: 0 is one key, log T is even
    max_weight: float  # the largest weight
    output: np.ndarray  # (d_v,): the weighted blend of the value vectors


def query_state(query: str, d_k: int, scale: bool, words=SENTENCE, d_v: int = D_V) -> QueryState:
    """One query word's scores, weights and output over ``words``, at head width ``d_k``.

    The toy's embeddings and projections, run through ``qkv.attention`` for the one query:
    what the explorer page shows for a word, a width and the scale setting (the site's
    build computes every state with this function, and the page only looks them up).

    Parameters
    ----------
    query : str
        The word whose query asks, one of ``words``.
    d_k : int
        The query/key width, 1 to :data:`D_K_MAX`; each width is the first columns of the
        widest, so a wider head adds dimensions to the same queries and keys.
    scale : bool
        True divides the scores by √d_k before the softmax.
    words : tuple of str
        The sentence, embedded by :func:`embeddings`.
    d_v : int
        The width of the values and of the output.

    Raises
    ------
    ValueError
        For a query not in ``words``, a ``d_k`` that is not a whole number in 1..64, or a
        ``scale`` that is not a bool.

    Examples
    --------
    >>> state = query_state("drank", d_k=16, scale=True)
    >>> state.weights.shape, round(float(state.weights.sum()), 12)
    ((6,), 1.0)
    """
    if query not in words:
        raise ValueError(f"query must be one of the words {tuple(words)}, got {query!r}")
    if isinstance(d_k, bool) or not isinstance(d_k, int | np.integer) or not 1 <= d_k <= D_K_MAX:
        raise ValueError(f"d_k must be an integer from 1 to {D_K_MAX}, got {d_k!r}")
    if not isinstance(scale, bool | np.bool_):
        raise ValueError(f"scale must be True or False, got {scale!r}")
    # --8<-- [start:query_state]
    x = embeddings(words)  # (T, d_model)
    q, k, v = project(x, projections(d_k, d_v=d_v))  # (T, d_k), (T, d_k), (T, d_v)
    i = list(words).index(query)
    raw = q[i] @ k.T  # (T,): one dot product per key
    scaled = raw * scale_factor(bool(scale), d_k)
    # (1, T), (1, d_v): one query row against all the keys
    weights, output = attention(q[i : i + 1], k, v, scale=bool(scale))
    return QueryState(
        raw=raw,
        scaled=scaled,
        weights=weights[0],
        entropy=float(entropy(weights[0])),
        max_weight=float(weights[0].max()),
        output=output[0],
    )
    # --8<-- [end:query_state]
