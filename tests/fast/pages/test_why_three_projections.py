"""Guards for the claims of docs/why-three-projections.md, "Only two products matter".

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
    CUP,
    DRANK,
    E_4,
    E_8,
    FROM,
    MILK,
    assert_printed,
    line_of,
    named_numbers,
    pair_lines,
    random_projections,
    random_tied_case,
    scores_of,
    seeds,
    stated,
    unnamed_block,
    widths,
)
from prose import check_prose
from support import numbers

import qkv
from qkv import toy
from qkv.cost import SMOLLM2_135M

# ---- 4. Only two products matter: query-key and value-output -------------------------


@pytest.fixture(scope="module")
def shown_three(page_output):
    return page_output("why-three-projections.md")


def invertible(seed, n):
    """A random n x n matrix, checked to be well conditioned enough to invert."""
    m = np.random.default_rng(seed).normal(size=(n, n))
    assert np.linalg.cond(m) < 1e6
    return m


@pytest.mark.claim("three-products-scores")
@settings(max_examples=30, deadline=None)
@given(seeds, st.integers(1, 8), st.integers(1, 8))
def test_any_invertible_a_between_w_q_and_w_k_leaves_the_scores(seed, d_k, t):
    rng = np.random.default_rng(seed)
    x, p = rng.normal(size=(t, 6)), random_projections(seed, 6, d_k, 2)
    a = rng.normal(size=(d_k, d_k)) + 3 * np.eye(d_k)  # invertible, and not near singular
    moved = qkv.Projections(p.w_q @ a, p.w_k @ np.linalg.inv(a).T, p.w_v)
    s = scores_of(x, p)
    np.testing.assert_allclose(scores_of(x, moved), s, rtol=1e-9, atol=1e-9 * max(1, np.abs(s).max()))


@pytest.mark.claim("three-products-scores")
def test_the_page_moves_w_q_far_and_the_scores_not_at_all(shown_three, tie):
    p = tie["p"]
    a = np.random.default_rng(1).normal(size=(p.d_k, p.d_k))  # the snippet's A (seed 1)
    moved = qkv.Projections(p.w_q @ a, p.w_k @ np.linalg.inv(a).T, p.w_v)
    change = np.abs(moved.w_q - p.w_q).max()
    assert change > 1
    assert np.abs(moved.w_q @ moved.w_k.T - p.w_q @ p.w_k.T).max() < 1e-12
    assert np.abs(scores_of(tie["x"], moved) - tie["S"]).max() < 1e-12
    check_prose("three-products-scores", change)
    block = unnamed_block(shown_three, "largest change in W_Q:")  # runs setup, then products
    assert_printed(line_of(block, "largest change in W_Q:"), change, 2)
    assert numbers(line_of(block, "largest change in a score:"))[0] < 1e-12


@pytest.mark.claim("three-products-output")
def test_w_v_b_with_b_inverse_w_o_adds_the_same_to_the_stream(shown_three, tie):
    x, p = tie["x"], tie["p"]
    for seed in range(3):
        b, w_o = invertible(seed, p.d_v), np.random.default_rng(seed + 10).normal(size=(p.d_v, 16))
        added = qkv.self_attention(x, p).output @ w_o
        moved = qkv.self_attention(x, qkv.Projections(p.w_q, p.w_k, p.w_v @ b)).output
        np.testing.assert_allclose(moved @ np.linalg.inv(b) @ w_o, added, rtol=1e-9, atol=1e-10)
        assert np.abs(p.w_v @ b - p.w_v).max() > 0.5  # W_V itself moved
    check_prose("three-products-output", ...)  # the -1 of B^{-1} is notation
    line = line_of(
        unnamed_block(shown_three, "largest change in W_Q:"), "largest change in what the head adds:"
    )
    assert numbers(line)[0] < 1e-12


@pytest.mark.claim("three-hand-one-way")
def test_from_looks_for_cup_but_cup_does_not_look_for_from(shown_three, hand_built):
    q, k, _, _ = hand_built
    raw = q @ k.T
    s = raw / np.sqrt(toy.D_K)
    w = qkv.softmax(s)
    assert s[FROM, CUP] == pytest.approx(8 / np.sqrt(8), rel=1e-12) and s[CUP, FROM] == 0
    # from's row: 8/√8 on cup, 0 on the other five; cup's: 4/√8 on milk, 0 on the other five
    from_cup, cup_from = E_8 / (E_8 + 5), 1 / (E_4 + 5)
    assert w[FROM, CUP] == pytest.approx(from_cup, rel=1e-12)
    assert w[CUP, FROM] == pytest.approx(cup_from, rel=1e-12)
    check_prose("three-hand-one-way", w[FROM, CUP], w[CUP, FROM], raw[FROM, CUP], toy.D_K, s[CUP, FROM])
    text = shown_three["hand_built.py:one_way"]
    assert_printed(line_of(text, "from -> cup"), [8 / np.sqrt(8), from_cup], 2)
    assert_printed(line_of(text, "cup -> from"), [0, cup_from], 2)


@pytest.mark.claim("three-tied-scores-symmetric")
@settings(max_examples=50, deadline=None)
@given(seeds, widths, st.integers(1, 10))
def test_tying_w_q_to_w_k_makes_every_score_matrix_symmetric(seed, d_k, t):
    x, tied = random_tied_case(seed, d_k, t)
    s = scores_of(x, tied)
    assert np.abs(s - s.T).max() <= 1e-12 * max(1.0, np.abs(s).max())


@pytest.mark.claim("three-tied-scores-symmetric")
def test_the_page_tied_score_matrix_is_symmetric(shown_three, tie):
    assert np.abs(tie["S_tied"] - tie["S_tied"].T).max() < 1e-12
    assert np.abs(tie["S"] - tie["S"].T).max() > 1.0  # and the untied one is far from it
    line = shown_three.line("tie_query_key.py:symmetric", "largest |S - Sᵀ|:")
    assert 0 <= numbers(line)[0] < 1e-12


@pytest.mark.claim("three-tied-weights-not-symmetric")
def test_tied_scores_are_equal_but_the_weights_are_not(shown_three, tie):
    s, w = tie["S_tied"], tie["W_tied"]
    assert s[MILK, FROM] == pytest.approx(s[FROM, MILK], abs=1e-12)
    assert w[MILK, FROM] > 10 * w[FROM, MILK]
    milk_from, from_milk = pair_lines(shown_three["tie_query_key.py:symmetric"])
    np.testing.assert_allclose(
        [milk_from, from_milk],
        [[s[MILK, FROM], w[MILK, FROM]], [s[FROM, MILK], w[FROM, MILK]]],
        rtol=0,
        atol=5e-4,
    )
    assert milk_from[0] == from_milk[0]  # the same score both ways, as printed


@pytest.mark.claim("three-tied-row-total-ratio")
def test_tied_the_weight_ratio_is_the_ratio_of_row_totals(shown_three, tie):
    s, w = tie["S_tied"], tie["W_tied"]
    totals = np.exp(s).sum(axis=-1)  # Z_i, written out here
    assert totals[FROM] > 10 * totals[MILK]
    # equal scores both ways, so w[milk, from] / w[from, milk] = Z_from / Z_milk
    np.testing.assert_allclose(w[MILK, FROM] / w[FROM, MILK], totals[FROM] / totals[MILK], rtol=1e-9)
    line = shown_three.line("tie_query_key.py:symmetric", "row totals:")
    assert_printed(line, [totals[MILK], totals[FROM]], 1)


@pytest.mark.claim("three-tied-row-totals")
@settings(max_examples=50, deadline=None)
@given(seeds, widths, st.integers(1, 10))
def test_tied_weights_are_symmetric_once_each_row_is_multiplied_by_its_total(seed, d_k, t):
    x, tied = random_tied_case(seed, d_k, t)
    totals = np.exp(scores_of(x, tied)).sum(axis=-1, keepdims=True)  # Z_i
    unnormalised = qkv.self_attention(x, tied).weights * totals  # w_ij Z_i = exp(s_ij)
    np.testing.assert_allclose(unnormalised, unnormalised.T, rtol=1e-9)


@pytest.fixture(scope="module")
def tied_kv(hand_built):
    """The hand-built toy, separate and with W_V = W_K."""
    hand = toy.hand_built_projections()
    tied = qkv.Projections(hand.w_q, hand.w_k, hand.w_k)
    return hand_built[3], qkv.self_attention(toy.feature_embeddings(), tied)


@pytest.mark.claim("three-tie-kv-weights-unchanged")
def test_tying_w_v_to_w_k_leaves_the_weights_bit_for_bit(shown_three, tied_kv):
    separate, tied = tied_kv
    np.testing.assert_array_equal(tied.weights, separate.weights)
    check_prose("three-tie-kv-weights-unchanged", ...)  # "chapter 3" is a label
    assert shown_three.flag("tie_query_key.py:tie_kv", "weights identical:")


@pytest.mark.claim("three-tie-kv-output-changes")
def test_tying_w_v_to_w_k_hands_over_liquid_and_no_dairy(shown_three, hand_built, tied_kv):
    separate, tied = tied_kv
    k = hand_built[1]
    np.testing.assert_allclose(tied.output, separate.weights @ k, rtol=1e-12)  # a blend of keys
    liquid, dairy = toy.FEATURES.index("liquid"), toy.FEATURES.index("dairy")
    assert liquid == int(np.argmax(hand_built[0][DRANK]))  # what drank's query asks for
    assert not k[:, dairy].any() and not tied.output[:, dairy].any()
    assert separate.output[:, toy.VALUE_COLUMNS.index("dairy")].max() > 0.5  # it was handed over
    check_prose("three-tie-kv-output-changes", tied.output[DRANK, liquid])
    section = "tie_query_key.py:tie_kv"
    shown = named_numbers(shown_three.line(section, "drank receives, W_V = W_K:"))
    assert shown == {
        f: pytest.approx(x, abs=5e-3)
        for f, x in zip(toy.FEATURES, tied.output[DRANK], strict=True)
        if abs(x) >= 0.005
    }
    assert numbers(shown_three.line(section, "dairy received by any word"))[0] == 0


@pytest.mark.claim("three-ex-scale")
def test_balanced_factors_leave_the_scores_and_one_factor_scales_them(shown_three, tie):
    factor = stated("three-ex-scale")[0]  # the exercise's given
    x, p, s = tie["x"], tie["p"], tie["S"]
    balanced = qkv.Projections(factor * p.w_q, p.w_k / factor, p.w_v)
    only_q = qkv.Projections(factor * p.w_q, p.w_k, p.w_v)
    assert np.abs(scores_of(x, balanced) - s).max() < 1e-12
    ratio = scores_of(x, only_q) / s
    np.testing.assert_allclose(ratio, factor, rtol=1e-12)
    check_prose("three-ex-scale", factor, float(np.median(ratio)), ...)  # then "chapter 1"
    section = "tie_query_key.py:exercise_scale"
    assert numbers(shown_three.line(section, "W_Q x 3, W_K / 3:"))[-1] < 1e-12
    assert numbers(shown_three.line(section, "W_Q x 3 alone:"))[-1] == factor


@pytest.mark.claim("three-ex-rank")
def test_the_toy_product_has_rank_d_k_and_as_many_numbers_as_its_factors(shown_three, tie):
    p = tie["p"]
    product = p.w_q @ p.w_k.T
    rank = np.linalg.matrix_rank(product)
    assert rank == p.d_k < p.d_model
    assert 2 * p.d_k == p.d_model  # "because d_k is half of d_model here"
    assert p.w_q.size + p.w_k.size == product.size
    check_prose("three-ex-rank", rank, product.size)
    section = "tie_query_key.py:exercise_rank"
    assert numbers(shown_three.line(section, "W_Q W_Kᵀ:")) == [p.d_model, p.d_model, rank]
    assert numbers(shown_three.line(section, "numbers in W_Q and W_K:")) == [p.w_q.size + p.w_k.size]
    assert numbers(shown_three.line(section, "numbers in the product:")) == [product.size]


@pytest.mark.claim("three-ex-rank-smollm2")
def test_smollm2s_two_thin_factors_hold_fewer_numbers_than_their_product():
    # SmolLM2's sizes from qkv's record of it (checked against the model file in
    # tests/fast/test_smollm2.py), not from the sentence
    m = SMOLLM2_135M
    d_model, d_k = m.n_heads * m.d_head, m.d_head
    factors, product = 2 * d_model * d_k, d_model * d_model  # W_Q and W_K; W_Q W_Kᵀ
    assert factors < product
    check_prose("three-ex-rank-smollm2", d_model, d_k, factors, product)
