"""Guards for the claims of docs/why-three-projections-in-depth.md: tied projections,
symmetry, ranks and the published models' head widths.

Each test derives its fact itself, from qkv's public API applied to ``qkv.toy`` data, from
hand-written NumPy or from algebra, and then checks that what the page prints under its
executed blocks (``page_output``) agrees with it, to the printed rounding. No expected value
is copied from the printed output, and no test reads a name a snippet defines.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pages_support import (
    DRANK,
    FROM,
    MILK,
    WORDS,
    assert_printed,
    line_of,
    named_numbers,
    pair_lines,
    random_projections,
    random_tied_case,
    scores_of,
    seeds,
    unnamed_block,
    widths,
)
from prose import check_prose
from support import attention_product_flops, numbers

import qkv
from qkv import toy
from qkv.cost import SMOLLM2_135M


@pytest.fixture(scope="module")
def shown_three_deep(page_output):
    """Chapter 4's deep dive: the random toy's one-way scores, self-scores, what breaks the
    tied symmetry, and the widths."""
    return page_output("why-three-projections-in-depth.md")


@pytest.fixture(scope="module")
def separate_block(shown_three_deep):
    # the deep dive's first block runs the setup, then the asymmetric section
    return unnamed_block(shown_three_deep, "largest |S - Sᵀ|:")


@pytest.mark.claim("three-separate-asymmetric")
def test_milk_and_from_score_each_other_with_opposite_signs(separate_block, tie):
    s = tie["S"]
    assert s[MILK, FROM] > 0 > s[FROM, MILK]
    milk_from, from_milk = pair_lines(separate_block)
    assert milk_from[0] == pytest.approx(s[MILK, FROM], abs=5e-4) and milk_from[0] > 0
    assert from_milk[0] == pytest.approx(s[FROM, MILK], abs=5e-4) and from_milk[0] < 0
    assert_printed(line_of(separate_block, "largest |S - Sᵀ|:"), np.abs(s - s.T).max(), 3)


@pytest.mark.claim("three-separate-weights-asymmetric")
def test_milk_gives_from_more_than_twice_the_weight_from_gives_milk(separate_block, tie):
    w = tie["W"]
    assert w[MILK, FROM] > 2 * w[FROM, MILK]
    milk_from, from_milk = pair_lines(separate_block)
    assert (milk_from[1], from_milk[1]) == (
        pytest.approx(w[MILK, FROM], abs=5e-4),
        pytest.approx(w[FROM, MILK], abs=5e-4),
    )
    assert milk_from[1] > 2 * from_milk[1]


@pytest.mark.claim("three-tied-self-score")
@settings(max_examples=50, deadline=None)
@given(seeds, widths, st.integers(1, 10))
def test_tied_a_word_never_scores_itself_below_zero(seed, d_k, t):
    x, tied = random_tied_case(seed, d_k, t)
    assert (np.diag(scores_of(x, tied)) >= 0).all()


@pytest.mark.claim("three-tied-self-score")
def test_separately_every_word_here_scores_itself_below_zero(shown_three_deep, tie):
    separate, tied = np.diag(tie["S"]), np.diag(tie["S_tied"])
    assert (separate < 0).all() and (tied >= 0).all()
    text = shown_three_deep["tie_query_key.py:self_score"]
    # each line: the diagonal, then "top: N of 6"
    assert_printed(line_of(text, "separate").split("top:")[0], separate, 2)
    assert_printed(line_of(text, "tied").split("top:")[0], tied, 2)
    assert all(x < 0 for x in numbers(line_of(text, "separate").split("top:")[0]))


@pytest.mark.claim("three-tied-self-top")
def test_tied_every_word_here_scores_itself_highest_and_separately_none_does(shown_three_deep, tie):
    on_itself = np.arange(len(WORDS))
    assert (tie["S_tied"].argmax(axis=-1) == on_itself).all()
    assert (tie["S"].argmax(axis=-1) != on_itself).all()
    text = shown_three_deep["tie_query_key.py:self_score"]
    assert line_of(text, "separate").endswith(f"top: 0 of {len(WORDS)}")
    assert line_of(text, "tied").endswith(f"top: {len(WORDS)} of {len(WORDS)}")


@pytest.mark.claim("three-tied-rope-symmetric")
@settings(max_examples=30, deadline=None)
@given(seeds, st.integers(1, 6).map(lambda n: 2 * n), st.integers(1, 10))
def test_rope_on_tied_queries_and_keys_keeps_the_scores_symmetric(seed, d_k, t):
    x, tied = random_tied_case(seed, d_k, t)
    q, k, _ = qkv.project(x, tied)
    turned_q, turned_k = qkv.rope(q), qkv.rope(k)
    np.testing.assert_array_equal(turned_q, turned_k)  # a query is still its key
    s = turned_q @ turned_k.T
    assert np.abs(s - s.T).max() <= 1e-12 * max(1.0, np.abs(s).max())
    assert not np.allclose(turned_k, k) or t == 1  # and RoPE did turn them


@pytest.mark.claim("three-tied-rope-symmetric")
def test_the_page_shows_tied_rope_scores_symmetric(shown_three_deep):
    check_prose("three-tied-rope-symmetric", ...)  # "chapter 9" is a label
    line = shown_three_deep.line("tie_query_key.py:what_breaks", "tied, turned by RoPE:")
    assert numbers(line)[0] < 1e-12


@pytest.mark.claim("three-tied-bias-asymmetric")
def test_a_query_bias_breaks_the_tied_symmetry(shown_three_deep, tie):
    k = tie["x"] @ tie["p"].w_k
    b = np.random.default_rng(2).normal(size=k.shape[1])  # the snippet's bias (seed 2)
    s = (k + b) @ k.T  # s_ij = k_i·k_j + b·k_j: the second term depends on j alone
    asymmetry = np.abs(s - s.T).max()
    np.testing.assert_allclose(s - s.T, (k @ b)[None, :] - (k @ b)[:, None], atol=1e-12)
    check_prose("three-tied-bias-asymmetric", asymmetry)
    assert_printed(
        shown_three_deep.line("tie_query_key.py:what_breaks", "tied, with a query bias:"), asymmetry, 2
    )


@pytest.mark.claim("three-tied-causal")
def test_a_causal_mask_gives_tied_weights_in_one_direction_only(tie):
    x, p = tie["x"], tie["p"]
    tied = qkv.Projections(p.w_k, p.w_k, p.w_v)
    w = qkv.self_attention(x, tied, mask=qkv.causal_mask(len(WORDS))).weights
    later, earlier = np.tril_indices(len(WORDS), k=-1), np.triu_indices(len(WORDS), k=1)
    assert (w[later] > 0).all() and (w[earlier] == 0).all()


@pytest.mark.claim("three-dk-dv-shapes")
@settings(deadline=None)  # timing is not what these tests check
@given(st.integers(1, 64), st.integers(1, 64))
def test_weights_stay_t_by_t_whatever_d_k_and_d_v(d_k, d_v):
    t = len(WORDS)
    weights, output = qkv.self_attention(toy.embeddings(), toy.projections(d_k, d_v))
    assert weights.shape == (t, t)
    assert output.shape == (t, d_v)


@pytest.fixture(scope="module")
def width_lines(shown_three_deep):
    lines = [ln for ln in shown_three_deep["tie_query_key.py:dk_dv"].splitlines() if ln.startswith("d_k=")]
    assert len(lines) >= 3
    return [numbers(ln) for ln in lines]  # d_k, d_v, weights shape, output shape, rank


@pytest.mark.claim("three-dk-dv-shapes")
def test_the_page_shows_t_by_t_weights_for_every_width_it_tries(width_lines):
    t = len(WORDS)
    check_prose("three-dk-dv-shapes", t, t, t)
    for d_k, d_v, *shapes, _ in width_lines:
        weights, output = qkv.self_attention(toy.embeddings(), toy.projections(int(d_k), int(d_v)))
        assert shapes == [*weights.shape, *output.shape] == [t, t, t, d_v]


@pytest.mark.claim("three-dk-rank")
def test_the_rank_of_w_q_w_k_is_d_k_up_to_d_model(width_lines):
    for d_k in range(1, 2 * toy.D_MODEL + 1):
        p = toy.projections(d_k, 2)
        assert np.linalg.matrix_rank(p.w_q @ p.w_k.T) == min(d_k, toy.D_MODEL)
    check_prose("three-dk-rank", toy.D_MODEL, toy.D_MODEL, toy.D_MODEL)
    assert any(d_k > toy.D_MODEL for d_k, *_ in width_lines)  # the page shows the ceiling
    for d_k, *_, rank in width_lines:
        assert rank == min(d_k, toy.D_MODEL)


@pytest.mark.claim("three-dk-cost")
@settings(deadline=None)  # timing is not what these tests check
@given(st.integers(1, 50), st.integers(1, 50), st.integers(1, 128), st.integers(1, 128))
def test_each_extra_key_dimension_costs_one_multiply_add_per_score(t_q, t_k, d_k, d_v):
    extra = qkv.attention_flops(t_q, t_k, d_k + 1, d_v) - qkv.attention_flops(t_q, t_k, d_k, d_v)
    assert extra == 2 * t_q * t_k  # one multiply-add (2 flops) for each of the t_q x t_k scores
    counted = [attention_product_flops(t_q, t_k, d, d_v) for d in (d_k, d_k + 1)]
    assert counted[1] - counted[0] == extra  # on the arrays attention computes


@pytest.mark.claim("three-head-sizes")
def test_every_recorded_published_model_uses_heads_of_64_or_128():
    # qkv.MODELS is checked field by field against the published configs in
    # test_kv_cache_in_depth.py; here only the head widths matter.
    assert qkv.MODELS  # their number and fields: test_kv_cache_in_depth.py
    sizes = sorted({m.d_head for m in qkv.MODELS})
    check_prose("three-head-sizes", *sizes)


@pytest.mark.claim("three-gemma-head-widths")
def test_gemma_7b_and_gemma_2_9b_have_heads_of_256_and_gemma_2_27b_of_128(page_output):
    # Gemma 7B: the FAQ's long answers print its W_Q as d_model × (16 heads × d_head), from
    # its report
    gemma7 = next(
        line
        for line in page_output("faq-long-answers.md")["faq.py:weight_shapes"].splitlines()
        if line.startswith("Gemma 7B")
    )
    gemma7_head = int(re.search(r"W_Q \d+x(\d+)", gemma7).group(1)) // 16  # 16 query heads
    windowed = {m.name: m.d_head for m in qkv.WINDOWED_MODELS}  # checked against their configs
    assert gemma7_head == windowed["Gemma 2 9B"] > max(m.d_head for m in qkv.MODELS)  # "wider"
    # ...: the "2" of "Gemma 2", a name
    check_prose("three-gemma-head-widths", ..., gemma7_head, ..., windowed["Gemma 2 27B"])


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
def test_the_page_moves_w_q_far_and_the_scores_not_at_all(shown_three_deep, tie):
    p = tie["p"]
    a = np.random.default_rng(1).normal(size=(p.d_k, p.d_k))  # the snippet's A (seed 1)
    moved = qkv.Projections(p.w_q @ a, p.w_k @ np.linalg.inv(a).T, p.w_v)
    change = np.abs(moved.w_q - p.w_q).max()
    assert change > 1
    assert np.abs(moved.w_q @ moved.w_k.T - p.w_q @ p.w_k.T).max() < 1e-12
    assert np.abs(scores_of(tie["x"], moved) - tie["S"]).max() < 1e-12
    check_prose("three-products-scores", change)
    block = shown_three_deep["tie_query_key.py:products"]
    assert_printed(line_of(block, "largest change in W_Q:"), change, 2)
    assert numbers(line_of(block, "largest change in a score:"))[0] < 1e-12


# ---- moved from the chapter: the value side, tied weights, W_K = W_V, the exercises --------


def invertible(seed, n):
    """A random n x n matrix, checked to be well conditioned enough to invert."""
    m = np.random.default_rng(seed).normal(size=(n, n))
    assert np.linalg.cond(m) < 1e6
    return m


@pytest.mark.claim("three-products-output")
def test_w_v_b_with_b_inverse_w_o_adds_the_same_to_the_stream(shown_three_deep, tie):
    x, p = tie["x"], tie["p"]
    for seed in range(3):
        b, w_o = invertible(seed, p.d_v), np.random.default_rng(seed + 10).normal(size=(p.d_v, 16))
        added = qkv.self_attention(x, p).output @ w_o
        moved = qkv.self_attention(x, qkv.Projections(p.w_q, p.w_k, p.w_v @ b)).output
        np.testing.assert_allclose(moved @ np.linalg.inv(b) @ w_o, added, rtol=1e-9, atol=1e-10)
        assert np.abs(p.w_v @ b - p.w_v).max() > 0.5  # W_V itself moved
    check_prose("three-products-output", ...)  # the -1 of B^{-1} is notation
    line = shown_three_deep.line("tie_query_key.py:products_value", "largest change in what the head adds:")
    assert numbers(line)[0] < 1e-12


@pytest.mark.claim("three-tied-weights-not-symmetric")
def test_tied_scores_are_equal_but_the_weights_are_not(shown_three_deep, tie):
    s, w = tie["S_tied"], tie["W_tied"]
    assert s[MILK, FROM] == pytest.approx(s[FROM, MILK], abs=1e-12)
    assert w[MILK, FROM] > 10 * w[FROM, MILK]
    check_prose("three-tied-weights-not-symmetric", w[MILK, FROM] / w[FROM, MILK])
    section = "tie_query_key.py:row_totals"
    assert_printed(shown_three_deep.line(section, "score of milk and from, either way:"), s[MILK, FROM], 3)
    assert_printed(shown_three_deep.line(section, "weights: milk -> from"), [w[MILK, FROM], w[FROM, MILK]], 3)


@pytest.mark.claim("three-tied-row-total-ratio")
def test_tied_the_weight_ratio_is_the_ratio_of_row_totals(shown_three_deep, tie):
    s, w = tie["S_tied"], tie["W_tied"]
    totals = np.exp(s).sum(axis=-1)  # Z_i, written out here
    assert totals[FROM] > 10 * totals[MILK]
    # equal scores both ways, so w[milk, from] / w[from, milk] = Z_from / Z_milk
    np.testing.assert_allclose(w[MILK, FROM] / w[FROM, MILK], totals[FROM] / totals[MILK], rtol=1e-9)
    line = shown_three_deep.line("tie_query_key.py:row_totals", "row totals:")
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
def test_tying_w_v_to_w_k_leaves_the_weights_bit_for_bit(shown_three_deep, tied_kv):
    separate, tied = tied_kv
    np.testing.assert_array_equal(tied.weights, separate.weights)
    check_prose("three-tie-kv-weights-unchanged", ...)  # "chapter 3" is a label
    assert shown_three_deep.flag("tie_query_key.py:tie_kv", "weights identical:")


@pytest.mark.claim("three-tie-kv-output-changes")
def test_tying_w_v_to_w_k_hands_over_liquid_and_no_dairy(shown_three_deep, hand_built, tied_kv):
    separate, tied = tied_kv
    k = hand_built[1]
    np.testing.assert_allclose(tied.output, separate.weights @ k, rtol=1e-12)  # a blend of keys
    liquid, dairy = toy.FEATURES.index("liquid"), toy.FEATURES.index("dairy")
    assert liquid == int(np.argmax(hand_built[0][DRANK]))  # what drank's query asks for
    assert not k[:, dairy].any() and not tied.output[:, dairy].any()
    assert separate.output[:, toy.VALUE_COLUMNS.index("dairy")].max() > 0.5  # it was handed over
    check_prose("three-tie-kv-output-changes", tied.output[DRANK, liquid])
    section = "tie_query_key.py:tie_kv"
    shown = named_numbers(shown_three_deep.line(section, "drank receives, W_V = W_K:"))
    assert shown == {
        f: pytest.approx(x, abs=5e-3)
        for f, x in zip(toy.FEATURES, tied.output[DRANK], strict=True)
        if abs(x) >= 0.005
    }
    assert numbers(shown_three_deep.line(section, "dairy received by any word"))[0] == 0


@pytest.mark.claim("three-ex-rank")
def test_the_toy_product_has_rank_d_k_and_as_many_numbers_as_its_factors(shown_three_deep, tie):
    p = tie["p"]
    product = p.w_q @ p.w_k.T
    rank = np.linalg.matrix_rank(product)
    assert rank == p.d_k < p.d_model
    assert 2 * p.d_k == p.d_model  # "because d_k is half of d_model here"
    assert p.w_q.size + p.w_k.size == product.size
    check_prose("three-ex-rank", rank, product.size)
    section = "tie_query_key.py:exercise_rank"
    assert numbers(shown_three_deep.line(section, "W_Q W_Kᵀ:")) == [p.d_model, p.d_model, rank]
    assert numbers(shown_three_deep.line(section, "numbers in W_Q and W_K:")) == [p.w_q.size + p.w_k.size]
    assert numbers(shown_three_deep.line(section, "numbers in the product:")) == [product.size]


@pytest.mark.claim("three-ex-rank-smollm2")
def test_smollm2s_two_thin_factors_hold_fewer_numbers_than_their_product():
    # SmolLM2's sizes from qkv's record of it (checked against the model file in
    # tests/fast/test_smollm2.py), not from the sentence
    m = SMOLLM2_135M
    d_model, d_k = m.n_heads * m.d_head, m.d_head
    factors, product = 2 * d_model * d_k, d_model * d_model  # W_Q and W_K; W_Q W_Kᵀ
    assert factors < product
    check_prose("three-ex-rank-smollm2", d_model, d_k, factors, product)


# ---- a tied head's ratios and its self-scores, from the random toy written out --------------
# (the algebra behind these sentences is tested in tests/fast/test_projections.py)


@pytest.fixture(scope="module")
def tied_toy():
    """The random toy of the chapter (d_k = 8) with W_Q = W_K: scaled scores and weights."""
    x, p = toy.embeddings(), toy.projections(d_k=toy.D_K, d_v=8)
    q, k, _ = qkv.project(x, qkv.Projections(p.w_k, p.w_k, p.w_v))
    s = q @ k.T / np.sqrt(p.d_k)
    e = np.exp(s)  # written out: the weights are e^s over each row's total
    return x, p, s, e / e.sum(axis=-1, keepdims=True), e.sum(axis=-1)


@pytest.mark.claim("three-tied-weights-not-symmetric")
def test_tied_milk_gives_from_the_ratio_the_page_prints(page_output, tied_toy):
    _, _, s, w, _ = tied_toy
    assert s[MILK, FROM] == pytest.approx(s[FROM, MILK], abs=1e-12)
    ratio = w[MILK, FROM] / w[FROM, MILK]
    check_prose("three-tied-weights-not-symmetric", ratio)
    shown = page_output("why-three-projections-in-depth.md")
    printed = shown.values("tie_query_key.py:row_totals", "weight milk -> from over from -> milk:")
    assert printed == [pytest.approx(ratio, abs=0.05)]


@pytest.mark.claim("three-tied-row-total-ratio")
def test_tied_the_row_totals_differ_by_that_same_ratio(page_output, tied_toy):
    _, _, _, w, totals = tied_toy
    ratio = totals[FROM] / totals[MILK]
    np.testing.assert_allclose(ratio, w[MILK, FROM] / w[FROM, MILK], rtol=1e-9)
    check_prose("three-tied-row-total-ratio", ratio)
    shown = page_output("why-three-projections-in-depth.md")
    printed = shown.values("tie_query_key.py:row_totals", "row total of from over that of milk:")
    assert printed == [pytest.approx(ratio, abs=0.05)]


@pytest.mark.claim("three-tied-top-not-self")
def test_tied_milk_scores_its_doubled_copy_above_itself(page_output, tied_toy):
    x, p, _, _, _ = tied_toy
    k = x @ p.w_k  # tied: milk's query is its key
    own, doubled = k[MILK] @ k[MILK], k[MILK] @ (2 * k[MILK])
    assert doubled == pytest.approx(2 * own, rel=1e-12) and own > 0
    check_prose("three-tied-top-not-self")  # "twice" is written out
    shown = page_output("why-three-projections-in-depth.md")
    printed = shown.values("tie_query_key.py:longer_key", "milk with itself:")
    np.testing.assert_allclose(printed, [own, doubled], atol=0.005 + 1e-9)


@pytest.mark.claim("three-tied-pairwise-self")
def test_tied_no_pair_of_the_seven_words_each_prefers_the_other(page_output, tied_toy):
    x, p, _, _, _ = tied_toy
    k = np.vstack([x, 2 * x[MILK]]) @ p.w_k
    s, own = k @ k.T, np.einsum("ij,ij->i", k, k)
    prefers = s > own[:, None]
    assert prefers.any() and not (prefers & prefers.T).any()
    shown = page_output("why-three-projections-in-depth.md")
    assert shown.values(
        "tie_query_key.py:longer_key", "pairs in which each scores the other above itself:"
    ) == [0]
    gap = own[:, None] + own[None, :] - 2 * s
    printed = shown.values("tie_query_key.py:longer_key", "smallest s_ii + s_jj - 2 s_ij over pairs:")
    assert printed == [pytest.approx(gap[~np.eye(len(k), dtype=bool)].min(), abs=0.005 + 1e-9)]
    assert printed[0] >= 0
