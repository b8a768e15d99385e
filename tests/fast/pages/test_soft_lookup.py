"""Guards for the claims of docs/soft-lookup.md, "Attention is a weighted average": the
dictionary, the soft lookup on the palette (written down from what the page's prose states)
and the exercises.

Each test derives its fact itself, from qkv's public API applied to ``qkv.toy`` data, from
hand-written NumPy or from algebra, and then checks that what the page prints under its
executed blocks (``page_output``) agrees with it, to the printed rounding. No expected value
is copied from the printed output, and no test reads a name a snippet defines.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pages_support import (
    BLUE,
    KEYS,
    NAMES,
    RED,
    VALUES,
    WARM,
    assert_printed,
    line_of,
    palette_weights,
    reference_attention,
    seeds,
    widths,
)
from prose import check_prose
from support import numbers

import qkv

BRIGHT = WARM[:, ::-1]  # exercise 1's "something bright": the other of the two key columns


@pytest.fixture(scope="module")
def shown_lookup(page_output):
    return page_output("soft-lookup.md")


def printed_weights(text):
    """The 'weight on NAME W' lines of a block, in printed order: [(name, w), ...]."""
    lines = [
        ln.split()
        for ln in text.splitlines()
        if ln.strip().startswith("weight on ") and not ln.strip().startswith("weight on blue at")
    ]
    return [(words[2], float(words[3])) for words in lines]


@pytest.mark.claim("lookup-scores-are-warmth")
def test_scores_of_the_warm_query_are_the_keys_warmth(shown_lookup):
    scores = KEYS @ WARM[0]
    np.testing.assert_array_equal(scores, KEYS[:, 0])
    check_prose("lookup-scores-are-warmth", *WARM[0], *scores)
    assert_printed(shown_lookup.line("soft_lookup.py:soft", "scores:"), scores, 6)
    # and those keys are the page's: the weights it prints are the softmax of these scores
    weights = qkv.attention(WARM, KEYS, VALUES).weights[0]
    assert printed_weights(shown_lookup["soft_lookup.py:soft"]) == [
        (n, pytest.approx(w, abs=5e-4)) for n, w in zip(NAMES, weights, strict=True)
    ]


@pytest.mark.claim("lookup-every-key-weighted")
def test_every_entry_gets_a_positive_weight_even_the_worst_match(shown_lookup):
    weights = qkv.attention(WARM, KEYS, VALUES).weights[0]
    np.testing.assert_allclose(weights, palette_weights(WARM[0]), rtol=1e-12)
    assert NAMES[int(np.argmin(KEYS @ WARM[0]))] == "blue" and (KEYS @ WARM[0])[BLUE] < 0
    assert (weights > 0).all()
    check_prose("lookup-every-key-weighted", weights.sum())
    printed = dict(printed_weights(shown_lookup["soft_lookup.py:soft"]))
    assert printed["blue"] == pytest.approx(weights[BLUE], abs=5e-4) and printed["blue"] > 0
    assert shown_lookup.values("soft_lookup.py:soft", "sum of weights:") == [1.0]


@pytest.mark.claim("lookup-weights-follow-scores")
def test_weights_rank_entries_as_the_scores_do(shown_lookup):
    scores = KEYS @ WARM[0]
    weights = qkv.attention(WARM, KEYS, VALUES).weights[0]
    np.testing.assert_array_equal(np.argsort(weights), np.argsort(scores))
    text = shown_lookup["soft_lookup.py:soft"]
    printed = [w for _, w in printed_weights(text)]
    np.testing.assert_array_equal(np.argsort(printed), np.argsort(numbers(line_of(text, "scores:"))))


@pytest.mark.claim("lookup-answer-is-blend")
def test_the_answer_is_the_weighted_average_and_no_stored_colour(shown_lookup):
    weights, answer = reference_attention(WARM, KEYS, VALUES)
    np.testing.assert_allclose(qkv.attention(WARM, KEYS, VALUES).output, answer, rtol=1e-12)
    np.testing.assert_allclose(answer[0], weights[0] @ VALUES, rtol=1e-12)
    assert np.abs(VALUES - answer[0]).max(axis=-1).min() > 0.1  # no entry holds it
    red, green, blue = answer[0]
    assert red > max(green, blue) and min(green, blue) > 0.2  # reddish, but muted
    line = shown_lookup.line("soft_lookup.py:soft", "answer:")
    assert_printed(line.split("an RGB")[0], answer[0], 3)


@pytest.mark.claim("lookup-answer-width")
@settings(deadline=None)  # timing is not what these tests check
@given(seeds, widths, widths, st.integers(1, 8))
def test_the_answer_has_the_values_width_not_the_keys(seed, d_k, d_v, n):
    rng = np.random.default_rng(seed)
    query, keys, values = rng.normal(size=(1, d_k)), rng.normal(size=(n, d_k)), rng.normal(size=(n, d_v))
    assert qkv.attention(query, keys, values).output.shape == (1, d_v)


@pytest.mark.claim("lookup-answer-width")
def test_the_palette_answer_has_three_numbers_from_two_number_keys(shown_lookup):
    assert qkv.attention(WARM, KEYS, VALUES).output.shape == (1, 3) and KEYS.shape[1] == 2
    answer = shown_lookup.line("soft_lookup.py:soft", "answer:").split("an RGB")[0]
    assert len(numbers(answer)) == 3


@pytest.mark.claim("lookup-sharpen-to-hard")
def test_a_larger_query_concentrates_the_weight_on_the_best_key(shown_lookup):
    best = int(np.argmax(KEYS @ WARM[0]))
    assert best == RED
    factors = (1, 4, 16, 64)  # the rows the page prints
    results = [qkv.attention(WARM * f, KEYS, VALUES) for f in factors]
    on_best = [r.weights[0, best] for r in results]
    assert np.all(np.diff(on_best) > 0)
    np.testing.assert_allclose(results[-1].output[0], VALUES[best], atol=5e-4)  # to three decimals
    check_prose("lookup-sharpen-to-hard", factors[-1], on_best[-1])
    for f, r in zip(factors, results, strict=True):
        line = shown_lookup.line("soft_lookup.py:sharpen", f"x{f} ")
        weight, answer = line.split("answer")
        assert_printed(weight, [f, r.weights[0, RED]], 4)
        assert_printed(answer, r.output[0], 3)


# ---- exercises of chapter 1 ----------------------------------------------------------------


@pytest.mark.claim("lookup-ex-bright")
def test_the_bright_query_weighs_white_most_and_blue_least(shown_lookup):
    scores = KEYS @ BRIGHT[0]
    np.testing.assert_array_equal(scores, KEYS[:, 1])  # the brightness column
    w = palette_weights(BRIGHT[0])
    np.testing.assert_allclose(qkv.attention(BRIGHT, KEYS, VALUES).weights[0], w, rtol=1e-12)
    ranked = [NAMES[i] for i in np.argsort(-w)]
    assert ranked == [NAMES[i] for i in np.argsort(-scores)]
    assert (ranked[0], ranked[-1]) == ("white", "blue")
    check_prose("lookup-ex-bright", *scores)
    # the page's run prints those scores and weights, in the palette's order
    line = shown_lookup.line("soft_lookup.py:exercise_bright", "scores:")
    printed_scores, printed_weights = line.removeprefix("scores:").split("weights:")
    assert_printed(printed_scores, scores, 6)
    assert_printed(printed_weights, w, 3)


@pytest.mark.claim("lookup-terms-entropy")
def test_entropy_is_zero_for_one_key_log_t_when_even_and_qkv_computes_the_formula():
    rng = np.random.default_rng(0)
    for t in (2, 4, 6, 64):
        rows = qkv.softmax(rng.normal(size=(5, t)) * 3)
        by_hand = -(rows * np.log(rows)).sum(axis=-1)
        np.testing.assert_allclose(qkv.entropy(rows), by_hand, rtol=1e-12)
        assert (qkv.entropy(rows) < np.log(t)).all()  # ln T is the largest value
        np.testing.assert_allclose(qkv.entropy(np.full(t, 1 / t)), np.log(t), rtol=1e-12)
        one_hot = np.eye(t)[0]
        assert qkv.entropy(one_hot) == 0.0  # 0 ln 0 counts as 0
    # sharpening lowers it: the warm query of the page, at growing factors
    h = [float(qkv.entropy(qkv.attention(f * WARM, KEYS, VALUES).weights)[0]) for f in (1, 4, 16, 64)]
    assert h == sorted(h, reverse=True)
    check_prose("lookup-terms-entropy", qkv.entropy(np.eye(4)[0]))


@pytest.mark.claim("lookup-terms-nats")
def test_a_nat_is_one_over_ln_2_bits():
    w = qkv.softmax(np.random.default_rng(1).normal(size=8))
    in_nats = float(qkv.entropy(w))
    in_bits = float(-(w * np.log2(w)).sum())
    assert in_bits == pytest.approx(in_nats / np.log(2), rel=1e-12)  # bits per nat: 1/ln 2
    check_prose("lookup-terms-nats", 1, 2, 1 / np.log(2))
