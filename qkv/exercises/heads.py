"""The checker of splitting into heads (the multi-head chapter's exercise)."""

from __future__ import annotations

import numpy as np

from qkv.exercises._verdict import (
    RANDOM_CASES,
    CheckResult,
    _array,
    _call,
    _close,
    _first_match,
    _verdict,
    _worst,
    _Wrong,
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
    got = _array(_call(fn, f"on {what}", x.copy(), n_heads), what)
    want = split_heads(x, n_heads)
    *lead, t, width = x.shape
    d_head = width // n_heads
    if got.shape != want.shape:
        if got.shape == (*lead, t, n_heads, d_head):
            raise _Wrong(
                f"On {what}, your heads are on the wrong axis, shape (..., T, n_heads, d_head) = "
                f"{got.shape}: swap the T and head axes to get (..., n_heads, T, d_head) = {want.shape}."
            )
        if lead and got.ndim != want.ndim:
            raise _Wrong(
                f"On {what}, your result has shape {got.shape}: keep the leading (batch) axes, "
                f"(..., T, width) becomes (..., n_heads, T, d_head) = {want.shape}."
            )
        raise _Wrong(
            f"On {what}, your result has shape {got.shape}; it should be (..., n_heads, T, d_head) "
            f"= {want.shape}."
        )
    if _close(got, want):
        return
    _first_match(
        got,
        [
            (
                "You reshaped straight to (..., n_heads, T, d_head), which deals each token's numbers "
                "out to several heads; reshape to (..., T, n_heads, d_head) first, then swap the T "
                "and head axes.",
                lambda: x.reshape(*lead, n_heads, t, d_head),
            ),
            (
                "Your heads take every n_heads-th column; head h must be the contiguous slice of "
                "columns h*d_head to (h+1)*d_head: reshape to (..., T, n_heads, d_head), not "
                "(..., T, d_head, n_heads).",
                lambda: np.moveaxis(x.reshape(*lead, t, d_head, n_heads), -1, -3),
            ),
        ],
    )
    _, where = _worst(got, want)
    h, i = where[-3], where[-2]
    raise _Wrong(
        f"On {what}, head {h} at position {i} should be x[..., {i}, {h * d_head}:{(h + 1) * d_head}], "
        f"columns {h * d_head} to {(h + 1) * d_head - 1} of token {i}; yours differs there."
    )


def check_split_heads(fn) -> CheckResult:
    """Check your ``split_heads(x, n_heads)`` against :func:`qkv.split_heads`.

    ``x`` of shape ``(..., T, n_heads * d_head)`` must become ``(..., n_heads, T,
    d_head)``, head ``h`` holding columns ``h * d_head`` to ``(h + 1) * d_head`` of
    every position.

    Parameters
    ----------
    fn : callable
        Your function, called as ``fn(x, n_heads)``.

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
    return _verdict(
        "check_split_heads",
        fn,
        lambda f: [_split_case(f, *case) for case in _split_cases(np.random.default_rng(4))],
        f"Passed: your split_heads matches qkv.split_heads on {RANDOM_CASES} random inputs, with and "
        "without batch axes, and with one head and heads one number wide.",
    )
