"""Guards for the claims of the home page (docs/index.md): its worked example.

Each test derives its fact itself, from qkv's public API applied to ``qkv.toy`` data, from
hand-written NumPy or from algebra, and then checks that what the page prints under its
executed blocks (``page_output``) agrees with it, to the printed rounding. No expected value
is copied from the printed output, and no test reads a name a snippet defines.
"""

from __future__ import annotations

import numpy as np
import pytest
from pages_support import DRANK, MILK, WORDS, assert_printed, reference_attention
from prose import check_prose
from support import numbers

import qkv
from qkv import toy

# ---- Home page -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def shown_home(page_output):
    return page_output("index.md")


@pytest.mark.claim("rows-sum-to-one")
def test_home_example_rows_sum_to_one(shown_home, hand_built):
    weights = hand_built[3].weights
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-12)
    check_prose("rows-sum-to-one", weights.sum(axis=-1).max())
    assert_printed(shown_home.line("first_attention.py:attend", "row sums:"), [1.0] * len(WORDS), 6)


@pytest.mark.claim("home-shapes")
def test_home_example_gives_one_row_per_word_and_d_v_columns(shown_home):
    p, t = toy.hand_built_projections(), len(WORDS)
    weights, output = qkv.self_attention(toy.feature_embeddings(), p)
    assert weights.shape == (t, t) and output.shape == (t, p.d_v)
    check_prose("home-shapes", *weights.shape, output.shape[1], p.d_v, p.d_k)
    assert (
        shown_home.line("first_attention.py:attend", "weights:")
        == f"weights: {(t, t)}   output: {(t, p.d_v)}"
    )


@pytest.mark.claim("home-is-the-formula")
def test_home_example_is_softmax_of_scaled_scores_times_values(shown_home, hand_built):
    q, k, v, result = hand_built
    weights, output = reference_attention(q, k, v)
    check_prose("home-is-the-formula", q.shape[-1])  # the d_k under the square root
    np.testing.assert_allclose(result.weights, weights, rtol=1e-12)
    np.testing.assert_allclose(result.output, output, rtol=1e-12, atol=1e-14)
    for word, w in zip(WORDS, weights[DRANK], strict=True):  # the row the page prints
        assert_printed(shown_home.line("first_attention.py:attend", f"drank -> {word} "), w, 3)


@pytest.mark.claim("home-drank-milk")
def test_home_example_drank_puts_over_two_thirds_on_milk(shown_home, hand_built):
    row = hand_built[3].weights[DRANK]
    assert row.argmax() == MILK and row.max() > 2 / 3
    printed = {w: numbers(shown_home.line("first_attention.py:attend", f"drank -> {w} "))[0] for w in WORDS}
    assert max(printed, key=printed.get) == "milk" and printed["milk"] > 2 / 3
