"""Exact one-sided tests for paired measurements, and the power of the sign test.

An experiment on minimal pairs gives one number per pair (how far the model's preference
moves towards the meant noun, say). Under "no effect" each number is as likely negative as
positive. Two exact tests ask whether the numbers lean positive:

- :func:`sign_test` counts the positive ones (a coin would give half);
- :func:`signed_rank_test` also weighs each by the rank of its size, so a few large moves
  one way and many tiny ones the other are told apart (Wilcoxon's signed-rank test).

:func:`chance_threshold` is the fewest successes the sign test needs, and
:func:`sign_test_power` the chance that a real rate reaches it with ``n`` pairs.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["chance_threshold", "sign_test", "sign_test_power", "signed_rank_test"]


def _check_count(successes, n) -> tuple[int, int]:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a whole number >= 1, got {n!r}")
    if isinstance(successes, bool) or not isinstance(successes, (int, np.integer)) or not 0 <= successes <= n:
        raise ValueError(f"successes must be a whole number from 0 to n={n}, got {successes!r}")
    return int(successes), int(n)


def _check_alpha(alpha) -> float:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1, got {alpha!r}")
    return float(alpha)


def sign_test(successes: int, n: int) -> float:
    """One-sided p-value of ``successes`` positive results out of ``n``: the chance that a
    fair coin gives at least as many heads.

    Examples
    --------
    >>> sign_test(16, 16) == 1 / 2**16, sign_test(0, 16)
    (True, 1.0)
    >>> round(sign_test(12, 16), 4)  # (1820 + 560 + 120 + 16 + 1) / 65536
    0.0384
    """
    successes, n = _check_count(successes, n)
    return sum(math.comb(n, m) for m in range(successes, n + 1)) / 2**n


def chance_threshold(n: int, alpha: float = 0.05) -> int:
    """The fewest successes out of ``n`` whose :func:`sign_test` p-value is below ``alpha``.

    Examples
    --------
    >>> chance_threshold(16), chance_threshold(48)
    (12, 31)
    """
    _check_count(0, n)
    alpha = _check_alpha(alpha)
    return next(k for k in range(n + 2) if k > n or sign_test(k, n) < alpha)


def sign_test_power(n: int, rate: float, alpha: float = 0.05) -> float:
    """The chance that ``n`` pairs, each positive with probability ``rate``, reach
    :func:`chance_threshold`: how often the sign test finds an effect of that size.

    Examples
    --------
    >>> round(sign_test_power(16, 0.7), 2), round(sign_test_power(48, 0.7), 2)
    (0.45, 0.84)
    """
    _check_count(0, n)
    if not 0 <= rate <= 1:
        raise ValueError(f"rate must be a probability from 0 to 1, got {rate!r}")
    need = chance_threshold(n, alpha)
    return sum(math.comb(n, m) * rate**m * (1 - rate) ** (n - m) for m in range(need, n + 1))


def signed_rank_test(differences) -> float:
    """One-sided exact p-value of Wilcoxon's signed-rank test that ``differences`` lean
    positive: rank the sizes (ties share their mean rank, zeros are dropped), add the ranks
    of the positive ones, and count how many of the 2**n sign patterns reach that sum.

    Examples
    --------
    >>> signed_rank_test([1.0, 2.0, 3.0]) == 1 / 8  # only "all positive" reaches 6
    True
    >>> signed_rank_test([-1.0, 2.0, 3.0])  # rank sums 5 or 6: 2 patterns of 8
    0.25
    """
    d = np.asarray(differences, dtype=np.float64)
    if d.ndim != 1 or not np.isfinite(d).all():
        raise ValueError(f"differences must be a 1-D array of finite numbers, got shape {d.shape}")
    d = d[d != 0]
    if d.size == 0:
        raise ValueError("every difference is 0: the test has nothing to rank")
    size = np.abs(d)
    order = np.argsort(size, kind="stable")
    ranks = np.empty(d.size)
    ranks[order] = np.arange(1, d.size + 1)
    for value in np.unique(size):  # ties: the mean of their ranks
        tied = size == value
        ranks[tied] = ranks[tied].mean()
    doubled = np.rint(2 * ranks).astype(int)  # mean ranks are halves: work in halves
    observed = int(doubled[d > 0].sum())
    # ways[s]: how many subsets of the ranks sum to s (each rank positive or not)
    ways = np.zeros(int(doubled.sum()) + 1)
    ways[0] = 1.0
    for r in doubled:
        ways[r:] = ways[r:] + ways[:-r].copy()
    return float(ways[observed:].sum() / 2.0**d.size)
