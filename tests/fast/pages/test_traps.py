"""Guards for the claims of docs/traps.md, "Mistakes that run without an error": its
exercises (the wrong axis by hand, the attention with five traps to fix) and the number of
traps every page that counts them gives (the left-padding exercise is on the deep dive,
test_traps_in_depth.py). The demonstrations themselves run on the deep dive and
are guarded in test_traps_in_depth.py.

Each solution's answer is derived here independently (by formula, by hand, or from qkv's
public functions on the test's own data), and the text the solution's code prints on the
page (read through ``page_output``) must state that answer.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from prose import check_prose
from support import ROOT, numbers

import qkv
from qkv.exercises import check_attention

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


@pytest.mark.claim("traps-ex-fix-attention")
@pytest.mark.parametrize("left", [None, "scale", "mask", "stable", "axis", "values"])
def test_each_of_the_five_traps_of_the_attention_to_fix_is_one_the_checker_names(left, traps):
    """The exercise's attention holds five traps: with all five fixed it passes, and with any
    one of them left in, the checker fails it."""

    def attention(q, k, v, mask):
        scores = q @ k.swapaxes(-1, -2)
        if left != "scale":
            scores = scores / np.sqrt(q.shape[-1])
        scores = scores + mask if left == "mask" else np.where(mask, scores, -np.inf)
        axis = -2 if left == "axis" else -1
        if left != "stable":
            scores = scores - scores.max(axis=axis, keepdims=True)
        e = np.exp(scores)
        weights = e / e.sum(axis=axis, keepdims=True)
        return weights, (weights if left == "values" else weights @ v)

    result = check_attention(attention)
    assert result.ok == (left is None), result.message
    if left is None:  # what the page's solution prints is that verdict
        assert " ".join(traps["traps_exercises.py:fix_attention"].split()) == result.message
        check_prose("traps-ex-fix-attention")


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
