"""The checker of the online softmax (the attention-at-scale page's exercise)."""

from __future__ import annotations

import numpy as np

from qkv.dot_product import softmax
from qkv.exercises._verdict import (
    RANDOM_CASES,
    CheckResult,
    Wrong,
    as_array,
    call,
    close,
    first_match,
    overflow,
    verdict,
    worst,
)
from qkv.tiled import online_softmax


def _online_cases(rng):
    """(scores, block, description)."""
    yield np.array([1.0, 3.0, 2.0, 0.0, 5.0]), 2, "the scores [1, 3, 2, 0, 5] in blocks of 2"
    for i in range(RANDOM_CASES):
        shape = (
            (int(rng.integers(1, 13)),)
            if i < RANDOM_CASES // 2
            else tuple(rng.integers(1, 8, size=rng.integers(2, 4)))
        )
        block = int(rng.integers(1, shape[-1] + 3))
        yield rng.normal(0.0, 3.0, size=shape), block, f"random scores of shape {shape} in blocks of {block}"
    yield np.arange(10.0), 3, "rising scores 0 to 9 in blocks of 3"
    yield np.array([[2.0]]), 4, "a single score"
    masked = np.array([[-np.inf, -np.inf, 1.0, 2.0], [0.0, -np.inf, 3.0, -np.inf]])
    yield masked, 2, "a row whose first block is all -inf (masked keys)"
    yield 1000.0 + rng.normal(0.0, 3.0, size=(2, 9)), 4, "scores near 1000 in blocks of 4"


def _online_mistakes(z: np.ndarray, block: int):
    """(sentence, what that mistake returns) for the usual wrong online softmaxes."""
    n = z.shape[-1]
    starts = range(0, n, block)
    m = np.full((*z.shape[:-1], 1), -np.inf)
    s_kept, s_plain, maxima = np.zeros_like(m), np.zeros_like(m), []
    for start in starts:
        chunk = z[..., start : start + block]
        m_new = np.maximum(m, chunk.max(axis=-1, keepdims=True))
        e = np.exp(chunk - m_new).sum(axis=-1, keepdims=True)
        s_kept = s_kept * np.exp(m - m_new) + e  # right
        s_plain = s_plain + e  # never rescaled
        m = m_new
        maxima.append(m_new)
    stale = np.concatenate(
        [np.exp(z[..., a : a + block] - mt) for a, mt in zip(starts, maxima, strict=True)], axis=-1
    )
    per_block = np.concatenate([softmax(z[..., a : a + block]) for a in starts], axis=-1)
    yield (
        "Your weights sum to less than 1 in the rows where a later block raised the maximum: the "
        "running sum is not rescaled when the maximum moves.",
        "Multiply the sum kept so far by exp(m_old - m_new) before adding the new block's exponentials.",
        lambda: np.exp(z - m) / s_plain,
    )
    yield (
        "Your weights are too large in the blocks read before the row's maximum: each block's "
        "exponentials are taken against the maximum known when it was read, and never brought to "
        "the final maximum.",
        "Multiply each block's exponentials by exp(m_then - m_final) at the end.",
        lambda: stale / s_kept,
    )
    yield (
        "The last, shorter block is left out: its weights are 0 when block does not divide the row.",
        "Loop over range(0, n, block) and let the last slice be shorter.",
        lambda: (
            np.concatenate(
                [softmax(z[..., : n - n % block]), np.zeros_like(z[..., n - n % block :])], axis=-1
            )
            if n % block and n > block
            else None
        ),
    )
    yield (
        f"Your weights sum to 1 in each block ({len(starts)} in all per row), not over the row.",
        "Normalise by the running sum of the whole row, not block by block.",
        lambda: per_block if len(starts) > 1 else None,
    )


def _online_case(fn, z: np.ndarray, block: int, what: str) -> None:
    # the single rows come first: a table that fails after them fails for being a table
    rows = z.ndim > 1
    row_fix = "Keep one running maximum and sum per row (axis=-1, keepdims=True)."
    on = f"on {what}, after passing on single rows" if rows else f"on {what}"
    got = as_array(call(fn, on, z.copy(), block, hint=row_fix[:-1] if rows else ""), what)
    want = online_softmax(z, block=block)
    if got.shape != want.shape:
        raise Wrong(
            f"On {what}, your function returned shape {got.shape}, not the scores' shape {z.shape}.",
            "One weight per score: keep every axis.",
        )
    if close(got, want):
        return
    if not np.isfinite(got).all():
        if np.isneginf(z).any():
            raise Wrong(
                "A row whose first block is all -inf (every key masked so far) comes out nan: while "
                "the running maximum is still -inf, exp(-inf - (-inf)) is nan.",
                "Shift by 0 while the running maximum is -inf, as qkv.online_softmax does.",
            )
        raise overflow(float(np.max(z)))
    first_match(got, _online_mistakes(z, block))
    n = z.shape[-1]
    tail = n % block
    if tail and close(got[..., : n - tail], want[..., : n - tail]):
        raise Wrong(
            f"On {what}, the last, shorter block ({tail} score{'s' * (tail > 1)}) is wrong, the "
            f"others are right.",
            "When block does not divide the row, loop over range(0, n, block) and let the last "
            "slice be shorter.",
        )
    gap, where = worst(got, want)
    raise Wrong(
        f"On {what}, your weights differ from softmax's by up to {gap:.3g} (at index {where})"
        + (", after passing on single rows." if rows else "."),
        row_fix if rows else "Keep a running maximum m and sum s; rescale s by exp(m_old - m_new).",
    )


def check_online_softmax(fn, hint: bool = False) -> CheckResult:
    """Check your ``online_softmax(z, block)`` against :func:`qkv.online_softmax`.

    Softmax along the last axis, reading each row a block of ``block`` scores at a
    time with a running maximum and a running sum. Blocks need not divide the row;
    rows may have ``-inf`` (masked) scores, even a whole block of them, and scores
    near 1000.

    Parameters
    ----------
    fn : callable
        Your function, called as ``fn(z, block)``.
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
    >>> from qkv import online_softmax
    >>> check_online_softmax(online_softmax)
    Passed: your online softmax matches softmax on 100 random inputs and on a single score,
    a block of -inf scores, and scores near 1000.
    """
    return verdict(
        "check_online_softmax",
        fn,
        lambda f: [_online_case(f, *case) for case in _online_cases(np.random.default_rng(6))],
        f"Passed: your online softmax matches softmax on {RANDOM_CASES} random inputs and on a single "
        "score, a block of -inf scores, and scores near 1000.",
        hint=hint,
    )
