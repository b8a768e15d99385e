"""What the checkers share: the result, the one-sentence verdict and the comparisons."""

from __future__ import annotations

import textwrap
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

RANDOM_CASES = 100  # seeded random inputs per checker, besides its edge cases


@dataclass(frozen=True)
class CheckResult:
    """What a checker found: ``ok`` and one sentence saying what passed or what is wrong.

    It shows as its sentence (``repr`` and ``str`` are the message, wrapped at 80
    characters), and is true when the check passed.

    Examples
    --------
    >>> from qkv.exercises import check_causal_mask
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
