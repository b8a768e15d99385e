"""What kind of head is this? Scores over many texts, each beside what an even spread gives.

A head's attention weights over a text of T tokens are a (T, T) lower triangle: row ``i``
is query ``i``, column ``j`` key ``j``. A kind of head is a rule that names, for each
query, the keys it would look at (its *targets*):

- ``"first"``: key 1, for queries 2..T (a head that parks its weight on the first token);
- ``"previous"``: key ``i - 1``, for queries 2..T;
- ``"duplicate"``: earlier keys that hold the same token as the query;
- ``"induction"``: the keys just after an earlier copy of the query's token, the token that
  came next last time (what a head needs to continue a repeated sequence).

:func:`score` is the weight a head puts on the targets, averaged over the queries that have
any; :func:`baseline` is the same mean for a head that spreads each query's weight evenly
over the keys it can see (``targets / i`` at query ``i``): a score means something only
well above it. Positions here count from 0, as in NumPy. The texts to score and the
threshold a score must pass are an experiment's choice, not this module's: the ones the
trained model is scored on are in :mod:`qkv.lab.texts`.

Examples
--------
Four tokens, the last a repeat of the second (ids 7, 8, 9, 8):

>>> ids = [7, 8, 9, 8]
>>> targets("duplicate", ids).astype(int)[3].tolist()   # query 3 finds the earlier 8
[0, 1, 0, 0]
>>> targets("induction", ids).astype(int)[3].tolist()   # ... and the 9 that followed it
[0, 0, 1, 0]
>>> round(baseline(targets("previous", ids)), 4)        # (1/2 + 1/3 + 1/4) / 3
0.3611
"""

from __future__ import annotations

import numpy as np

__all__ = ["KINDS", "baseline", "repeated_random_tokens", "score", "targets"]

KINDS = ("first", "previous", "duplicate", "induction")
"""The kinds of head scored here, in the order the site shows them."""


# --8<-- [start:targets]
def targets(kind: str, ids) -> np.ndarray:
    """(T, T) bool: ``True`` where key ``j`` is one of query ``i``'s targets for ``kind``."""
    ids = np.asarray(ids)
    if ids.ndim != 1 or len(ids) < 2:
        raise ValueError(f"ids must be a 1-D sequence of at least 2 token ids, got shape {ids.shape}")
    t = len(ids)
    i, j = np.arange(t)[:, None], np.arange(t)[None, :]  # query (column vector), key (row)
    same = (ids[:, None] == ids[None, :]) & (j < i)  # key j is an earlier copy of query i's token
    if kind == "first":
        return (j == 0) & (i > 0)
    if kind == "previous":
        return j == i - 1
    if kind == "duplicate":
        return same
    if kind == "induction":  # key j follows an earlier copy (at j - 1) of query i's token
        after = np.zeros_like(same)
        after[:, 1:] = same[:, :-1]
        return after & (j <= i)
    raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")


def score(weights, target) -> np.ndarray:
    """Mean weight on the targets, over the queries that have any: shape ``weights.shape[:-2]``.

    ``weights`` is (..., T, T) (all 30 x 9 heads at once, say), ``target`` the (T, T) array of
    :func:`targets`.
    """
    weights, target = np.asarray(weights, dtype=np.float64), np.asarray(target, dtype=bool)
    if weights.shape[-2:] != target.shape:
        raise ValueError(f"weights end in {weights.shape[-2:]}, targets are {target.shape}")
    asking = target.any(axis=-1)  # (T,): queries with at least one target
    if not asking.any():
        raise ValueError("no query of this text has a target of this kind")
    on_target = (weights * target).sum(axis=-1)  # (..., T): weight each query puts there
    return on_target[..., asking].mean(axis=-1)


def baseline(target) -> float:
    """The :func:`score` of a head that spreads each query's weight evenly over keys 0..i."""
    target = np.asarray(target, dtype=bool)
    t = target.shape[-1]
    even = np.tril(np.ones((t, t))) / np.arange(1, t + 1)[:, None]  # row i: 1/(i+1) each
    return float(score(even, target))


# --8<-- [end:targets]


def repeated_random_tokens(
    n_texts: int, length: int, seed: int, low: int = 1000, high: int = 20000
) -> np.ndarray:
    """``n_texts`` sequences of ``length`` distinct random token ids, each written twice:
    (n_texts, 2 * length).

    Random tokens carry no meaning and no grammar, so the only way to predict the second
    half is to find the earlier copy and take what came next. ``low``..``high`` skips the
    byte and control tokens at the start of the vocabulary.

    Examples
    --------
    >>> ids = repeated_random_tokens(2, 5, seed=0)
    >>> ids.shape, bool((ids[:, :5] == ids[:, 5:]).all())
    ((2, 10), True)
    """
    if n_texts < 1 or length < 2 or length > high - low:
        raise ValueError(
            f"need n_texts >= 1 and 2 <= length <= {high - low}, got n_texts={n_texts}, length={length}"
        )
    rng = np.random.default_rng(seed)
    halves = np.stack([rng.choice(np.arange(low, high), size=length, replace=False) for _ in range(n_texts)])
    return np.concatenate([halves, halves], axis=1)
