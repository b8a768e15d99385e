"""The small, seeded examples the chapters, figures and explorer share.

Every example on the site starts here, so a number on one page can be checked
against the same number on another.
"""

from __future__ import annotations

import numpy as np

from qkv.projections import Projections

SENTENCE = ("she", "drank", "milk", "from", "a", "cup")
"""Six words, each once, so a word names one query and one key."""

D_MODEL = 16
"""Width of the toy embeddings."""

D_K = 8
"""The site's one toy head width for queries and keys (pages that vary it say so)."""

D_V = 4
"""The site's one toy value width: different from ``D_K`` so a reader can tell them apart."""


def embeddings(words=SENTENCE, d_model: int = D_MODEL, seed: int = 0) -> np.ndarray:
    """Seeded embeddings with unit-variance entries, one row per word: (T, d_model).

    Examples
    --------
    >>> embeddings().shape
    (6, 16)
    """
    rng = np.random.default_rng(seed)
    return rng.normal(0.0, 1.0, (len(words), d_model))


def projections(
    d_k: int,
    d_v: int | None = None,
    d_model: int = D_MODEL,
    seed: int = 1,
    max_d: int = 64,
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
    if not (1 <= d_k <= max_d and 1 <= d_v <= max_d):
        raise ValueError(
            f"d_k and d_v must be between 1 and {max_d}, got d_k={d_k}, d_v={d_v}"
        )
    full = Projections.random(np.random.default_rng(seed), d_model, max_d, max_d)
    return Projections(full.w_q[:, :d_k], full.w_k[:, :d_k], full.w_v[:, :d_v])
