"""What the checkers share: the result, the one-sentence verdict and the comparisons."""

from __future__ import annotations

import textwrap
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

RANDOM_CASES = 100  # seeded random inputs per checker, besides its edge cases


ASK_AGAIN = "Run the check again with hint=True for the fix."
"""The last sentence of a failure that has a fix to give: the first answer names the mistake only."""


@dataclass(frozen=True)
class CheckResult:
    """What a checker found: ``ok``, what passed or what is wrong, and the fix when asked.

    A failure comes in two steps. The first answer, ``message``, is the symptom: which
    input, which entry, by how much, what it looks like, without saying how to put it
    right, so that the reader can still find the fix. ``fix`` holds that fix;
    ``result.hint()`` shows it, and so does the checker called again with ``hint=True``.

    It shows as its message (``repr`` and ``str`` are the message, wrapped at 80
    characters), and is true when the check passed.

    Examples
    --------
    >>> from qkv.exercises import check_causal_mask
    >>> result = check_causal_mask(lambda t_q, t_k=None: np.ones((t_q, t_k or t_q), bool))
    >>> result.ok, bool(result)
    (False, False)
    >>> result
    Your causal_mask(4) lets query 0 attend to key 1, a later position. Run the check
    again with hint=True for the fix.
    >>> result.hint()
    A causal mask is True on and below the diagonal only (np.tril).
    """

    ok: bool
    message: str
    fix: str = ""

    def hint(self) -> Text:
        """The fix, for a failure that has one (the checker called with ``hint=True`` shows it too)."""
        if self.ok:
            return Text("Nothing to fix: the check passed.")
        return Text(self.fix or "No hint beyond the message: " + self.message)

    def __str__(self) -> str:
        # lines a page or a notebook shows whole, never broken inside a hyphenated word
        return textwrap.fill(self.message, 80, break_on_hyphens=False)

    def __repr__(self) -> str:
        return str(self)

    def __bool__(self) -> bool:
        return self.ok


class Text(str):
    """A sentence that a notebook shows wrapped at 80 characters, without quotes."""

    def __repr__(self) -> str:
        return textwrap.fill(self, 80, break_on_hyphens=False)


class Wrong(Exception):
    """What is wrong, raised inside a checker and returned as its result.

    ``symptom`` says what came out wrong (the first answer); ``fix`` how to put it right,
    given only when the reader asks again.
    """

    def __init__(self, symptom: str, fix: str = ""):
        super().__init__(symptom)
        self.symptom, self.fix = symptom, fix


def verdict(checker: str, fn, run: Callable, passed: str, hint: bool = False) -> CheckResult:
    """Run ``run(fn)``: a ``CheckResult`` with the first ``Wrong`` it raises, or ``passed``.

    Without ``hint`` the message is the symptom alone (and a pointer to the fix when there
    is one); with ``hint`` it is the symptom followed by the fix.
    """
    if not callable(fn):
        raise ValueError(
            f"{checker} takes your function itself, as in {checker}(my_function); "
            f"got {fn!r} of type {type(fn).__name__}, which cannot be called"
        )
    try:
        run(fn)
    except Wrong as wrong:
        if not wrong.fix:
            return CheckResult(False, wrong.symptom)
        shown = f"{wrong.symptom} Fix: {wrong.fix}" if hint else f"{wrong.symptom} {ASK_AGAIN}"
        return CheckResult(False, shown, wrong.fix)
    return CheckResult(True, passed)


def call(fn, on: str, *args, hint: str = ""):
    """``fn(*args)``, with NumPy's warnings silenced; an exception becomes one sentence."""
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*args)
    except Exception as error:  # the reader's code may raise anything: report it, whatever it is
        said = " ".join(str(error).split())
        said = said if len(said) <= 120 else said[:117] + "..."
        raise Wrong(
            f"Your function raised {type(error).__name__}" + (f": {said}" if said else "") + f" ({on}).",
            hint[:1].upper() + hint[1:] + "." if hint else "",
        ) from None


def as_array(value, what: str) -> np.ndarray:
    """``value`` as an array, or a ``Wrong`` naming what came back instead."""
    if value is None:
        raise Wrong(f"Your function returned None for {what}.", "End it with a return statement.")
    try:
        array = np.asarray(value)
    except Exception:  # a ragged list, an object NumPy cannot read
        raise Wrong(f"Your function returned {type(value).__name__} for {what}, not an array.") from None
    if array.dtype == object:
        raise Wrong(f"Your function returned {type(value).__name__} for {what}, not an array of numbers.")
    return array


def as_pair(value, what: str) -> tuple[np.ndarray, np.ndarray]:
    """The two arrays (weights, output) of a returned pair, or a ``Wrong``."""
    if value is None or not isinstance(value, tuple | list) or len(value) != 2:
        raise Wrong(
            f"Your function returned {'None' if value is None else type(value).__name__} {what}, "
            f"not a pair of arrays.",
            "Return the pair (weights, output).",
        )
    return as_array(value[0], f"the weights {what}"), as_array(value[1], f"the output {what}")


# How close is right. In float64 two correct ways of computing the same weights (the row's
# maximum subtracted or a log-sum-exp, a sum in another order, q @ kᵀ / √d or (q / √d) @ kᵀ)
# differ by a few units in the last place, about 1e-16 relative for each operation, and by
# at most about 1e-13 on the checkers' largest inputs (scores near 1000, whose rounding
# error exp turns into a relative one). A tolerance of 1e-9 relative (1e-12 absolute, for
# entries near 0) leaves a margin of a thousand over that, and still rejects a softmax whose
# denominator is off by a constant: sum + 1e-6 or sum * (1 + 1e-6) moves every weight by
# 1e-7 relative or more on rows of up to 10 keys, which a tolerance of 1e-6 let through.
# float32 keeps float32's tolerance (its unit in the last place is 1.2e-7).
RTOL, ATOL = 1e-9, 1e-12
RTOL_32, ATOL_32 = 1e-4, 1e-6


def close(got: np.ndarray, want: np.ndarray) -> bool:
    """Equal up to rounding (see RTOL), NaN nowhere; float32 gets float32's tolerance."""
    if got.shape != want.shape:
        return False
    if got.dtype == bool or want.dtype == bool:
        return bool(np.array_equal(got, want))
    if not np.issubdtype(got.dtype, np.number):
        return False
    single = np.float32 in (got.dtype, want.dtype)
    with np.errstate(all="ignore"):
        return bool(
            np.allclose(got, want, rtol=RTOL_32 if single else RTOL, atol=ATOL_32 if single else ATOL)
        )


def first_match(got: np.ndarray, mistakes) -> None:
    """Raise the first known mistake (symptom, fix, make) whose result ``got`` reproduces."""
    for symptom, fix, make in mistakes:
        try:
            with np.errstate(all="ignore"):
                wrong = make()
        except ValueError:  # a mistake whose shapes cannot happen on this input
            continue
        if wrong is not None and close(got, np.asarray(wrong)):
            raise Wrong(symptom, fix)


def worst(got: np.ndarray, want: np.ndarray) -> tuple[float, tuple[int, ...]]:
    """The largest difference and where it is (NaN counts as the largest)."""
    with np.errstate(all="ignore"):
        gap = np.where(np.isnan(got) | np.isnan(want), np.inf, np.abs(got - want))
    where = np.unravel_index(int(np.argmax(gap)), gap.shape) if gap.size else ()
    return float(gap.max()) if gap.size else 0.0, tuple(int(i) for i in where)


def overflow(largest: float) -> Wrong:
    return Wrong(
        f"Your function returns nan or inf when the largest score is {largest:.4g}: exp of a score "
        f"above about 709 (88.7 in float32) is inf, and inf / inf is nan.",
        "Subtract each row's maximum before exp, which changes no weight.",
    )


def _divisors(d_k: int, d_v: int, t: int) -> list[tuple[str, float]]:
    """The divisors of the scores a reader may have used, the right one (√d_k) first.

    Each is (name, number); a candidate equal to √d_k on this input is left out, since
    there it cannot be told from the right one.
    """
    right = float(np.sqrt(d_k))
    named = [
        (f"√d_k = {right:.4g}", right),
        (f"√d_v = {np.sqrt(d_v):.4g} (d_v = {d_v})", float(np.sqrt(d_v))),
        (f"√T = {np.sqrt(t):.4g} (T = {t} keys)", float(np.sqrt(t))),
        (f"d_k = {d_k}", float(d_k)),
        ("nothing (the raw scores)", 1.0),
        (f"1 / √d_k (a multiplication by √d_k = {right:.4g})", 1.0 / right),
    ]
    out, seen = named[:1], {right}
    for name, value in named[1:]:
        if not any(np.isclose(value, s) for s in seen):
            out.append((name, value))
            seen.add(value)
    return out


def divisor_found(got: np.ndarray, weights_for, d_k: int, d_v: int, t: int) -> None:
    """Raise a ``Wrong`` naming the divisor of the scores that ``got`` reproduces, if any.

    ``weights_for(divisor)`` computes the right weights with the scores divided by
    ``divisor`` instead of √d_k; a wrong weights array that one of the other candidates
    reproduces is named by it.
    """
    for name, value in _divisors(d_k, d_v, t)[1:]:
        try:
            with np.errstate(all="ignore"):
                candidate = weights_for(value)
        except ValueError:
            continue
        if close(got, np.asarray(candidate)):
            raise Wrong(
                f"Your weights are those of scores divided by {name}, not by √d_k = {np.sqrt(d_k):.4g} "
                f"(d_k = {d_k}).",
                "Divide q · k by the square root of d_k, the width the query and key share: "
                "that is what keeps the scores' spread near 1 whatever the width.",
            )


def no_divisor(d_k: int, d_v: int, t: int) -> str:
    """The symptom's tail when no candidate divisor reproduces the weights."""
    names = ", ".join(name.split(" = ")[0].split(" (")[0] for name, _ in _divisors(d_k, d_v, t))
    return f"no divisor of the scores we tried ({names}) reproduces them"
