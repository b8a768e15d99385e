"""What a guarded sentence says, checked against what a test computes.

A chapter types its numbers by hand: "*it* puts 0.477 of its weight on *The*". The test that
guards the sentence computes 0.477 itself; ``check_prose`` reads the sentence from the page
and compares every number written in it with the computed values, at the precision written.
So the prose and the test cannot drift apart unseen, and no test carries a copy of a number
that the prose also types.

    @pytest.mark.claim("trained-it-ranking")
    def test_it_ranking():
        w = ...  # computed
        check_prose("trained-it-ranking", w_the, w_mat, rank_mat, ...)

A written number matches a computed one when they agree to the written decimals: "0.477"
accepts 0.4766 to 0.4774, "27.3" accepts 27.25 to 27.35, "460,800" only 460800. A number
written as a power of ten (``$10^{-4}$``, ``10⁻³⁰``) must be equal to 9 significant
digits. Pass ``...`` for a number that labels rather than measures ("chapter 6", "layer 14").
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from types import EllipsisType

from support import ROOT

_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")

# A number as prose writes it: a power of ten (10^{-4}, 10^4), or digits with optional
# thousands separators and decimals, an optional ordinal suffix or percent sign.
_NUMBER = re.compile(
    r"""
    (?P<power>10\^\{?(?P<exponent>[-\u2212]?\d+)\}?)
    | (?P<sign>[-\u2212])?
      (?P<digits>\d{1,3}(?:,\d{3})+(?![\d])|\d+)(?P<decimals>\.\d+)?
      (?P<suffix>st|nd|rd|th|%)?
    """,
    re.VERBOSE,
)
_NAME_CHAR = re.compile(r"[A-Za-z_]")


@dataclass(frozen=True)
class Written:
    """One number as a sentence writes it."""

    text: str
    value: float
    tolerance: float  # half a unit of the last written digit (relative 1e-9 for 10^x)

    def matches(self, computed: float) -> bool:
        if self.tolerance < 0:  # a power of ten: relative
            return math.isclose(computed, self.value, rel_tol=1e-9)
        return abs(computed - self.value) <= self.tolerance + 1e-12 * max(1.0, abs(self.value))


def written_numbers(sentence: str) -> list[Written]:
    """Every number written in ``sentence``, in order; digits that are part of a name
    (GPT-2, float32, Q4_1, SmolLM2-135M, 7B, d_k) are not numbers; tests/fast/
    test_prose_numbers.py shows what is read from which text."""
    text = re.sub(
        "[⁰¹²³⁴⁵⁶⁷⁸⁹⁻]+", lambda m: "^{" + m.group().translate(_SUPERSCRIPTS) + "}", sentence
    ).replace("\u2212", "-")
    found = []
    for m in _NUMBER.finditer(text):
        start, end = m.span()
        before = text[start - 1] if start else " "
        after = text[end] if end < len(text) else " "
        if m.group("power"):
            found.append(Written(m.group(0), 10.0 ** int(m.group("exponent")), -1.0))
            continue
        sign_at = start if m.group("sign") else None
        first_digit = start + (1 if sign_at is not None else 0)
        # part of a name: a letter or underscore just before, or a letter just after (7B),
        # or a hyphen joining it to a word (GPT-2)
        if _NAME_CHAR.match(before) and sign_at is None:
            continue
        if sign_at is not None and start and re.match(r"[A-Za-z0-9_]", text[start - 1]):
            # "0.12-0.18" or "GPT-2": the hyphen joins, it is not a minus sign
            if _NAME_CHAR.match(text[start - 1]):
                continue
            sign_at = None
        if _NAME_CHAR.match(after) and not m.group("suffix"):
            continue
        digits = m.group("digits").replace(",", "")
        decimals = m.group("decimals") or ""
        value = float(digits + decimals)
        if sign_at is not None:
            value = -value
        tolerance = 0.5 * 10.0 ** -(len(decimals) - 1 if decimals else 0)
        found.append(Written(text[(sign_at if sign_at is not None else first_digit) : end], value, tolerance))
    return found


@functools.cache
def _claims() -> dict[str, str]:
    from qkv_site.claims import find_claims

    return {c.id: c.sentence for c in find_claims(ROOT / "docs")}


def claim_sentence(claim_id: str) -> str:
    """The sentence that carries ``<!-- claim: claim_id -->``, as How we know quotes it."""
    try:
        return _claims()[claim_id]
    except KeyError:
        raise AssertionError(f"no page marks a claim {claim_id!r}") from None


def check_prose(claim_id: str, *computed: float | EllipsisType) -> None:
    """Fail unless the numbers written in the claim's sentence are ``computed``, in order, each
    to the precision it is written with; ``...`` stands for a label (not checked)."""
    sentence = claim_sentence(claim_id)
    written = written_numbers(sentence)
    shown = ", ".join(w.text for w in written) or "none"
    if len(written) != len(computed):
        raise AssertionError(
            f"claim {claim_id!r} writes {len(written)} numbers ({shown}); the test passed "
            f"{len(computed)}.\nSentence: {sentence}"
        )
    wrong = [
        f"{w.text} (computed {c!r})"
        for w, c in zip(written, computed, strict=True)
        if c is not Ellipsis and not w.matches(float(c))
    ]
    if wrong:
        raise AssertionError(
            f"claim {claim_id!r} writes numbers the test does not compute: "
            f"{'; '.join(wrong)}.\nSentence: {sentence}"
        )
