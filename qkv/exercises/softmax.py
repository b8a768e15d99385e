"""The checker of softmax (the soft-lookup chapter's exercise)."""

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


def _softmax_cases(rng):
    """(scores, axis, description) to run, the edge cases after the random ones."""
    yield np.array([1.0, 2.0, 3.0]), -1, "the scores [1, 2, 3]"
    yield np.array([[2.0, 0.0, 1.0], [0.0, 0.0, 0.0], [1.0, 3.0, -1.0]]), -1, "a 3 x 3 table of scores"
    for i in range(RANDOM_CASES):
        shape = tuple(rng.integers(1, 7, size=rng.integers(1, 4)))
        if i % 4 == 0:  # square tables: a division without keepdims broadcasts silently
            shape = (shape[0], shape[0])
        axis = -1 if i % 3 else int(rng.integers(-len(shape), len(shape)))
        yield rng.normal(0.0, 2.0, size=shape), axis, f"random scores of shape {shape}, axis={axis}"
    yield np.array([[5.0]]), -1, "a single score"
    yield np.array([[0.0, -np.inf, 1.0], [-np.inf, -np.inf, 2.0]]), -1, "scores with -inf (masked keys)"
    large = np.array([[1000.0, 999.0, 998.0], [0.0, 1.0, 2.0]])
    yield large, -1, "scores near 1000 in one row and near 0 in the other"
    yield np.array([[100.0, 98.0, 90.0]], dtype=np.float32), -1, "float32 scores near 100"


def _softmax_mistakes(z: np.ndarray, axis: int):
    """(symptom, fix, what that mistake returns) for the usual wrong softmaxes."""
    axis = axis % z.ndim
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    for other in range(z.ndim):
        if other != axis:
            yield (
                f"Wrong axis: your weights sum to 1 along axis {other - z.ndim} instead of axis "
                f"{axis - z.ndim}.",
                "Softmax normalises along the axis it is given (the last, the keys, by default): "
                "pass axis to max and sum.",
                lambda other=other: softmax(z, axis=other),
            )
    yield (
        "Your weights are each divided by another row's sum: the sums come back without their "
        "axis and line up with the wrong rows.",
        "Keep the summed axis (keepdims=True) so the sums line up with their rows.",
        lambda: e / e.sum(axis=axis),  # broadcasts only when the shapes happen to line up
    )
    yield (
        "Your weights sum to 1 over the whole array, not along the axis.",
        "Sum with axis=axis and keepdims=True.",
        lambda: e / e.sum(),
    )
    for shown in (e, np.exp(z)):
        yield (
            "Your weights do not sum to 1 along the axis: they are the exponentials themselves.",
            "Divide the exponentials by their sum along the axis.",
            lambda shown=shown: shown,
        )
    yield (
        "Your weights are the scores divided by their sum: some are negative, and a row whose "
        "scores sum to 0 divides by 0.",
        "Take exp of the scores first, which makes every weight positive.",
        lambda: z / z.sum(axis=axis, keepdims=True),
    )
    yield (
        "Your weights favour the lowest score: the largest weight sits on the smallest score.",
        "Softmax is exp(z) / sum(exp(z)), with no minus sign.",
        lambda: softmax(-z, axis=axis),
    )


def _softmax_case(fn, z: np.ndarray, axis: int, what: str) -> None:
    args = (z.copy(),) if axis == -1 else (z.copy(), axis)  # the default axis is not passed
    got = as_array(call(fn, f"on {what}", *args), what)
    want = softmax(z, axis=axis)
    if got.shape != want.shape:
        raise Wrong(
            f"On {what}, your softmax returned shape {got.shape}, not the scores' shape {z.shape}.",
            "Keep every axis: the weights have the scores' shape, one weight per score.",
        )
    if close(got, want):
        return
    finite = np.isfinite(z).all()
    if not np.isfinite(got).all():
        if np.isneginf(z).any() and not finite and np.abs(z[np.isfinite(z)]).max() < 50:
            raise Wrong(
                "A score of -inf (a masked key) makes nan in your weights, where its weight must be "
                "exactly 0.",
                "exp(-inf) = 0 gives that 0, so nothing on the way may compute -inf - (-inf) or 0 * inf: "
                "subtract the row's maximum, not its minimum.",
            )
        with np.errstate(all="ignore"):
            global_max = np.exp(z - z.max())  # the largest score of the whole array subtracted
            global_max = global_max / global_max.sum(axis=axis, keepdims=True)
        if np.isnan(global_max).any() and np.array_equal(np.isnan(got), np.isnan(global_max)):
            raise Wrong(
                f"On {what}, the rows far below the array's largest score come out nan, the others "
                f"are right.",
                "Subtract each row's own maximum (max with axis and keepdims=True), not the largest "
                "score of the whole array.",
            )
        raise overflow(float(np.max(z)))
    first_match(got, _softmax_mistakes(z, axis))
    gap, where = worst(got, want)
    with np.errstate(all="ignore"):
        sums = got.sum(axis=axis, keepdims=True)
    off = np.abs(sums - 1.0)
    if float(off.max()) > 1e-12 and close(got / sums, want):
        # right up to a factor per row: the denominator is off (sum + eps, sum * (1 + eps))
        off_sum = float(sums.flat[int(np.argmax(off))])
        raise Wrong(
            f"On {what}, your weights are right up to a factor: a row sums to {off_sum:.15g}, not 1, "
            f"off by {abs(off_sum - 1):.2g} (rounding alone stays below 1e-12), so the denominator "
            f"is not the sum of the exponentials.",
            "Divide by the sum of the exponentials and nothing else: no epsilon added to it, no "
            "factor on it; with the row's maximum subtracted first the sum is at least 1 anyway.",
        )
    raise Wrong(
        f"On {what}, your weights differ from qkv.softmax's by up to {gap:.3g} (at index {where}).",
        "Softmax is exp(z) / sum(exp(z)) along the axis, with each row's maximum subtracted first.",
    )


def check_softmax(fn, hint: bool = False) -> CheckResult:
    """Check your ``softmax(z, axis=-1)`` against :func:`qkv.softmax`.

    It must return weights of the scores' shape, positive and summing to 1 along
    ``axis``, with weight exactly 0 for a score of ``-inf``, and must not overflow on
    scores near 1000 (float64) or 100 (float32). Rows with no finite score are not
    tried (qkv refuses them).

    Parameters
    ----------
    fn : callable
        Your softmax, called as ``fn(z)`` and ``fn(z, axis)``.
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
    >>> from qkv import softmax
    >>> check_softmax(softmax)
    Passed: your softmax matches qkv.softmax on 100 random inputs and on a single score,
    masked (-inf) scores, and scores near 1000 and in float32.
    >>> check_softmax(lambda z, axis=-1: np.exp(z) / np.exp(z).sum(axis=axis, keepdims=True)).ok
    False
    """
    return verdict(
        "check_softmax",
        fn,
        lambda f: [_softmax_case(f, *case) for case in _softmax_cases(np.random.default_rng(1))],
        f"Passed: your softmax matches qkv.softmax on {RANDOM_CASES} random inputs and on a single "
        "score, masked (-inf) scores, and scores near 1000 and in float32.",
        hint=hint,
    )
