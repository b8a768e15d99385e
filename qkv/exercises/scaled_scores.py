"""The checker of the scaled scores (the why-scale chapter's exercise)."""

from __future__ import annotations

import numpy as np

from qkv.dot_product import softmax
from qkv.exercises._verdict import RANDOM_CASES, CheckResult, Wrong, as_array, call, close, verdict, worst

WIDE = 64  # the head width of the spread the passing sentence reports


def _score_cases(rng):
    """(q, k, description): T_q queries and T_k keys of d_k numbers each."""
    yield rng.normal(size=(3, 16)), rng.normal(size=(5, 16)), "3 queries, 5 keys, d_k = 16"
    for _ in range(RANDOM_CASES):
        t_q, t_k, d_k = rng.integers(1, 9), rng.integers(1, 9), rng.integers(2, 33)
        yield (
            rng.normal(size=(t_q, d_k)),
            rng.normal(size=(t_k, d_k)),
            f"{t_q} queries, {t_k} keys, d_k = {d_k}",
        )
    yield rng.normal(size=(1, 8)), rng.normal(size=(1, 8)), "one query and one key, d_k = 8"


def _divisors(d_k: int, t_q: int, t_k: int) -> list[tuple[str, float]]:
    """The wrong divisors a reader may have used, by name; one equal to √d_k here is left out."""
    right = float(np.sqrt(d_k))
    named = [
        (f"d_k = {d_k}", float(d_k)),
        (f"2 d_k = {2 * d_k} (d_k ** 1/2 is (d_k ** 1) / 2)", 2.0 * d_k),
        ("nothing (they are the raw scores)", 1.0),
        (f"√T_k = {np.sqrt(t_k):.4g}, the root of the number of keys", float(np.sqrt(t_k))),
        (f"√T_q = {np.sqrt(t_q):.4g}, the root of the number of queries", float(np.sqrt(t_q))),
        (f"1 / √d_k (they are multiplied by √d_k = {right:.4g})", 1.0 / right),
    ]
    out, seen = [], [right]
    for name, value in named:
        if not any(np.isclose(value, s) for s in seen):
            out.append((name, value))
            seen.append(value)
    return out


def _score_case(fn, q, k, what: str) -> None:
    (t_q, d_k), t_k = q.shape, k.shape[0]
    got = as_array(call(fn, f"with {what}", q.copy(), k.copy()), f"the scores with {what}")
    raw = q @ k.T  # (T_q, T_k)
    want = raw / np.sqrt(d_k)
    if got.shape != want.shape:
        if got.shape == want.T.shape and t_q != t_k:
            raise Wrong(
                f"With {what}, your scores have shape {got.shape}, not {want.shape}: one row per key "
                f"and one column per query, the table turned over.",
                "Put the queries first, q @ k.T: row i holds query i's scores against every key.",
            )
        raise Wrong(
            f"With {what}, your scores have shape {got.shape}, not {want.shape}: one row per query "
            f"and one column per key.",
            "The scores are q @ k.T, a (T_q, T_k) table, divided by √d_k.",
        )
    if close(got, want):
        return
    for name, value in _divisors(d_k, t_q, t_k):
        if close(got, raw / value):
            raise Wrong(
                f"With {what}, your scores are q · k divided by {name}, not by √d_k = {np.sqrt(d_k):.4g}.",
                "Divide by the square root of d_k, the width the query and key share "
                "(q.shape[-1] ** 0.5, with the brackets): that keeps the spread near 1 at every width.",
            )
    if close(got, softmax(want)) or close(got, softmax(raw)):
        raise Wrong(
            f"With {what}, each row of what you return sums to 1: those are weights, after softmax, "
            f"not scores.",
            "Stop before softmax: return q @ k.T / √d_k.",
        )
    gap, (i, j) = worst(got, want)
    raise Wrong(
        f"With {what}, your score of query {i} against key {j} is off by {gap:.3g}, and no divisor "
        f"of q · k we tried (√d_k, d_k, none, √T_k, √T_q) reproduces your scores.",
        "The score of query i and key j is q[i] · k[j] / √d_k: q @ k.T / np.sqrt(d_k).",
    )


def _spread(fn) -> tuple[float, float]:
    """The standard deviation of ``fn``'s scores and of the raw ones, 200 × 200 pairs at d_k = 64."""
    rng = np.random.default_rng(64)
    q, k = rng.normal(size=(200, WIDE)), rng.normal(size=(200, WIDE))
    return float(np.std(as_array(call(fn, f"at d_k = {WIDE}", q, k), "the scores"))), float(np.std(q @ k.T))


def check_scaled_scores(fn, hint: bool = False) -> CheckResult:
    """Check your ``scaled_scores(q, k)``, the scores ``q @ k.T / √d_k`` that softmax turns into weights.

    ``q`` of shape ``(T_q, d_k)`` holds the queries and ``k`` of shape ``(T_k, d_k)`` the
    keys; the scores have shape ``(T_q, T_k)``, row ``i`` holding query ``i``'s score against
    every key. A wrong divisor (``d_k``, none, the number of keys or of queries, ...) is named.

    Parameters
    ----------
    fn : callable
        Your function, called as ``fn(q, k)``.
    hint : bool
        ``True`` adds the fix to a failure's message; without it the message names
        the mistake only (``result.hint()`` gives the fix afterwards).

    Returns
    -------
    CheckResult

    Raises
    ------
    ValueError
        If ``fn`` cannot be called.

    Examples
    --------
    >>> check_scaled_scores(lambda q, k: q @ k.T / np.sqrt(q.shape[-1]))
    Passed: your scores match q @ k.T / √d_k on 100 random inputs; at d_k = 64 they
    spread with standard deviation 1.01, where the raw scores spread with 8.04.
    >>> check_scaled_scores(lambda q, k: q @ k.T / q.shape[-1])
    With 3 queries, 5 keys, d_k = 16, your scores are q · k divided by d_k = 16, not by
    √d_k = 4. Run the check again with hint=True for the fix.
    """

    spread: list[float] = []

    def run(f) -> None:
        for case in _score_cases(np.random.default_rng(9)):
            _score_case(f, *case)
        spread.extend(_spread(f))

    result = verdict("check_scaled_scores", fn, run, "", hint=hint)
    if not result.ok:
        return result
    scaled, raw = spread
    return CheckResult(
        True,
        f"Passed: your scores match q @ k.T / √d_k on {RANDOM_CASES} random inputs; at d_k = {WIDE} "
        f"they spread with standard deviation {scaled:.2f}, where the raw scores spread with {raw:.2f}.",
    )
