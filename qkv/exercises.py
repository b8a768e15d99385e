"""Checkers for the exercises in which you write a piece of attention yourself.

Each ``check_*`` function takes your function, which has the signature of the qkv function
it mirrors, runs it and qkv's on many seeded random inputs and on the edge cases of the
traps chapter (huge scores, masked keys, a single position), and answers with one
sentence: that it passed, or the first thing that is wrong and how to put it right.

The answer is a :class:`CheckResult`, not an exception. In a notebook it shows as its
sentence, with no traceback into this module, and the cells after it still run; in a
script, ``print`` it. ``result.ok`` (or ``bool(result)``) says whether it passed.

A checker compares what your function returns. It cannot tell *how* it got there: an
online softmax that reads the row twice passes, as long as its weights are right.
"""

from __future__ import annotations

import textwrap
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from qkv.dot_product import attention, softmax
from qkv.kvcache import KVCache
from qkv.masks import causal_mask
from qkv.multihead import MultiHeadWeights, merge_heads, split_heads
from qkv.tiled import online_softmax

__all__ = [
    "CheckResult",
    "check_causal_mask",
    "check_kv_cache_step",
    "check_one_query_attention",
    "check_online_softmax",
    "check_softmax",
    "check_split_heads",
]

RANDOM_CASES = 100  # seeded random inputs per checker, besides its edge cases


@dataclass(frozen=True)
class CheckResult:
    """What a checker found: ``ok`` and one sentence saying what passed or what is wrong.

    It shows as its sentence (``repr`` and ``str`` are the message, wrapped at 80
    characters), and is true when the check passed.

    Examples
    --------
    >>> result = check_causal_mask(lambda t_q, t_k=None: np.ones((t_q, t_k or t_q), bool))
    >>> result.ok, bool(result)
    (False, False)
    >>> result
    Your mask lets query 0 attend to key 1, a later position: a causal mask is True on
    and below the diagonal only (np.tril).
    """

    ok: bool
    message: str

    def __str__(self) -> str:
        return textwrap.fill(self.message, 80)  # lines a page or a notebook shows whole

    def __repr__(self) -> str:
        return str(self)

    def __bool__(self) -> bool:
        return self.ok


class _Wrong(Exception):
    """One sentence saying what is wrong, raised inside a checker and returned as its result."""


def _verdict(checker: str, fn, run: Callable, passed: str) -> CheckResult:
    """Run ``run(fn)``: a ``CheckResult`` with the first ``_Wrong`` it raises, or ``passed``."""
    if not callable(fn):
        raise ValueError(
            f"{checker} takes your function itself, as in {checker}(my_function); "
            f"got {fn!r} of type {type(fn).__name__}, which cannot be called"
        )
    try:
        run(fn)
    except _Wrong as wrong:
        return CheckResult(False, str(wrong))
    return CheckResult(True, passed)


def _call(fn, on: str, *args, hint: str = ""):
    """``fn(*args)``, with NumPy's warnings silenced; an exception becomes one sentence."""
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*args)
    except Exception as error:  # the reader's code may raise anything: report it, whatever it is
        said = " ".join(str(error).split())
        said = said if len(said) <= 120 else said[:117] + "..."
        raise _Wrong(
            f"Your function raised {type(error).__name__}"
            + (f": {said}" if said else "")
            + f" ({on}){'; ' + hint if hint else ''}."
        ) from None


def _array(value, what: str) -> np.ndarray:
    """``value`` as an array, or a ``_Wrong`` naming what came back instead."""
    if value is None:
        raise _Wrong(f"Your function returned None for {what}: end it with a return statement.")
    try:
        array = np.asarray(value)
    except Exception:  # a ragged list, an object NumPy cannot read
        raise _Wrong(f"Your function returned {type(value).__name__} for {what}, not an array.") from None
    if array.dtype == object:
        raise _Wrong(f"Your function returned {type(value).__name__} for {what}, not an array of numbers.")
    return array


def _pair(value, what: str) -> tuple[np.ndarray, np.ndarray]:
    """The two arrays (weights, output) of a returned pair, or a ``_Wrong``."""
    if value is None:
        raise _Wrong(f"Your function returned None {what}: return the pair (weights, output).")
    if not isinstance(value, tuple | list) or len(value) != 2:
        raise _Wrong(
            f"Your function returned {type(value).__name__} {what}; return the pair (weights, output)."
        )
    return _array(value[0], f"the weights {what}"), _array(value[1], f"the output {what}")


def _close(got: np.ndarray, want: np.ndarray) -> bool:
    """Equal up to rounding, NaN nowhere; float32 gets float32's tolerance."""
    if got.shape != want.shape:
        return False
    if got.dtype == bool or want.dtype == bool:
        return bool(np.array_equal(got, want))
    if not np.issubdtype(got.dtype, np.number):
        return False
    single = np.float32 in (got.dtype, want.dtype)
    with np.errstate(all="ignore"):
        return bool(np.allclose(got, want, rtol=1e-4 if single else 1e-6, atol=1e-6 if single else 1e-9))


def _first_match(got: np.ndarray, mistakes) -> None:
    """Raise the sentence of the first known mistake whose result ``got`` reproduces."""
    for sentence, make in mistakes:
        try:
            with np.errstate(all="ignore"):
                wrong = make()
        except ValueError:  # a mistake whose shapes cannot happen on this input
            continue
        if wrong is not None and _close(got, np.asarray(wrong)):
            raise _Wrong(sentence)


def _worst(got: np.ndarray, want: np.ndarray) -> tuple[float, tuple[int, ...]]:
    """The largest difference and where it is (NaN counts as the largest)."""
    with np.errstate(all="ignore"):
        gap = np.where(np.isnan(got) | np.isnan(want), np.inf, np.abs(got - want))
    where = np.unravel_index(int(np.argmax(gap)), gap.shape) if gap.size else ()
    return float(gap.max()) if gap.size else 0.0, tuple(int(i) for i in where)


def _overflow(largest: float) -> str:
    return (
        f"Your function returns nan or inf when the largest score is {largest:.4g}: exp of a score "
        f"above about 709 (88.7 in float32) is inf, and inf / inf is nan; subtract each row's "
        f"maximum before exp, which changes no weight."
    )


# ---- 1. softmax -------------------------------------------------------------------------


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
    """(sentence, what that mistake returns) for the usual wrong softmaxes."""
    axis = axis % z.ndim
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    for other in range(z.ndim):
        if other != axis:
            yield (
                f"Wrong axis: your weights sum to 1 along axis {other - z.ndim} instead of axis "
                f"{axis - z.ndim}; softmax normalises along the axis it is given (the last, the keys, "
                f"by default).",
                lambda other=other: softmax(z, axis=other),
            )
    yield (
        "Your weights are divided by the sums without keepdims=True, so each row is divided by "
        "another row's sum; keep the summed axis (keepdims=True) so the sums line up.",
        lambda: e / e.sum(axis=axis),  # broadcasts only when the shapes happen to line up
    )
    yield (
        "Your weights sum to 1 over the whole array, not along the axis: sum with axis=axis "
        "and keepdims=True.",
        lambda: e / e.sum(),
    )
    yield (
        "Your weights do not sum to 1: divide the exponentials by their sum along the axis.",
        lambda: e,
    )
    yield (
        "Your weights do not sum to 1: divide the exponentials by their sum along the axis.",
        lambda: np.exp(z),
    )
    yield (
        "Your weights are the scores divided by their sum: take exp of the scores first, which "
        "makes every weight positive.",
        lambda: z / z.sum(axis=axis, keepdims=True),
    )
    yield (
        "Your weights favour the lowest score: softmax is exp(z) / sum(exp(z)), with no minus sign.",
        lambda: softmax(-z, axis=axis),
    )


def _softmax_case(fn, z: np.ndarray, axis: int, what: str) -> None:
    args = (z.copy(),) if axis == -1 else (z.copy(), axis)  # the default axis is not passed
    got = _array(_call(fn, f"on {what}", *args), what)
    want = softmax(z, axis=axis)
    if got.shape != want.shape:
        raise _Wrong(
            f"On {what}, your softmax returned shape {got.shape}; the weights must have the "
            f"scores' shape {z.shape}."
        )
    if _close(got, want):
        return
    finite = np.isfinite(z).all()
    if not np.isfinite(got).all():
        if np.isneginf(z).any() and not finite and np.abs(z[np.isfinite(z)]).max() < 50:
            raise _Wrong(
                "A score of -inf (a masked key) makes nan in your weights: its weight must be exactly 0, "
                "which exp(-inf) = 0 gives, so nothing on the way may compute -inf - (-inf) or 0 * inf."
            )
        with np.errstate(all="ignore"):
            global_max = np.exp(z - z.max())  # the largest score of the whole array subtracted
            global_max = global_max / global_max.sum(axis=axis, keepdims=True)
        if np.isnan(global_max).any() and np.array_equal(np.isnan(got), np.isnan(global_max)):
            raise _Wrong(
                f"On {what}, rows far below the array's largest score come out nan: subtract each "
                f"row's own maximum (max with axis and keepdims=True), not the largest score of "
                f"the whole array."
            )
        raise _Wrong(_overflow(float(np.max(z))))
    _first_match(got, _softmax_mistakes(z, axis))
    gap, where = _worst(got, want)
    raise _Wrong(
        f"On {what}, your weights differ from qkv.softmax's by up to {gap:.3g} (at index {where}); "
        f"softmax is exp(z) / sum(exp(z)) along the axis."
    )


def check_softmax(fn) -> CheckResult:
    """Check your ``softmax(z, axis=-1)`` against :func:`qkv.softmax`.

    It must return weights of the scores' shape, positive and summing to 1 along
    ``axis``, with weight exactly 0 for a score of ``-inf``, and must not overflow on
    scores near 1000 (float64) or 100 (float32). Rows with no finite score are not
    tried (qkv refuses them).

    Parameters
    ----------
    fn : callable
        Your softmax, called as ``fn(z)`` and ``fn(z, axis)``.

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
    return _verdict(
        "check_softmax",
        fn,
        lambda f: [_softmax_case(f, *case) for case in _softmax_cases(np.random.default_rng(1))],
        f"Passed: your softmax matches qkv.softmax on {RANDOM_CASES} random inputs and on a single "
        "score, masked (-inf) scores, and scores near 1000 and in float32.",
    )


# ---- 2. one query's attention -------------------------------------------------------------


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
    weights, output = _pair(_call(fn, f"with {what}", q.copy(), k.copy(), v.copy()), f"with {what}")
    want = attention(q[None], k, v)  # one query: a (1, d_k) table of queries
    if weights.shape != (t,):
        raise _Wrong(
            f"With {what}, your weights have shape {weights.shape}; one query against {t} keys "
            f"needs {t} weights, shape ({t},)."
        )
    if output.shape != (d_v,):
        if output.shape == (t,) and _close(output, want.weights[0]):
            raise _Wrong(
                f"Your output is the weights (one number per key): the output is weights @ v, "
                f"one number per value column (d_v = {d_v})."
            )
        if output.shape == (d_k,) and d_k != d_v:
            raise _Wrong(
                f"Your output has d_k = {d_k} numbers: it averages the keys; average the values, weights @ v."
            )
        raise _Wrong(
            f"With {what}, your output has shape {output.shape}; it should be ({d_v},), one number "
            f"per value column."
        )
    if not (np.isfinite(weights).all() and np.isfinite(output).all()):
        raise _Wrong(_overflow(float(np.max(k @ q) / np.sqrt(d_k))))
    if not _close(weights, want.weights[0]):
        _first_match(
            weights,
            [
                (
                    f"Your scores are not divided by √d_k: with d_k = {d_k} they should be k @ q / "
                    f"{np.sqrt(d_k):.4g} before softmax.",
                    lambda: attention(q[None], k, v, scale=False).weights[0],
                ),
                (
                    f"You divided the scores by d_k = {d_k}; divide them by its square root, "
                    f"√d_k = {np.sqrt(d_k):.4g}.",
                    lambda: attention(q[None], k, v, scale=1.0 / d_k).weights[0],
                ),
                (
                    f"You multiplied the scores by √d_k; divide them by it, k @ q / {np.sqrt(d_k):.4g}.",
                    lambda: attention(q[None], k, v, scale=float(np.sqrt(d_k))).weights[0],
                ),
            ]
            if d_k > 1
            else [],
        )
        total = float(weights.sum())
        if abs(total - 1.0) > 1e-6:
            raise _Wrong(f"Your weights sum to {total:.4g}, not 1: divide the exponentials by their sum.")
        gap, where = _worst(weights, want.weights[0])
        raise _Wrong(
            f"With {what}, your weight on key {where[0]} is off by {gap:.3g}: the weights are "
            f"softmax(k @ q / √d_k), one per key."
        )
    if not _close(output, want.output[0]):
        raise _Wrong(
            "Your weights are right but your output is not: it is weights @ v, the weighted "
            "average of the value rows."
        )


def check_one_query_attention(fn) -> CheckResult:
    """Check your one-query attention, ``fn(q, k, v) -> (weights, output)``, against :func:`qkv.attention`.

    One query ``q`` of shape ``(d_k,)`` reads ``T`` keys ``k`` of shape ``(T, d_k)``
    and values ``v`` of shape ``(T, d_v)``; the weights have shape ``(T,)`` and the
    output ``(d_v,)``. It is ``qkv.attention`` for a single query: the same arguments,
    the same pair returned, without a mask.

    Parameters
    ----------
    fn : callable
        Your function, called as ``fn(q, k, v)``.

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
    return _verdict(
        "check_one_query_attention",
        fn,
        lambda f: [_one_query_case(f, *case) for case in _one_query_cases(np.random.default_rng(2))],
        f"Passed: your attention matches qkv.attention on {RANDOM_CASES} random queries and on a "
        "single key and a score of 5000.",
    )


# ---- 3. the causal mask -------------------------------------------------------------------


def _mask_case(fn, t_q: int, t_k: int | None) -> None:
    args = (t_q,) if t_k is None else (t_q, t_k)
    call = f"causal_mask({', '.join(map(str, args))})"
    got = _array(_call(fn, f"for {call}", *args), call)
    want = causal_mask(*args)
    if got.dtype != bool:
        values = set(np.unique(got).tolist()) if np.issubdtype(got.dtype, np.number) else set()
        if values and values <= {0.0, -np.inf}:
            raise _Wrong(
                "Your mask is additive, 0 where a query may attend and -inf where it may not; "
                "qkv's masks are boolean, True where a query may attend (make it with dtype=bool)."
            )
        raise _Wrong(
            f"Your mask holds {got.dtype}; make it boolean (dtype=bool), True where a query may "
            f"attend: a 0/1 number mask added to the scores lets every future key through."
        )
    if got.shape != want.shape:
        raise _Wrong(
            f"{call} must have shape (t_q, t_k) = {want.shape}, one row per query and one column "
            f"per key; yours has shape {got.shape}."
        )
    if np.array_equal(got, want):
        return
    offset = want.shape[1] - t_q  # query i sits at position offset + i
    rows, cols = want.shape
    ones = np.ones((rows, cols), dtype=bool)
    _first_match(
        got,
        [
            (
                "Your mask's polarity is reversed: True must mean 'may attend' (as in PyTorch's "
                "scaled_dot_product_attention), so the diagonal and the keys before it are True.",
                lambda: ~want,
            ),
            (
                "Your mask is off by one: a query may attend to its own position, so the diagonal "
                "is True (np.tril with k=0); without it the first query has no key at all and its "
                "weights become 0/0, nan.",
                lambda: np.tril(ones, k=offset - 1),
            ),
            (
                "Your mask is the upper triangle: row i is query i and column j key j, and query i "
                "may attend to keys 0 to i, the lower triangle (np.tril), not i and after.",
                lambda: np.triu(ones, k=offset),
            ),
            (
                f"With t_k > t_q the queries are the last t_q positions (a decoder with t_k - t_q "
                f"tokens cached), so in {call} query i may attend to keys 0 to {offset} + i "
                f"(np.tril with k=t_k - t_q); yours puts them at the start.",
                lambda: np.tril(ones) if offset else None,
            ),
        ],
    )
    later = np.argwhere(got & ~want)
    if len(later):
        i, j = later[0]
        raise _Wrong(
            f"Your mask lets query {i} attend to key {j}, a later position: a causal mask is True "
            f"on and below the diagonal only (np.tril)."
        )
    i, j = np.argwhere(want & ~got)[0]
    raise _Wrong(
        f"In {call}, your mask hides key {j} from query {i}, but query {i} may attend to every "
        f"key up to its own position."
    )


def check_causal_mask(fn) -> CheckResult:
    """Check your ``causal_mask(t_q, t_k=None)`` against :func:`qkv.causal_mask`.

    It must return a boolean ``(t_q, t_k)`` array, ``True`` where a query may attend:
    each query sees itself and the positions before it. With ``t_k > t_q`` the queries
    are the last ``t_q`` of ``t_k`` positions.

    Parameters
    ----------
    fn : callable
        Your function, called as ``fn(t)`` and ``fn(t_q, t_k)``.

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
    >>> check_causal_mask(lambda t_q, t_k=None: ~causal_mask(t_q, t_k)).message[:40]
    "Your mask's polarity is reversed: True m"
    """

    def run(f):
        for t in (4, *range(1, 9)):  # 4 first: big enough to tell the mistakes apart
            _mask_case(f, t, None)
        for t_q, t_k in ((2, 5), (1, 1), (1, 4), (3, 7), (4, 4)):
            _mask_case(f, t_q, t_k)

    return _verdict(
        "check_causal_mask",
        fn,
        run,
        "Passed: your mask matches qkv.causal_mask for 1 to 8 tokens and for queries after "
        "cached tokens (t_k > t_q).",
    )


# ---- 4. splitting into heads --------------------------------------------------------------


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


# ---- 5. one decoding step with a key/value cache ---------------------------------------------


def _decode_step(x_new, w: MultiHeadWeights, cache: KVCache):
    """One step of :func:`qkv.decode_with_cache`'s loop: the answer the checker compares with."""
    q = split_heads(x_new @ w.w_q, w.n_heads)  # (heads, 1, d_head)
    cache.append(split_heads(x_new @ w.w_k, w.n_kv_heads), split_heads(x_new @ w.w_v, w.n_kv_heads))
    group = w.n_heads // w.n_kv_heads  # query heads per key/value head
    k = np.repeat(cache.keys, group, axis=0)  # (heads, T, d_head)
    v = np.repeat(cache.values, group, axis=0)
    weights, out = attention(q, k, v)  # (heads, 1, T), (heads, 1, d_head)
    return weights, merge_heads(out) @ w.w_o  # (1, d_model)


def _step_cases(rng):
    """(weights, earlier tokens' inputs, new token's input, description)."""
    w = MultiHeadWeights.random(rng, d_model=8, n_heads=2)
    x = rng.normal(size=(4, 8))
    yield w, x[:3], x[3:], "3 cached tokens, 2 heads"
    for t in range(4):  # a sequence from its first token: the cache starts empty
        yield w, x[:t], x[t : t + 1], f"{t} cached tokens, 2 heads"
    for n_heads, n_kv in ((4, 2), (4, 1)):
        w = MultiHeadWeights.random(rng, d_model=16, n_heads=n_heads, n_kv_heads=n_kv)
        x = rng.normal(size=(5, 16))
        yield w, x[:4], x[4:], f"{n_heads} query heads sharing {n_kv} key/value head{'s' * (n_kv > 1)}"
    for _ in range(RANDOM_CASES // 4):
        n_kv = int(rng.integers(1, 3))
        n_heads = n_kv * int(rng.integers(1, 4))
        d_model = n_heads * int(rng.integers(1, 5))
        w = MultiHeadWeights.random(rng, d_model=d_model, n_heads=n_heads, n_kv_heads=n_kv)
        t = int(rng.integers(0, 7))
        x = rng.normal(size=(t + 1, d_model))
        yield (
            w,
            x[:t],
            x[t:],
            f"{t} cached tokens, {n_heads} heads, {n_kv} key/value heads, d_model = {d_model}",
        )


def _filled_cache(w: MultiHeadWeights, earlier: np.ndarray) -> KVCache:
    cache = KVCache.empty(w.n_kv_heads, w.d_head)
    if len(earlier):  # a first step starts from the empty cache
        cache.append(split_heads(earlier @ w.w_k, w.n_kv_heads), split_heads(earlier @ w.w_v, w.n_kv_heads))
    return cache


def _step_case(fn, w: MultiHeadWeights, earlier: np.ndarray, x_new: np.ndarray, what: str) -> None:
    before = len(earlier)
    mine, theirs = _filled_cache(w, earlier), _filled_cache(w, earlier)
    old_keys, old_values = mine.keys.copy(), mine.values.copy()
    want_weights, want_output = _decode_step(x_new, w, theirs)
    shared = w.n_kv_heads < w.n_heads
    hint = (
        "repeat each cached key/value head n_heads // n_kv_heads times along the head axis "
        "(np.repeat, axis=0) before attending, so that every query head has one"
        if shared
        else ""
    )
    weights, output = _pair(_call(fn, f"with {what}", x_new.copy(), w, mine, hint=hint), f"with {what}")
    grown = len(mine) - before
    if grown == 0:
        raise _Wrong(
            f"Your step did not add the new token to the cache (it still holds {before} positions): "
            f"append its key and value with cache.append(k_new, v_new)."
        )
    if grown != 1:
        raise _Wrong(f"Your step added {grown} positions to the cache; one step adds one, the new token's.")
    if not (
        np.array_equal(mine.keys[:, :before], old_keys)
        and np.array_equal(mine.values[:, :before], old_values)
    ):
        raise _Wrong("Your step changed the cached keys or values of earlier tokens; they never change.")
    new_k, new_v = theirs.keys[:, -1], theirs.values[:, -1]
    if not (_close(mine.keys[:, -1], new_k) and _close(mine.values[:, -1], new_v)):
        if _close(mine.keys[:, -1], new_v) and _close(mine.values[:, -1], new_k):
            raise _Wrong(
                "You appended the value as the key and the key as the value: cache.append takes "
                "the key first."
            )
        raise _Wrong(
            "The key or value you appended is not the new token's: they are "
            "split_heads(x_new @ w.w_k, w.n_kv_heads) and split_heads(x_new @ w.w_v, w.n_kv_heads)."
        )
    if weights.shape != want_weights.shape:
        if weights.shape[-1:] == (before,) and before:
            raise _Wrong(
                f"Your new token does not attend to itself: its weights cover the {before} earlier "
                f"positions; append its key and value first, then attend over the whole cache."
            )
        if weights.shape[-1:] == (1,) and before:
            raise _Wrong(
                "Your new token attends only to itself: attend over every position in the cache, "
                "cache.keys and cache.values."
            )
        raise _Wrong(
            f"With {what}, your weights have shape {weights.shape}; they should be (n_heads, 1, T) = "
            f"{want_weights.shape}, one query per head against all T cached positions."
        )
    if output.shape != want_output.shape:
        raise _Wrong(
            f"With {what}, your output has shape {output.shape}; it should be (1, d_model) = "
            f"{want_output.shape}."
        )
    group = w.n_heads // w.n_kv_heads
    q = split_heads(x_new @ w.w_q, w.n_heads)
    k, v = np.repeat(theirs.keys, group, axis=0), np.repeat(theirs.values, group, axis=0)
    if not _close(weights, want_weights):
        _first_match(
            weights,
            [
                (
                    f"Your scores are not divided by √d_head = {np.sqrt(w.d_head):.4g}: attend "
                    f"with qkv.attention, or divide q @ kᵀ by it.",
                    lambda: attention(q, k, v, scale=False).weights if w.d_head > 1 else None,
                ),
                (
                    "Your query heads are paired with the wrong key/value heads: consecutive query "
                    "heads share one, so use np.repeat(cache.keys, n_heads // n_kv_heads, axis=0), "
                    "not np.tile.",
                    lambda: attention(q, np.tile(theirs.keys, (group, 1, 1)), v).weights if shared else None,
                ),
            ],
        )
        gap, _ = _worst(weights, want_weights)
        raise _Wrong(
            f"With {what}, your weights differ from qkv's by up to {gap:.3g}: the new token's query, "
            f"split into heads, attends over the cached keys with softmax(q @ kᵀ / √d_head)."
        )
    if not _close(output, want_output):
        out = attention(q, k, v).output
        _first_match(
            output,
            [
                (
                    "Your output skips the output projection: merge the heads, then multiply by w.w_o.",
                    lambda: merge_heads(out),
                ),
                (
                    "Your heads' outputs are merged in the wrong order: merge_heads(out) puts head 0's "
                    "numbers first, then head 1's, before w.w_o.",
                    lambda: np.swapaxes(out, -1, -3).reshape(1, -1) @ w.w_o if w.n_heads > 1 else None,
                ),
            ],
        )
        raise _Wrong(
            "Your weights are right but your output is not: it is merge_heads(weights @ v) @ w.w_o, "
            "with the values repeated for the heads that share them."
        )


def check_kv_cache_step(fn) -> CheckResult:
    """Check your decoding step, ``fn(x_new, w, cache) -> (weights, output)``.

    One step of :func:`qkv.decode_with_cache`'s loop: the newest token's input
    ``x_new``, of shape ``(1, d_model)``, is projected with the
    :class:`~qkv.MultiHeadWeights` ``w``; its key and value are appended to the
    :class:`~qkv.KVCache` ``cache`` (which holds the earlier tokens'); then its query
    attends over every cached position, the new one included. ``weights`` has shape
    ``(n_heads, 1, T)`` and ``output`` ``(1, d_model)``, as in ``decode_with_cache``.

    Parameters
    ----------
    fn : callable
        Your step, called as ``fn(x_new, w, cache)``; it must append to ``cache``.

    Returns
    -------
    CheckResult

    Raises
    ------
    ValueError
        If ``fn`` cannot be called.

    Examples
    --------
    A step that attends before appending leaves the new token out of its own view:

    >>> from qkv import attention, merge_heads, split_heads
    >>> def step(x_new, w, cache):
    ...     q = split_heads(x_new @ w.w_q, w.n_heads)
    ...     weights, out = attention(q, cache.keys, cache.values)
    ...     cache.append(split_heads(x_new @ w.w_k, w.n_kv_heads), split_heads(x_new @ w.w_v, w.n_kv_heads))
    ...     return weights, merge_heads(out) @ w.w_o
    >>> check_kv_cache_step(step)
    Your new token does not attend to itself: its weights cover the 3 earlier positions;
    append its key and value first, then attend over the whole cache.
    """
    return _verdict(
        "check_kv_cache_step",
        fn,
        lambda f: [_step_case(f, *case) for case in _step_cases(np.random.default_rng(5))],
        f"Passed: your step matches qkv's cached decoding on {RANDOM_CASES // 4} random steps, on a "
        "sequence from an empty cache, and with query heads sharing key/value heads.",
    )


# ---- 6. the online softmax ------------------------------------------------------------------


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
        "Your running sum is not rescaled when a later block raises the maximum: multiply the sum "
        "kept so far by exp(m_old - m_new) before adding the new block's exponentials.",
        lambda: np.exp(z - m) / s_plain,
    )
    yield (
        "Each block's exponentials are taken against the maximum known when it was read, and never "
        "brought to the final maximum: multiply them by exp(m_then - m_final) at the end.",
        lambda: stale / s_kept,
    )
    yield (
        "The last, shorter block is left out: when block does not divide the row, loop over "
        "range(0, n, block) and let the last slice be shorter.",
        lambda: (
            np.concatenate(
                [softmax(z[..., : n - n % block]), np.zeros_like(z[..., n - n % block :])], axis=-1
            )
            if n % block and n > block
            else None
        ),
    )
    yield (
        f"Your weights sum to 1 in each block ({len(starts)} in all per row): normalise by the "
        f"running sum of the whole row, not block by block.",
        lambda: per_block if len(starts) > 1 else None,
    )


def _online_case(fn, z: np.ndarray, block: int, what: str) -> None:
    # the single rows come first: a table that fails after them fails for being a table
    rows = (
        "it passes on single rows, so keep one running maximum and sum per row (axis=-1, keepdims=True)"
        if z.ndim > 1
        else ""
    )
    got = _array(_call(fn, f"on {what}", z.copy(), block, hint=rows), what)
    want = online_softmax(z, block=block)
    if got.shape != want.shape:
        raise _Wrong(
            f"On {what}, your function returned shape {got.shape}; the weights must have the "
            f"scores' shape {z.shape}."
        )
    if _close(got, want):
        return
    if not np.isfinite(got).all():
        if np.isneginf(z).any():
            raise _Wrong(
                "A row whose first block is all -inf (every key masked so far) comes out nan: while the "
                "running maximum is still -inf, exp(-inf - (-inf)) is nan; shift by 0 in that case, as "
                "qkv.online_softmax does."
            )
        raise _Wrong(_overflow(float(np.max(z))))
    _first_match(got, _online_mistakes(z, block))
    n = z.shape[-1]
    tail = n % block
    if tail and _close(got[..., : n - tail], want[..., : n - tail]):
        raise _Wrong(
            f"On {what}, the last, shorter block ({tail} score{'s' * (tail > 1)}) is wrong: when block "
            f"does not divide the row, loop over range(0, n, block) and let the last slice be shorter."
        )
    gap, where = _worst(got, want)
    raise _Wrong(
        f"On {what}, your weights differ from softmax's by up to {gap:.3g} (at index {where})"
        + (f"; {rows}" if rows else "")
        + "."
    )


def check_online_softmax(fn) -> CheckResult:
    """Check your ``online_softmax(z, block)`` against :func:`qkv.online_softmax`.

    Softmax along the last axis, reading each row a block of ``block`` scores at a
    time with a running maximum and a running sum. Blocks need not divide the row;
    rows may have ``-inf`` (masked) scores, even a whole block of them, and scores
    near 1000.

    Parameters
    ----------
    fn : callable
        Your function, called as ``fn(z, block)``.

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
    return _verdict(
        "check_online_softmax",
        fn,
        lambda f: [_online_case(f, *case) for case in _online_cases(np.random.default_rng(6))],
        f"Passed: your online softmax matches softmax on {RANDOM_CASES} random inputs and on a single "
        "score, a block of -inf scores, and scores near 1000.",
    )
