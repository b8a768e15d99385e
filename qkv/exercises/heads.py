"""The checker of splitting into heads (the multi-head chapter's exercise)."""

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
from qkv.multihead import split_heads


def _split_cases(rng):
    """(x, n_heads, description)."""
    yield np.arange(24.0).reshape(3, 8), 2, "x = np.arange(24.0).reshape(3, 8) and n_heads = 2"
    yield np.arange(72.0).reshape(2, 3, 12), 3, "a batch x of shape (2, 3, 12) and n_heads = 3"
    for _ in range(RANDOM_CASES):
        lead = tuple(rng.integers(1, 4, size=rng.integers(0, 3)))
        n_heads, d_head, t = (int(i) for i in rng.integers(1, 5, size=3))
        shape = (*lead, t, n_heads * d_head)
        yield rng.normal(size=shape), n_heads, f"x of shape {shape} and n_heads = {n_heads}"
    yield np.ones((1, 6)), 1, "one head"
    yield np.arange(6.0).reshape(1, 6), 6, "heads one number wide (n_heads = 6, d_head = 1)"


def _split_case(fn, x: np.ndarray, n_heads: int, what: str) -> None:
    got = as_array(call(fn, f"on {what}", x.copy(), n_heads), what)
    want = split_heads(x, n_heads)
    *lead, t, width = x.shape
    d_head = width // n_heads
    if got.shape != want.shape:
        if got.shape == (*lead, t, n_heads, d_head):
            raise Wrong(
                f"On {what}, your heads are on the wrong axis: shape (..., T, n_heads, d_head) = "
                f"{got.shape}, not (..., n_heads, T, d_head) = {want.shape}.",
                "Swap the T and head axes (np.swapaxes(..., -2, -3)).",
            )
        if lead and got.ndim != want.ndim:
            raise Wrong(
                f"On {what}, your result has shape {got.shape}, not {want.shape}: the leading "
                f"(batch) axes are lost.",
                "Keep the leading axes: (..., T, width) becomes (..., n_heads, T, d_head).",
            )
        raise Wrong(
            f"On {what}, your result has shape {got.shape}, not (..., n_heads, T, d_head) = {want.shape}.",
            "Reshape to (..., T, n_heads, d_head), then swap the T and head axes.",
        )
    if close(got, want):
        return
    first_match(
        got,
        [
            (
                f"On {what}, your heads have the right shape, but your reshape deals each token's "
                f"numbers out to several heads' rows: head 0's row for position 1 holds numbers of "
                f"token 0.",
                "You reshaped straight to (..., n_heads, T, d_head); reshape to (..., T, n_heads, "
                "d_head) first, then swap the T and head axes.",
                lambda: x.reshape(*lead, n_heads, t, d_head),
            ),
            (
                f"On {what}, your head 0 holds every n_heads-th column of x (columns 0, {n_heads}, "
                f"...): its columns are interleaved with the other heads'.",
                "Head h is the contiguous slice of columns h*d_head to (h+1)*d_head: reshape to "
                "(..., T, n_heads, d_head), not (..., T, d_head, n_heads).",
                lambda: np.moveaxis(x.reshape(*lead, t, d_head, n_heads), -1, -3),
            ),
        ],
    )
    _, where = worst(got, want)
    h, i = where[-3], where[-2]
    raise Wrong(
        f"On {what}, your head {h} at position {i} differs from "
        f"x[..., {i}, {h * d_head}:{(h + 1) * d_head}].",
        f"Head {h} at position {i} is columns {h * d_head} to {(h + 1) * d_head - 1} of token {i}.",
    )


def check_split_heads(fn, hint: bool = False) -> CheckResult:
    """Check your ``split_heads(x, n_heads)`` against :func:`qkv.split_heads`.

    ``x`` of shape ``(..., T, n_heads * d_head)`` must become ``(..., n_heads, T,
    d_head)``, head ``h`` holding columns ``h * d_head`` to ``(h + 1) * d_head`` of
    every position.

    Parameters
    ----------
    fn : callable
        Your function, called as ``fn(x, n_heads)``.
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
    >>> from qkv import split_heads
    >>> check_split_heads(split_heads)
    Passed: your split_heads matches qkv.split_heads on 100 random inputs, with and without
    batch axes, and with one head and heads one number wide.
    """
    return verdict(
        "check_split_heads",
        fn,
        lambda f: [_split_case(f, *case) for case in _split_cases(np.random.default_rng(4))],
        f"Passed: your split_heads matches qkv.split_heads on {RANDOM_CASES} random inputs, with and "
        "without batch axes, and with one head and heads one number wide.",
        hint=hint,
    )
