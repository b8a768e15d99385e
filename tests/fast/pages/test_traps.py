"""Guards for the claims of docs/traps.md, "Mistakes that run without an error": its
exercises (the wrong axis by hand, left padding under a causal mask) and the number of traps
every page that counts them gives. The demonstrations themselves run on the deep dive and
are guarded in test_traps_in_depth.py.

Each solution's answer is derived here independently (by formula, by hand, or from qkv's
public functions on the test's own data), and the text the solution's code prints on the
page (read through ``page_output``) must state that answer.
"""

from __future__ import annotations

import math
import re
import textwrap

import numpy as np
import pytest
from prose import check_prose
from support import ROOT, numbers

import qkv

# ---- chapter 10 ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def traps(page_output):
    return page_output("traps.md")


@pytest.mark.claim("traps-exercise-wrong-axis")
def test_softmax_down_the_columns_of_the_exercise_by_hand(traps):
    e2 = math.exp(2)
    by_hand = np.array([[e2 / (e2 + 1), 0.5], [1 / (e2 + 1), 0.5]])
    scores = np.array([[2.0, 0.0], [0.0, 0.0]])
    np.testing.assert_allclose(qkv.softmax(scores, axis=0), by_hand, rtol=1e-12)
    sums = by_hand.sum(axis=1)
    assert math.isclose(sums.mean(), 1.0)
    check_prose("traps-exercise-wrong-axis", *sums, sums.mean(), by_hand.sum(axis=0)[0])
    text = traps["traps_exercises.py:wrong_axis"]
    matrix = text.split("wrong weights:", 1)[1].split("row sums:", 1)[0]
    np.testing.assert_allclose(numbers(matrix), by_hand.ravel(), atol=5e-4)
    assert (
        traps.line("traps_exercises.py:wrong_axis", "row sums:").split()
        == f"row sums: [{sums[0]:.3f} {sums[1]:.3f}] their mean: {1:.3f}".split()
    )
    assert traps.values("traps_exercises.py:wrong_axis", "right row sums:") == [1.0, 1.0]


@pytest.mark.claim("traps-exercise-left-padding")
def test_left_padding_with_a_causal_mask_empties_the_pad_queries(traps):
    # query i of sequence b sees keys 0..i; it has none when all of them are padding,
    # i.e. when i < t - length
    t, lengths = 4, [2, 4]
    by_hand = [(b, i) for b, n in enumerate(lengths) for i in range(t) if i < t - n]
    assert by_hand == [(0, 0), (0, 1)]
    padding = [i for i in range(t) if i < t - lengths[0]]  # the first sequence's pads
    check_prose("traps-exercise-left-padding", *padding, *[i for _, i in by_hand])
    left = qkv.padding_mask(lengths, t)[..., ::-1]  # padding at the start: the mirror image
    allowed = left & qkv.causal_mask(t)
    empty = [(int(b), int(i)) for b, i in zip(*np.nonzero(~allowed.any(axis=-1)), strict=True)]
    assert empty == by_hand
    with pytest.raises(ValueError, match=r"\(0, 0\)") as refused:
        qkv.attention(np.ones((2, t, 3)), np.ones((2, t, 3)), np.ones((2, t, 3)), mask=allowed)
    section = "traps_exercises.py:left_padding"
    assert (
        traps.line(section, "(sequence, query) pairs left with no key:")
        == f"(sequence, query) pairs left with no key: {by_hand}"
    )
    refusal = traps[section].split("\n", 1)[1].strip()
    assert refusal == textwrap.fill(f"qkv refuses: {refused.value}", 72)


NUMBER_WORDS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def test_every_page_that_counts_the_traps_gives_the_number_the_chapter_has():
    docs = ROOT / "docs"
    headings = re.findall(r"^## (\d+)\. ", (docs / "traps.md").read_text(encoding="utf-8"), re.M)
    assert headings == [str(n) for n in range(1, len(headings) + 1)]  # numbered 1, 2, ... in order
    counted = {
        (page.name, word.lower())
        for page in sorted(docs.glob("*.md"))
        for word in re.findall(r"\b(\w+) attention bugs\b", page.read_text(encoding="utf-8"), re.I)
    }
    assert {page for page, _ in counted} >= {"traps.md", "position.md"}  # the phrase is still found
    wrong = {(page, word) for page, word in counted if word != NUMBER_WORDS[len(headings) - 1]}
    assert not wrong, f"chapter 10 has {len(headings)} traps; these pages count otherwise: {sorted(wrong)}"
