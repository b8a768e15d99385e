"""The checker of the causal mask (the three-kinds chapter's exercise)."""

from __future__ import annotations

import numpy as np

from qkv.exercises._verdict import (
    CheckResult,
    Wrong,
    as_array,
    call,
    first_match,
    verdict,
)
from qkv.masks import causal_mask


def _mask_case(fn, t_q: int, t_k: int | None) -> None:
    args = (t_q,) if t_k is None else (t_q, t_k)
    shown = f"causal_mask({', '.join(map(str, args))})"
    got = as_array(call(fn, f"for {shown}", *args), shown)
    want = causal_mask(*args)
    if got.dtype != bool:
        values = set(np.unique(got).tolist()) if np.issubdtype(got.dtype, np.number) else set()
        if values and values <= {0.0, -np.inf}:
            raise Wrong(
                f"Your {shown} is additive, 0 where a query may attend and -inf where it may not, "
                f"not boolean.",
                "qkv's masks are boolean, True where a query may attend: make it with dtype=bool.",
            )
        raise Wrong(
            f"Your {shown} holds {got.dtype}, not booleans: a 0/1 number mask added to the scores "
            f"lets every future key through.",
            "Make it boolean (dtype=bool), True where a query may attend.",
        )
    if got.shape != want.shape:
        raise Wrong(
            f"Your {shown} has shape {got.shape}, not (t_q, t_k) = {want.shape}.",
            "One row per query and one column per key.",
        )
    if np.array_equal(got, want):
        return
    offset = want.shape[1] - t_q  # query i sits at position offset + i
    rows, cols = want.shape
    ones = np.ones((rows, cols), dtype=bool)
    first_match(
        got,
        [
            (
                f"Your mask's polarity is reversed: in {shown} it is False on the diagonal "
                "and True above it.",
                "True must mean 'may attend' (as in PyTorch's scaled_dot_product_attention), so the "
                "diagonal and the keys before it are True.",
                lambda: ~want,
            ),
            (
                f"Your mask is off by one: in {shown} it hides each query from its own position (the "
                f"diagonal is False), so the first query has no key at all and its weights become "
                f"0/0, nan.",
                "A query may attend to its own position: the diagonal is True (np.tril with k=0).",
                lambda: np.tril(ones, k=offset - 1),
            ),
            (
                f"Your mask is the upper triangle: in {shown} query i may attend to keys i and after, "
                f"the future.",
                "Row i is query i and column j key j, and query i may attend to keys 0 to i, the "
                "lower triangle (np.tril), not i and after.",
                lambda: np.triu(ones, k=offset),
            ),
            (
                f"Your {shown} lets query 0 see key 0 only, as if it were the first token; with t_k > "
                f"t_q the queries are the last t_q positions (a decoder with t_k - t_q tokens "
                f"cached).",
                f"In {shown} query i may attend to keys 0 to {offset} + i (np.tril with k=t_k - t_q).",
                lambda: np.tril(ones) if offset else None,
            ),
        ],
    )
    later = np.argwhere(got & ~want)
    if len(later):
        i, j = later[0]
        raise Wrong(
            f"Your {shown} lets query {i} attend to key {j}, a later position.",
            "A causal mask is True on and below the diagonal only (np.tril).",
        )
    i, j = np.argwhere(want & ~got)[0]
    raise Wrong(
        f"Your {shown} hides key {j} from query {i}, an earlier position.",
        f"Query {i} may attend to every key up to its own position.",
    )


def check_causal_mask(fn, hint: bool = False) -> CheckResult:
    """Check your ``causal_mask(t_q, t_k=None)`` against :func:`qkv.causal_mask`.

    It must return a boolean ``(t_q, t_k)`` array, ``True`` where a query may attend:
    each query sees itself and the positions before it. With ``t_k > t_q`` the queries
    are the last ``t_q`` of ``t_k`` positions.

    Parameters
    ----------
    fn : callable
        Your function, called as ``fn(t)`` and ``fn(t_q, t_k)``.
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
    >>> from qkv import causal_mask
    >>> check_causal_mask(causal_mask)
    Passed: your mask matches qkv.causal_mask for 1 to 8 tokens and for queries after
    cached tokens (t_k > t_q).
    >>> check_causal_mask(lambda t_q, t_k=None: ~causal_mask(t_q, t_k), hint=True)
    Your mask's polarity is reversed: in causal_mask(4) it is False on the diagonal and
    True above it. Fix: True must mean 'may attend' (as in PyTorch's
    scaled_dot_product_attention), so the diagonal and the keys before it are True.
    """

    def run(f):
        for t in (4, *range(1, 9)):  # 4 first: big enough to tell the mistakes apart
            _mask_case(f, t, None)
        for t_q, t_k in ((2, 5), (1, 1), (1, 4), (3, 7), (4, 4)):
            _mask_case(f, t_q, t_k)

    return verdict(
        "check_causal_mask",
        fn,
        run,
        "Passed: your mask matches qkv.causal_mask for 1 to 8 tokens and for queries after "
        "cached tokens (t_k > t_q).",
        hint=hint,
    )
