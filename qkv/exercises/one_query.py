"""The checker of one query's attention (the step-by-step chapter's exercise)."""

from __future__ import annotations

import numpy as np

from qkv.dot_product import attention
from qkv.exercises._verdict import (
    RANDOM_CASES,
    CheckResult,
    Wrong,
    as_pair,
    call,
    close,
    divisor_found,
    no_divisor,
    overflow,
    verdict,
    worst,
)


def _one_query_cases(rng):
    """(q, k, v, description): a query of d_k numbers, T keys and T values."""
    yield rng.normal(size=4), rng.normal(size=(5, 4)), rng.normal(size=(5, 3)), "5 keys, d_k = 4, d_v = 3"
    for _ in range(RANDOM_CASES):
        t, d_k, d_v = rng.integers(1, 9), rng.integers(1, 9), rng.integers(1, 7)
        yield (
            rng.normal(size=d_k),
            rng.normal(size=(t, d_k)),
            rng.normal(size=(t, d_v)),
            f"{t} keys, d_k = {d_k}, d_v = {d_v}",
        )
    yield rng.normal(size=4), rng.normal(size=(1, 4)), rng.normal(size=(1, 3)), "a single key"
    k = rng.normal(size=(4, 4))
    k[0] = 50.0
    yield np.full(4, 50.0), k, rng.normal(size=(4, 2)), "a score of 5000 (q and one key of 50s)"


def _one_query_case(fn, q, k, v, what: str) -> None:
    t, d_k, d_v = k.shape[0], k.shape[1], v.shape[1]
    weights, output = as_pair(call(fn, f"with {what}", q.copy(), k.copy(), v.copy()), f"with {what}")
    want = attention(q[None], k, v)  # one query: a (1, d_k) table of queries
    if weights.shape != (t,):
        raise Wrong(
            f"With {what}, your weights have shape {weights.shape}, not ({t},): one query against "
            f"{t} keys has one weight per key.",
            "Score the query against each key with k @ q, a vector of T numbers.",
        )
    if output.shape != (d_v,):
        if output.shape == (t,) and close(output, want.weights[0]):
            raise Wrong(
                f"Your output is the weights (one number per key), where the output has one number "
                f"per value column (d_v = {d_v}).",
                "The output is weights @ v, the weighted average of the value rows.",
            )
        if output.shape == (d_k,) and d_k != d_v:
            raise Wrong(
                f"Your output has d_k = {d_k} numbers, one per key column: it averages the keys.",
                "Average the values instead, weights @ v.",
            )
        raise Wrong(
            f"With {what}, your output has shape {output.shape}, not ({d_v},), one number per value column.",
            "The output is weights @ v.",
        )
    if not (np.isfinite(weights).all() and np.isfinite(output).all()):
        raise overflow(float(np.max(k @ q) / np.sqrt(d_k)))
    if not close(weights, want.weights[0]):
        divisor_found(weights, lambda c: attention(q[None], k, v, scale=1.0 / c).weights[0], d_k, d_v, t)
        total = float(weights.sum())
        if abs(total - 1.0) > 1e-9:
            raise Wrong(
                f"With {what}, your weights sum to {total:.10g}, not 1.",
                "Divide the exponentials by their sum, and by nothing else.",
            )
        gap, where = worst(weights, want.weights[0])
        raise Wrong(
            f"With {what}, your weight on key {where[0]} is off by {gap:.3g}, and {no_divisor(d_k, d_v, t)}.",
            "The weights are softmax(k @ q / √d_k), one per key.",
        )
    if not close(output, want.output[0]):
        gap, where = worst(output, want.output[0])
        raise Wrong(
            f"With {what}, your weights are right but your output is not: column {where[0]} is off "
            f"by {gap:.3g}.",
            "The output is weights @ v, the weighted average of the value rows.",
        )


def check_one_query_attention(fn, hint: bool = False) -> CheckResult:
    """Check your one-query attention, ``fn(q, k, v) -> (weights, output)``, against :func:`qkv.attention`.

    One query ``q`` of shape ``(d_k,)`` reads ``T`` keys ``k`` of shape ``(T, d_k)``
    and values ``v`` of shape ``(T, d_v)``; the weights have shape ``(T,)`` and the
    output ``(d_v,)``. It is ``qkv.attention`` for a single query: the same arguments,
    the same pair returned, without a mask.

    Parameters
    ----------
    fn : callable
        Your function, called as ``fn(q, k, v)``.
    hint : bool
        ``True`` adds the fix to a failure\'s message; without it the message names
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
    >>> from qkv import attention
    >>> check_one_query_attention(lambda q, k, v: tuple(r[0] for r in attention(q[None], k, v)))
    Passed: your attention matches qkv.attention on 100 random queries and on a single
    key and a score of 5000.
    """
    return verdict(
        "check_one_query_attention",
        fn,
        lambda f: [_one_query_case(f, *case) for case in _one_query_cases(np.random.default_rng(2))],
        f"Passed: your attention matches qkv.attention on {RANDOM_CASES} random queries and on a "
        "single key and a score of 5000.",
        hint=hint,
    )
