"""Guards for the claims of docs/things-to-try.md, "Five experiments in the explorer": each
experiment's finding recomputed on the explorer's exported states, and the exercise
solutions' printed output.

The reference recomputes every state from qkv's public API, all six queries at once,
independently of ``qkv.toy.query_state`` (the page's own code) and
``qkv_site.explorer_data``; the data tests themselves are in tests/fast/test_explorer_data.py.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from pages_support import by_state, decoded, reference
from prose import check_prose, claim_sentence, written_numbers
from qkv_site.explorer_data import DEFAULTS, STAGES, explorer_json

import qkv
from qkv import toy
from qkv.toy import D_K_MAX, query_state

WORDS = toy.SENTENCE

HALF_UNIT = 0.5e-6 + 1e-12  # rounding to 6 decimals moves a number by at most this


def stated(claim_id):
    """The numbers a guarded sentence writes, in order: a test computes with the givens
    (a width, a threshold) read here instead of keeping a copy of them."""
    return [w.value for w in written_numbers(claim_sentence(claim_id))]


@pytest.fixture(scope="module")
def data() -> dict:
    return json.loads(explorer_json())


# ---- the five experiments, on the exported data -------------------------------------------


@pytest.mark.claim("try-stages-keep-order")
def test_1_scaling_and_softmax_keep_the_order_of_the_keys(data):
    for word in WORDS:
        for d_k in range(1, D_K_MAX + 1):
            for scale in (False, True):
                raw, scaled, weights, *_ = reference(d_k, scale)
                i = WORDS.index(word)
                order = np.argsort(-raw[i], kind="stable")
                assert np.array_equal(np.argsort(-scaled[i], kind="stable"), order)
                assert np.array_equal(np.argsort(-weights[i], kind="stable"), order)
    check_prose("try-stages-keep-order")
    # and the page's data keeps it at the default state
    s = DEFAULTS
    assert np.argmax(by_state(data, "raw", s["query"], s["dk"], 1)) == np.argmax(
        by_state(data, "weights", s["query"], s["dk"], 1)
    )


@pytest.mark.claim("try-output-is-blend")
def test_1_output_is_the_weights_times_the_values(data):
    check_prose("try-output-is-blend", ...)  # "stage 4" is a label
    values = decoded(data["values"], data)
    for word in WORDS:
        for d_k in (1, 16, 64):
            for scale in (False, True):
                w = by_state(data, "weights", word, d_k, scale)
                out = by_state(data, "output", word, d_k, scale)
                assert np.abs(w @ values - out).max() < 1e-5
                state = query_state(word, d_k, scale)
                reference_values = reference(d_k, scale)[4]
                np.testing.assert_allclose(
                    state.output, (state.weights[:, None] * reference_values).sum(axis=0), atol=1e-12
                )


def ranks(scores) -> list[int]:
    return list(np.argsort(-np.asarray(scores), kind="stable"))


@pytest.mark.claim("try-drank-reranks")
def test_3_drank_rearranges_every_rank_at_the_default_dk(data):
    d_k = int(stated("try-drank-reranks")[0])
    assert d_k == DEFAULTS["dk"]  # the width the explorer opens with
    check_prose("try-drank-reranks", d_k)
    she = ranks(by_state(data, "raw", "she", d_k, 1))
    drank = ranks(by_state(data, "raw", "drank", d_k, 1))
    assert all(a != b for a, b in zip(she, drank, strict=True))
    raw = reference(d_k, True)[0]
    assert all(a != b for a, b in zip(ranks(raw[0]), ranks(raw[1]), strict=True))


@pytest.mark.claim("try-dk1-one-ranking", "try-dk1-drank-like-she")
def test_2_at_dk_1_every_query_ranks_the_keys_one_way_or_reversed():
    raw = reference(1, True)[0]
    base = ranks(raw[0])
    for i in range(len(WORDS)):
        assert ranks(raw[i]) in (base, base[::-1]), WORDS[i]
    # both directions really occur, so the explorer shows the flip
    assert {tuple(ranks(r)) == tuple(base) for r in raw} == {True, False}
    assert ranks(raw[WORDS.index("drank")]) == base


@pytest.mark.claim("try-default-state")
def test_the_explorer_opens_on_she_at_the_weights_stage_scaled(data):
    assert set(DEFAULTS) == {"stage", "query", "dk", "scale"}
    assert (DEFAULTS["query"], DEFAULTS["scale"]) == ("she", 1)
    assert STAGES[DEFAULTS["stage"] - 1] == "softmax weights"
    check_prose("try-default-state", DEFAULTS["stage"], DEFAULTS["dk"])
    assert data["defaults"] == DEFAULTS  # what the page reads


@pytest.mark.claim("try-unscaled-spread-ratio")
def test_4_this_heads_unscaled_scores_spread_wider_than_the_average_head(page_output):
    # The explorer's own head, not the average of random ones: the standard deviation of its
    # 36 unscaled scores at d_k = 64 over that of its 36 scaled scores at d_k = 16.
    ratio = reference(64, False)[1].std() / reference(16, True)[1].std()
    assert abs(ratio - 8) > 1  # this head is not the average one, so "eight" would be wrong
    check_prose("try-unscaled-spread-ratio", len(WORDS) ** 2, ratio, 16)
    shown = page_output("things-to-try.md")
    assert shown.values("things_to_try.py:break_scaling", "spread of the scores:")[0] == pytest.approx(
        ratio, abs=0.05
    )


@pytest.mark.claim("try-near-tie-ratio")
def test_5_a_lead_under_one_leaves_the_runner_up_over_a_third_of_the_leader():
    lead = stated("try-near-tie-ratio")[0]  # "a lead of less than 1"
    _, scaled, weights, *_ = reference(64, False)
    for i, word in enumerate(WORDS):
        first, second = np.argsort(-scaled[i])[:2]
        ratio = weights[i, second] / weights[i, first]
        np.testing.assert_allclose(ratio, np.exp(scaled[i, second] - scaled[i, first]), rtol=1e-9)
        if scaled[i, first] - scaled[i, second] < lead:
            assert ratio > np.exp(-lead), word
    check_prose("try-near-tie-ratio", lead, ..., np.exp(-lead))  # e^{-1}: its -1 is notation


@pytest.mark.claim("try-unscaled-collapses")
def test_4_unscaled_dk_64_collapses_most_queries(data):
    threshold = stated("try-unscaled-collapses")[0]  # "more than 0.99"
    largest = {w: by_state(data, "max_weight", w, 64, False) for w in WORDS}
    assert sum(float(m) > threshold for m in largest.values()) == 4  # "Four of the six"
    assert largest[DEFAULTS["query"]] > threshold
    _, _, weights, *_ = reference(64, False)
    assert (weights.max(axis=-1) > threshold).sum() == 4
    she = qkv.entropy(weights[WORDS.index("she")])
    assert abs(by_state(data, "entropy", "she", 64, False) - she) <= HALF_UNIT
    check_prose("try-unscaled-collapses", threshold, she)


@pytest.mark.claim("try-close-scores-split")
def test_5_the_queries_that_stay_split_have_near_tied_top_scores():
    (lead,) = stated("try-close-scores-split")  # "less than 1 apart"
    check_prose("try-close-scores-split", lead)
    raw, _, weights, *_ = reference(64, False)
    top_two = np.sort(raw, axis=-1)[:, ::-1][:, :2]
    near_tie = {WORDS[i] for i in range(len(WORDS)) if top_two[i, 0] - top_two[i, 1] < lead}
    threshold = stated("try-unscaled-collapses")[0]  # the queries experiment 4 calls collapsed
    split = {WORDS[i] for i in range(len(WORDS)) if weights[i].max() <= threshold}
    assert split == near_tie == {"milk", "cup"}


@pytest.mark.claim("try-scaled-spread")
def test_4_scaling_at_dk_64_spreads_every_query(data):
    weights = reference(64, True)[2]
    largest, lowest = weights.max(), qkv.entropy(weights).min()
    for word in WORDS:
        assert by_state(data, "max_weight", word, 64, True) <= largest + HALF_UNIT, word
        assert by_state(data, "entropy", word, 64, True) >= lowest - HALF_UNIT, word
    assert largest < 0.99 < by_state(data, "max_weight", "she", 64, False)  # it was collapsed
    check_prose("try-scaled-spread", 64, largest, lowest, len(WORDS), np.log(len(WORDS)))


@pytest.mark.claim("try-dk1-identical")
def test_2_at_dk_1_scaling_changes_nothing(data):
    for word in WORDS:
        for field in ("scaled", "weights", "entropy", "max_weight", "output"):
            assert np.array_equal(
                by_state(data, field, word, 1, True), by_state(data, field, word, 1, False)
            ), (word, field)
        on, off = query_state(word, 1, True), query_state(word, 1, False)
        assert np.array_equal(on.scaled, off.scaled)
        assert np.array_equal(on.weights, off.weights)
    assert qkv.scale_factor(True, 1) == 1.0
    check_prose("try-dk1-identical", 1, ..., ..., qkv.scale_factor(True, 1))  # 1/√1: notation


@pytest.mark.claim("try-dk4-halves")
def test_3_at_dk_4_scaling_halves_and_at_16_quarters_every_score():
    small, here = (int(d) for d in stated("try-dk4-halves"))
    check_prose("try-dk4-halves", small, here)
    for d_k, factor in ((small, 1 / 2), (here, 1 / 4)):  # "halves", "quarters"
        assert qkv.scale_factor(True, d_k) == factor
        raw, scaled, *_ = reference(d_k, True)
        np.testing.assert_allclose(scaled, raw * factor, rtol=0, atol=1e-15)
    on, off = reference(small, True)[2], reference(small, False)[2]
    assert np.abs(on - off).max() > 0.05  # halving is visible in the weights


# ---- the exercises of chapter 6 -------------------------------------------------------------


@pytest.mark.claim("try-ex-gap")
def test_a_gap_gives_the_weight_ratio_exp_minus_gap_for_every_query():
    gap = stated("try-ex-gap")[0]
    scores = np.array([0.3, -1.0, 0.3 + gap, 2.0])  # any other keys, any leader
    w = qkv.softmax(scores)
    ratio = w[0] / w[2]
    np.testing.assert_allclose(ratio, np.exp(-gap), rtol=1e-12)
    _, scaled, weights, *_ = reference(64, False)  # experiment 5's table
    for i in range(len(WORDS)):
        first, second = np.argsort(-scaled[i])[:2]
        np.testing.assert_allclose(
            weights[i, second] / weights[i, first], np.exp(scaled[i, second] - scaled[i, first]), rtol=1e-9
        )
    check_prose("try-ex-gap", gap, ratio, ...)  # "experiment 5" is a label


def test_the_gap_solution_prints_what_the_test_computes(page_output):
    shown = page_output("things-to-try.md")
    gap = stated("try-ex-gap")[0]
    assert (
        shown.line("things_to_try.py:exercise_gap", f"a gap of {gap:g}:")
        == f"a gap of {gap:g}: runner-up / leader = exp(-{gap:g}) = {np.exp(-gap):.3f}"
    )
