"""Guards for the claims of docs/keys-vs-values-in-depth.md.

Each test derives its fact itself, from qkv's public API applied to ``qkv.toy`` data, from
hand-written NumPy or from algebra, and then checks that what the page prints under its
executed blocks (``page_output``) agrees with it, to the printed rounding. No expected value
is copied from the printed output, and no test reads a name a snippet defines.
"""

from __future__ import annotations

import numpy as np
import pytest
from pages_support import (
    CUP,
    DRANK,
    E_4,
    E_8,
    MILK,
    WORDS,
    named_numbers,
)
from prose import check_prose

import qkv
from qkv import toy


@pytest.fixture(scope="module")
def shown_kv_depth(page_output):
    """Chapter 3's deep dive: its two exercises run on the chapter's toy."""
    return page_output("keys-vs-values-in-depth.md")


@pytest.mark.claim("kv-sep-values-lack-liquid")
def test_no_value_of_the_toy_says_liquid(hand_built):
    v = hand_built[2]
    assert "liquid" in toy.FEATURES and "liquid" not in toy.VALUE_COLUMNS
    assert list(toy.VALUE_COLUMNS) == ["person", "verb", "dairy", "container"]
    assert v.shape[1] == len(toy.VALUE_COLUMNS)  # a value has these columns and no other


# ---- the exercises moved from chapter 3 ----


@pytest.mark.claim("kv-sep-ex-cup-liquid")
def test_a_second_liquid_key_splits_drank_between_milk_and_cup(shown_kv_depth, hand_built):
    q, k, v, _ = hand_built
    k_cup = k.copy()
    k_cup[CUP, toy.FEATURES.index("liquid")] = 1
    after = qkv.attention(q, k_cup, v)
    # drank's scores: 8/√8 on milk and cup, 4/√8 on she, 0 on the other three
    share = E_8 / (2 * E_8 + E_4 + 3)
    np.testing.assert_allclose(after.weights[DRANK, [MILK, CUP]], [share, share], rtol=1e-12)
    dairy, container = (toy.VALUE_COLUMNS.index(c) for c in ("dairy", "container"))
    np.testing.assert_array_equal(v[MILK], np.eye(4)[dairy])  # milk hands over dairy alone,
    np.testing.assert_array_equal(v[CUP], np.eye(4)[container])  # cup container alone
    check_prose(
        "kv-sep-ex-cup-liquid",
        after.weights[DRANK, MILK],
        after.output[DRANK, dairy],
        after.output[DRANK, container],
    )
    section = "keys_vs_values.py:exercise_cup"
    assert named_numbers(shown_kv_depth.line(section, "drank reads:")) == {
        w: pytest.approx(x, abs=5e-3) for w, x in zip(WORDS, after.weights[DRANK], strict=True)
    }
    assert named_numbers(shown_kv_depth.line(section, "drank receives:")) == {
        c: pytest.approx(x, abs=5e-3) for c, x in zip(toy.VALUE_COLUMNS, after.output[DRANK], strict=True)
    }
