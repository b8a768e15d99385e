"""The checker of the scores through one merged matrix W_Q W_Kᵀ (the two-products chapter's exercise)."""

from __future__ import annotations

import numpy as np

from qkv.exercises._verdict import (
    RANDOM_CASES,
    CheckResult,
    Wrong,
    as_array,
    call,
    close,
    first_match,
    verdict,
    worst,
)


def _merged_cases(rng):
    """(x, w_q, w_k, description): T word vectors d_model wide and two (d_model, d_k) matrices.

    T, d_model and d_k differ from each other wherever the shapes allow it, so that a product
    in the wrong order or a divisor of the wrong width shows.
    """
    first = "T = 5, d_model = 6, d_k = 4"
    yield rng.normal(size=(5, 6)), rng.normal(size=(6, 4)), rng.normal(size=(6, 4)), first
    for _ in range(RANDOM_CASES):
        t, d_model, d_k = rng.integers(2, 9), rng.integers(2, 12), rng.integers(2, 9)
        yield (
            rng.normal(size=(t, d_model)),
            rng.normal(size=(d_model, d_k)),
            rng.normal(size=(d_model, d_k)),
            f"T = {t}, d_model = {d_model}, d_k = {d_k}",
        )
    yield rng.normal(size=(1, 6)), rng.normal(size=(6, 4)), rng.normal(size=(6, 4)), "a single word"


def _merged_case(fn, x, w_q, w_k, what: str) -> None:
    d_model, d_k = x.shape[1], w_q.shape[1]
    hint = "the merged matrix is w_q @ w_k.T, d_model × d_model, and the scores x @ merged @ x.T / √d_k"
    got = as_array(call(fn, f"with {what}", x.copy(), w_q.copy(), w_k.copy(), hint=hint), f"with {what}")
    merged = w_q @ w_k.T  # (d_model, d_model)
    want = (x @ w_q) @ (x @ w_k).T / np.sqrt(d_k)  # the scores as Q Kᵀ / √d_k: (T, T)
    if got.shape != want.shape:
        raise Wrong(
            f"With {what}, your scores have shape {got.shape}, not (T, T) = {want.shape}: one score "
            f"per pair of words.",
            "Put the words on both sides of the merged matrix: x @ merged @ x.T, (T, d_model) @ "
            "(d_model, d_model) @ (d_model, T)",
        )
    if close(got, want):
        return
    raw = x @ merged @ x.T
    first_match(
        got,
        [
            (
                f"With {what}, your scores are the transpose of the right ones: your entry [i, j] "
                f"is what word j's query gives word i's key.",
                "The merged matrix is w_q @ w_k.T (queries on the left), not w_k @ w_q.T.",
                lambda: want.T,
            ),
            (
                f"With {what}, your scores are √d_k = {np.sqrt(d_k):.4g} times too large: they are "
                f"not divided at all.",
                "Divide by √d_k, the width the queries and keys share, as Q Kᵀ / √d_k does.",
                lambda: raw,
            ),
            (
                f"With {what}, your scores are divided by √d_model = {np.sqrt(d_model):.4g}, the "
                f"width of the merged matrix, not by √d_k = {np.sqrt(d_k):.4g}.",
                "The merged matrix is d_model wide, but the dot products it stands for are d_k "
                "wide: divide by √d_k (w_q.shape[1]).",
                lambda: raw / np.sqrt(d_model) if d_model not in (d_k, d_k * d_k) else None,
            ),
            (
                f"With {what}, your scores are divided by d_k = {d_k}, not by its square root.",
                "Divide by √d_k, np.sqrt(w_q.shape[1]).",
                lambda: raw / d_k,
            ),
        ],
    )
    rows = got.sum(axis=-1)
    if np.all(got >= 0) and np.allclose(rows, 1.0, atol=1e-9):
        raise Wrong(
            f"With {what}, every row of yours adds up to 1: you returned weights, not scores.",
            "Return the scaled scores themselves; softmax comes after, in the next step.",
        )
    gap, where = worst(got, want)
    raise Wrong(
        f"With {what}, your score [{where[0]}, {where[1]}] is off by {gap:.3g}, and it is not the "
        f"transpose, the undivided scores or scores divided by √d_model or d_k.",
        "The scores are x @ (w_q @ w_k.T) @ x.T / √d_k.",
    )


def check_merged_scores(fn, hint: bool = False) -> CheckResult:
    """Check your scores through one merged matrix, ``fn(x, w_q, w_k) -> (T, T)``, against Q Kᵀ / √d_k.

    ``x`` holds ``T`` word vectors, shape ``(T, d_model)``; ``w_q`` and ``w_k`` are the
    query and key matrices, each ``(d_model, d_k)``. Your function returns the scaled
    scores, shape ``(T, T)``, which must equal ``(x @ w_q) @ (x @ w_k).T / √d_k``, the
    scores :func:`qkv.self_attention` softmaxes. The exercise is to get there through the
    one ``(d_model, d_model)`` matrix ``w_q @ w_k.T``; the checker compares what comes
    back, so it cannot tell which way you went.

    Parameters
    ----------
    fn : callable
        Your function, called as ``fn(x, w_q, w_k)``.
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
    >>> check_merged_scores(lambda x, w_q, w_k: x @ (w_q @ w_k.T) @ x.T / np.sqrt(w_q.shape[1]))
    Passed: your scores through W_Q W_Kᵀ match Q Kᵀ / √d_k on 100 random sentences and on a
    single word.
    >>> check_merged_scores(lambda x, w_q, w_k: x @ (w_k @ w_q.T) @ x.T / np.sqrt(w_q.shape[1]))
    With T = 5, d_model = 6, d_k = 4, your scores are the transpose of the right ones: your
    entry [i, j] is what word j's query gives word i's key. Run the check again with
    hint=True for the fix.
    """
    return verdict(
        "check_merged_scores",
        fn,
        lambda f: [_merged_case(f, *case) for case in _merged_cases(np.random.default_rng(3))],
        f"Passed: your scores through W_Q W_Kᵀ match Q Kᵀ / √d_k on {RANDOM_CASES} random sentences "
        "and on a single word.",
        hint=hint,
    )
