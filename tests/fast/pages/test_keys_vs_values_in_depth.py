"""Guards for the claims of docs/keys-vs-values-in-depth.md.

Each test derives its fact itself, from qkv's public API applied to ``qkv.toy`` data, from
hand-written NumPy or from algebra, and then checks that what the page prints under its
executed blocks (``page_output``) agrees with it, to the printed rounding. No expected value
is copied from the printed output, and no test reads a name a snippet defines.
"""

from __future__ import annotations

import pytest

from qkv import toy


@pytest.mark.claim("kv-sep-values-lack-liquid")
def test_no_value_of_the_toy_says_liquid(hand_built):
    v = hand_built[2]
    assert "liquid" in toy.FEATURES and "liquid" not in toy.VALUE_COLUMNS
    assert list(toy.VALUE_COLUMNS) == ["person", "verb", "dairy", "container"]
    assert v.shape[1] == len(toy.VALUE_COLUMNS)  # a value has these columns and no other
