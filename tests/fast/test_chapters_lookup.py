"""Guards for the claims of the home page and chapters 1-4 (soft lookup, projections,
keys vs values, why three projections).

Each test checks one sentence of a page against qkv's computation. Expected values are
derived independently (by hand-written NumPy, by algebra, or from the shapes the prose
names), never copied from the snippets' printed output. Where a test reads a snippet's
globals it checks the very objects the page shows.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from chapter_snippets import snippet_globals
from hypothesis import given, settings
from hypothesis import strategies as st

import qkv
from qkv import dot_product, toy

seeds = st.integers(0, 2**32 - 1)
widths = st.integers(1, 12)


def reference_attention(q, k, v):
    """softmax(q kᵀ / √d_k) v written out with np.exp, independent of qkv."""
    scores = q @ k.T / np.sqrt(q.shape[-1])
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights, weights @ v


def random_projections(seed, d_model, d_k, d_v):
    return qkv.Projections.random(np.random.default_rng(seed), d_model, d_k, d_v)


def random_tied_case(seed, d_k, t):
    """``t`` random inputs of width 6 and projections with W_Q tied to W_K."""
    p = random_projections(seed, 6, d_k, 3)
    x = np.random.default_rng(seed).normal(size=(t, 6))
    return x, qkv.Projections(p.w_k, p.w_k, p.w_v)


# ---- Home page -----------------------------------------------------------------------


@pytest.mark.claim("rows-sum-to-one")
def test_home_example_rows_sum_to_one():
    weights = snippet_globals("first_attention.py")["weights"]
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-12)


@pytest.mark.claim("home-shapes")
def test_home_example_gives_one_row_per_word_and_d_v_columns():
    g = snippet_globals("first_attention.py")
    t = len(toy.SENTENCE)
    assert g["weights"].shape == (t, t)
    assert g["v"].shape[-1] == 4 and g["q"].shape[-1] == g["k"].shape[-1] == 8
    assert g["output"].shape == (t, g["v"].shape[-1])


@pytest.mark.claim("home-is-the-formula")
def test_home_example_is_softmax_of_scaled_scores_times_values():
    g = snippet_globals("first_attention.py")
    weights, output = reference_attention(g["q"], g["k"], g["v"])
    np.testing.assert_allclose(g["weights"], weights, rtol=1e-12)
    np.testing.assert_allclose(g["output"], output, rtol=1e-12, atol=1e-14)


# ---- 1. A soft dictionary lookup -------------------------------------------------------


@pytest.mark.claim("lookup-dict-exact")
def test_a_dict_answers_the_exact_key_and_nothing_near_it():
    palette = snippet_globals("soft_lookup.py")["palette"]
    assert palette["orange"] == (1.0, 0.5, 0.0)
    with pytest.raises(KeyError):
        palette["warm"]


@pytest.mark.claim("lookup-scores-are-warmth")
def test_scores_of_the_warm_query_are_the_keys_warmth():
    g = snippet_globals("soft_lookup.py")
    scores = g["keys"] @ g["query"][0]
    np.testing.assert_array_equal(scores, g["keys"][:, 0])
    np.testing.assert_allclose(scores, [1.0, 0.8, -1.0, 0.0])  # the warmth column, as listed


@pytest.mark.claim("lookup-every-key-weighted")
def test_every_entry_gets_a_positive_weight_even_the_worst_match():
    g = snippet_globals("soft_lookup.py")
    weights, names = g["weights"][0], g["names"]
    scores = g["keys"] @ g["query"][0]
    assert names[int(np.argmin(scores))] == "blue"
    assert (weights > 0).all()
    assert weights.sum() == pytest.approx(1.0, abs=1e-12)


@pytest.mark.claim("lookup-weights-follow-scores")
def test_weights_rank_entries_as_the_scores_do():
    g = snippet_globals("soft_lookup.py")
    scores = g["keys"] @ g["query"][0]
    np.testing.assert_array_equal(np.argsort(g["weights"][0]), np.argsort(scores))


@pytest.mark.claim("lookup-answer-is-blend")
def test_the_answer_is_the_weighted_average_and_no_stored_colour():
    g = snippet_globals("soft_lookup.py")
    weights, answer = reference_attention(g["query"], g["keys"], g["values"])
    np.testing.assert_allclose(g["answer"], answer, rtol=1e-12)
    np.testing.assert_allclose(g["answer"][0], weights[0] @ g["values"], rtol=1e-12)
    distance_to_nearest_entry = np.abs(g["values"] - g["answer"][0]).max(axis=-1).min()
    assert distance_to_nearest_entry > 0.1
    red, green, blue = g["answer"][0]
    assert red > max(green, blue) and min(green, blue) > 0.2  # reddish, but muted


@pytest.mark.claim("lookup-answer-width")
@settings(deadline=None)  # timing is not what these tests check
@given(seeds, widths, widths, st.integers(1, 8))
def test_the_answer_has_the_values_width_not_the_keys(seed, d_k, d_v, n):
    rng = np.random.default_rng(seed)
    query, keys, values = rng.normal(size=(1, d_k)), rng.normal(size=(n, d_k)), rng.normal(size=(n, d_v))
    assert qkv.attention(query, keys, values).output.shape == (1, d_v)


@pytest.mark.claim("lookup-sharpen-to-hard")
def test_a_longer_query_concentrates_the_weight_on_the_best_key():
    g = snippet_globals("soft_lookup.py")
    keys, values, query = g["keys"], g["values"], g["query"]
    best = int(np.argmax(keys @ query[0]))
    on_best = [qkv.attention(query * f, keys, values).weights[0, best] for f in (1, 4, 16, 64)]
    assert np.all(np.diff(on_best) > 0)
    assert on_best[-1] > 0.999
    answer = qkv.attention(query * 64, keys, values).output[0]
    np.testing.assert_allclose(answer, values[best], atol=5e-4)  # equal to three decimals


@pytest.mark.claim("lookup-sharpen-never-exact")
def test_at_64_times_the_worst_key_still_has_a_tiny_positive_weight():
    g = snippet_globals("soft_lookup.py")
    weights = qkv.attention(g["query"] * 64, g["keys"], g["values"]).weights[0]
    blue = g["names"].index("blue")
    assert 0 < weights[blue] < 1e-30
    assert (weights > 0).all()


@pytest.mark.claim("lookup-nudge")
def test_a_small_step_flips_the_hard_answer_but_barely_moves_the_soft_one():
    g = snippet_globals("soft_lookup.py")
    palette, hard, keys = g["palette"], g["hard_lookup"], g["keys"]
    # red and orange match (1, t) equally where 1 + 0.2 t = 0.8 + 0.8 t: the two queries
    # sit either side of that line, a hair apart
    red_key, orange_key = keys[g["names"].index("red")], keys[g["names"].index("orange")]
    t_equal = (red_key[0] - orange_key[0]) / (orange_key[1] - red_key[1])
    assert g["before"][0, 1] < t_equal < g["after"][0, 1]
    assert g["after"][0, 1] - g["before"][0, 1] <= 0.1
    np.testing.assert_array_equal(hard(g["before"]), palette["red"])
    np.testing.assert_array_equal(hard(g["after"]), palette["orange"])
    assert np.abs(hard(g["after"]) - hard(g["before"])).max() == 0.5
    assert np.abs(g["soft_after"] - g["soft_before"]).max() < 0.01


# ---- 2. Where Q, K and V come from -----------------------------------------------------


@pytest.mark.claim("proj-shapes")
def test_projection_shapes_follow_d_model_d_k_and_d_v():
    g = snippet_globals("where_qkv_come_from.py")
    t, d_model = len(toy.SENTENCE), toy.D_MODEL
    assert g["x"].shape == (t, d_model)
    assert g["p"].w_q.shape == g["p"].w_k.shape == (d_model, 8)
    assert g["p"].w_v.shape == (d_model, 4)
    assert g["Q"].shape == g["K"].shape == (t, 8)
    assert g["V"].shape == (t, 4)


@pytest.mark.claim("proj-three-vectors")
def test_one_embedding_gives_three_different_vectors():
    g = snippet_globals("where_qkv_come_from.py")
    x, p, milk = g["x"], g["p"], g["milk"]
    np.testing.assert_allclose(g["Q"][milk], x[milk] @ p.w_q, rtol=1e-12)
    np.testing.assert_allclose(g["K"][milk], x[milk] @ p.w_k, rtol=1e-12)
    np.testing.assert_allclose(g["V"][milk], x[milk] @ p.w_v, rtol=1e-12)
    assert not np.allclose(g["Q"][milk], g["K"][milk])
    assert g["V"][milk].shape != g["Q"][milk].shape


@pytest.mark.claim("proj-param-count")
def test_the_three_matrices_hold_d_model_times_2_d_k_plus_d_v_numbers():
    g = snippet_globals("where_qkv_come_from.py")
    assert g["learned"] == 16 * (8 + 8 + 4) == 320
    for d_model, d_k, d_v in [(16, 8, 4), (512, 64, 64), (7, 3, 5)]:
        p = random_projections(0, d_model, d_k, d_v)
        assert p.w_q.size + p.w_k.size + p.w_v.size == d_model * (2 * d_k + d_v)


@pytest.mark.claim("proj-attention-no-weights")
def test_attention_takes_only_its_inputs_and_holds_no_arrays():
    assert list(inspect.signature(qkv.attention).parameters) == ["q", "k", "v", "mask", "scale"]
    held = [name for name, value in vars(dot_product).items() if isinstance(value, np.ndarray)]
    assert held == []
    g = snippet_globals("where_qkv_come_from.py")
    weights, output = reference_attention(g["Q"], g["K"], g["V"])  # the formula, and only it
    result = qkv.attention(g["Q"], g["K"], g["V"])
    np.testing.assert_allclose(result.weights, weights, rtol=1e-12)
    np.testing.assert_allclose(result.output, output, rtol=1e-12)


@pytest.mark.claim("proj-dk-must-match")
def test_keys_of_another_width_are_refused_naming_both_shapes():
    g = snippet_globals("where_qkv_come_from.py")
    with pytest.raises(ValueError, match=r"share d_k.*\(6, 8\).*\(6, 5\)"):
        qkv.attention(g["Q"], g["K"][:, :5], g["V"])


@pytest.mark.claim("proj-dv-free")
@settings(deadline=None)  # timing is not what these tests check
@given(seeds, widths, widths)
def test_value_width_is_free_and_sets_the_output_width(seed, d_k, d_v):
    x = np.random.default_rng(seed).normal(size=(5, 6))
    weights, output = qkv.self_attention(x, random_projections(seed, 6, d_k, d_v))
    assert weights.shape == (5, 5)
    assert output.shape == (5, d_v)


@pytest.mark.claim("proj-key-bias-cancels")
@settings(max_examples=50, deadline=None)
@given(seeds, widths, st.integers(1, 8))
def test_a_bias_added_to_every_key_changes_no_weight(seed, d_k, t):
    rng = np.random.default_rng(seed)
    q, k, v = rng.normal(size=(t, d_k)), rng.normal(size=(t, d_k)), rng.normal(size=(t, 2))
    b = rng.normal(size=d_k)
    plain, shifted = qkv.attention(q, k, v).weights, qkv.attention(q, k + b, v).weights
    assert np.abs(shifted - plain).max() < 1e-12


@pytest.mark.claim("proj-key-bias-cancels")
def test_the_page_shows_the_key_bias_changing_nothing():
    g = snippet_globals("where_qkv_come_from.py")
    assert np.abs(g["key_bias"] - g["plain"]).max() < 1e-12


@pytest.mark.claim("proj-query-bias-matters")
def test_a_bias_on_the_queries_changes_the_weights():
    g = snippet_globals("where_qkv_come_from.py")
    assert np.abs(g["query_bias"] - g["plain"]).max() > 0.1


# ---- 3. Why keys and values are separate -----------------------------------------------


@pytest.mark.claim("kv-sep-value-keeps-weights")
@settings(max_examples=50, deadline=None)
@given(seeds, widths, widths, st.integers(1, 8))
def test_values_never_touch_the_weights(seed, d_k, d_v, t):
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(t, d_k)), rng.normal(size=(t, d_k))
    one, other = rng.normal(size=(t, d_v)), rng.normal(size=(t, d_v))
    np.testing.assert_array_equal(qkv.attention(q, k, one).weights, qkv.attention(q, k, other).weights)


@pytest.mark.claim("kv-sep-value-keeps-weights")
def test_flipping_milks_value_leaves_the_weights_bit_for_bit():
    g = snippet_globals("keys_vs_values.py")
    np.testing.assert_array_equal(g["base"].weights, qkv.attention(g["Q"], g["K"], g["V_new"]).weights)


@pytest.mark.claim("kv-sep-value-changes-output")
def test_a_new_value_for_milk_moves_every_row_by_its_weight_on_milk():
    g = snippet_globals("keys_vs_values.py")
    milk, drank, V, base = g["milk"], g["drank"], g["V"], g["base"]
    changed = qkv.attention(g["Q"], g["K"], g["V_new"]).output
    # Only row `milk` of V changed; row i of the output moves by w[i, milk] times that change.
    expected = base.output + np.outer(base.weights[:, milk], g["V_new"][milk] - V[milk])
    np.testing.assert_allclose(changed, expected, rtol=1e-10, atol=1e-12)
    assert (np.abs(changed - base.output).max(axis=-1) > 0).all()  # every row reads milk a bit
    container, dairy = toy.VALUE_COLUMNS.index("container"), toy.VALUE_COLUMNS.index("dairy")
    assert changed[drank, dairy] == 0
    assert changed[drank, container] - base.output[drank, container] == pytest.approx(
        base.weights[drank, milk], rel=1e-12)
    assert round(base.weights[drank, milk], 2) == 0.68


@pytest.mark.claim("kv-sep-key-moves-weights")
def test_wiping_milks_key_drops_drank_weight_to_that_of_an_unrelated_word():
    g = snippet_globals("keys_vs_values.py")
    drank, milk = g["drank"], g["milk"]
    assert not g["K_new"][milk].any()
    after = qkv.attention(g["Q"], g["K_new"], g["V"]).weights[drank]
    # drank's scores are now 4/√8 for she and 0 for the five others: softmax written out
    e_she = np.exp(4 / np.sqrt(8))
    assert after[milk] == pytest.approx(1 / (e_she + 5), rel=1e-12)
    assert after[milk] == pytest.approx(after[toy.SENTENCE.index("from")], rel=1e-12)
    assert round(after[milk], 2) == 0.11
    np.testing.assert_array_equal(g["V"][milk], qkv.project(toy.feature_embeddings(),
                                                            toy.hand_built_projections())[2][milk])


@pytest.mark.claim("kv-sep-key-changes-asking-rows")
def test_a_wiped_key_changes_only_the_rows_whose_query_asked_for_it():
    g = snippet_globals("keys_vs_values.py")
    after = qkv.attention(g["Q"], g["K_new"], g["V"]).weights
    changed = {w for w, row_a, row_b in zip(toy.SENTENCE, after, g["base"].weights, strict=True)
               if not np.allclose(row_a, row_b)}
    liquid = toy.FEATURES.index("liquid")
    askers = {w for w, q in zip(toy.SENTENCE, g["Q"], strict=True) if q[liquid] != 0}
    assert changed == askers == {"drank", "cup"}


# ---- 4. Why three projections ----------------------------------------------------------


@pytest.fixture(scope="module")
def tie():
    return snippet_globals("tie_query_key.py")


def scores_of(x, p):
    q, k, _ = qkv.project(x, p)
    return q @ k.T / np.sqrt(p.d_k)


@pytest.mark.claim("three-separate-asymmetric")
def test_milk_and_from_score_each_other_with_opposite_signs(tie):
    s = scores_of(tie["x"], tie["p"])
    milk, frm = tie["milk"], tie["frm"]
    assert s[milk, frm] > 0 > s[frm, milk]
    np.testing.assert_allclose(tie["S"], s, rtol=1e-12)


@pytest.mark.claim("three-separate-weights-asymmetric")
def test_milk_gives_from_more_than_twice_the_weight_from_gives_milk(tie):
    w = qkv.self_attention(tie["x"], tie["p"]).weights
    assert w[tie["milk"], tie["frm"]] > 2 * w[tie["frm"], tie["milk"]]


@pytest.mark.claim("three-tied-scores-symmetric")
@settings(max_examples=50, deadline=None)
@given(seeds, widths, st.integers(1, 10))
def test_tying_w_q_to_w_k_makes_every_score_matrix_symmetric(seed, d_k, t):
    x, tied = random_tied_case(seed, d_k, t)
    s = scores_of(x, tied)
    assert np.abs(s - s.T).max() <= 1e-12 * max(1.0, np.abs(s).max())


@pytest.mark.claim("three-tied-scores-symmetric")
def test_the_page_tied_score_matrix_is_symmetric(tie):
    assert np.abs(tie["S_tied"] - tie["S_tied"].T).max() < 1e-12
    assert np.abs(tie["S"] - tie["S"].T).max() > 1.0  # and the untied one is far from it


@pytest.mark.claim("three-tied-weights-not-symmetric")
def test_tied_scores_are_equal_but_the_weights_are_not(tie):
    milk, frm, s, w = tie["milk"], tie["frm"], tie["S_tied"], tie["W_tied"]
    assert s[milk, frm] == pytest.approx(s[frm, milk], abs=1e-12)
    assert w[milk, frm] > 10 * w[frm, milk]


@pytest.mark.claim("three-tied-row-total-ratio")
def test_tied_the_weight_ratio_is_the_ratio_of_row_totals(tie):
    milk, frm, s, w = tie["milk"], tie["frm"], tie["S_tied"], tie["W_tied"]
    totals = np.exp(s).sum(axis=-1)  # Z_i, written out here
    np.testing.assert_allclose(tie["totals"], totals, rtol=1e-12)
    assert totals[frm] > 10 * totals[milk]
    # equal scores both ways, so w[milk, from] / w[from, milk] = Z_from / Z_milk
    np.testing.assert_allclose(w[milk, frm] / w[frm, milk], totals[frm] / totals[milk],
                               rtol=1e-9)


@pytest.mark.claim("three-tied-row-totals")
@settings(max_examples=50, deadline=None)
@given(seeds, widths, st.integers(1, 10))
def test_tied_weights_are_symmetric_once_each_row_is_multiplied_by_its_total(seed, d_k, t):
    x, tied = random_tied_case(seed, d_k, t)
    totals = np.exp(scores_of(x, tied)).sum(axis=-1, keepdims=True)  # Z_i
    unnormalised = qkv.self_attention(x, tied).weights * totals  # w_ij Z_i = exp(s_ij)
    np.testing.assert_allclose(unnormalised, unnormalised.T, rtol=1e-9)


@pytest.mark.claim("three-tied-self-score")
@settings(max_examples=50, deadline=None)
@given(seeds, widths, st.integers(1, 10))
def test_tied_a_word_never_scores_itself_below_zero(seed, d_k, t):
    x, tied = random_tied_case(seed, d_k, t)
    assert (np.diag(scores_of(x, tied)) >= 0).all()


@pytest.mark.claim("three-tied-self-score")
def test_separately_every_word_here_scores_itself_below_zero(tie):
    assert (np.diag(scores_of(tie["x"], tie["p"])) < 0).all()


@pytest.mark.claim("three-tied-self-top")
def test_tied_every_word_here_scores_itself_highest_and_separately_none_does(tie):
    on_itself = np.arange(len(toy.SENTENCE))
    tied = qkv.Projections(tie["p"].w_k, tie["p"].w_k, tie["p"].w_v)
    assert (scores_of(tie["x"], tied).argmax(axis=-1) == on_itself).all()
    assert (scores_of(tie["x"], tie["p"]).argmax(axis=-1) != on_itself).all()


@pytest.mark.claim("three-tie-kv-weights-unchanged")
def test_tying_w_v_to_w_k_leaves_the_weights_bit_for_bit(tie):
    p = tie["p"]
    tied = qkv.Projections(p.w_q, p.w_k, p.w_k)
    np.testing.assert_array_equal(qkv.self_attention(tie["x"], tied).weights,
                                  qkv.self_attention(tie["x"], p).weights)


@pytest.mark.claim("three-tie-kv-output-changes")
def test_tying_w_v_to_w_k_moves_the_output_into_key_space(tie):
    p, x = tie["p"], tie["x"]
    full = qkv.self_attention(x, p)
    tied = qkv.self_attention(x, qkv.Projections(p.w_q, p.w_k, p.w_k))
    assert np.abs(tied.output - full.output).max() > 1.0
    _, k, _ = qkv.project(x, p)
    np.testing.assert_allclose(tied.output, full.weights @ k, rtol=1e-12)  # a blend of keys


@pytest.mark.claim("three-dk-dv-shapes")
@settings(deadline=None)  # timing is not what these tests check
@given(st.integers(1, 64), st.integers(1, 64))
def test_weights_stay_t_by_t_whatever_d_k_and_d_v(d_k, d_v):
    t = len(toy.SENTENCE)
    weights, output = qkv.self_attention(toy.embeddings(), toy.projections(d_k, d_v))
    assert weights.shape == (t, t)
    assert output.shape == (t, d_v)


@pytest.mark.claim("three-dk-cost")
@settings(deadline=None)  # timing is not what these tests check
@given(st.integers(1, 50), st.integers(1, 50), st.integers(1, 128), st.integers(1, 128))
def test_each_extra_key_dimension_costs_one_multiply_add_per_score(t_q, t_k, d_k, d_v):
    extra = qkv.attention_flops(t_q, t_k, d_k + 1, d_v) - qkv.attention_flops(t_q, t_k, d_k, d_v)
    assert extra == 2 * t_q * t_k  # one multiply-add (2 flops) for each of the t_q x t_k scores


@pytest.mark.claim("three-head-sizes")
def test_every_recorded_published_model_uses_heads_of_64_or_128():
    # qkv.MODELS is checked field by field against the published configs in
    # test_chapter_kv_cache.py; here only the head widths matter.
    assert len(qkv.MODELS) >= 5
    assert {m.d_head for m in qkv.MODELS} <= {64, 128}


# ---- 2. The hand-built toy (qkv.toy.feature_embeddings, hand_built_projections) -------


@pytest.fixture(scope="module")
def hand():
    return snippet_globals("hand_built.py")


def only(row, names, name):
    """True when ``row`` is zero everywhere but in the column called ``name``."""
    return row[names.index(name)] != 0 and np.count_nonzero(row) == 1


@pytest.mark.claim("hand-roles")
def test_milks_three_vectors_look_for_a_verb_show_liquid_and_hand_over_dairy(hand):
    milk, features = toy.SENTENCE.index("milk"), toy.FEATURES
    assert only(hand["Q"][milk], features, "verb")
    assert only(hand["K"][milk], features, "liquid")
    assert only(hand["V"][milk], toy.VALUE_COLUMNS, "dairy")
    # the queries and keys share one column per feature; no key shows "dairy"
    assert not hand["K"][:, features.index("dairy")].any()


@pytest.mark.claim("hand-drank-finds-milk")
def test_drank_gives_milk_the_weight_its_hand_written_score_predicts(hand):
    drank, milk, she = (toy.SENTENCE.index(w) for w in ("drank", "milk", "she"))
    # scores 8/√8 (milk), 4/√8 (she), 0 for the four others: softmax written out
    e_milk, e_she = np.exp(8 / np.sqrt(8)), np.exp(4 / np.sqrt(8))
    total = e_milk + e_she + 4
    np.testing.assert_allclose(hand["scores"], [4 / np.sqrt(8), 0, 8 / np.sqrt(8), 0, 0, 0],
                               rtol=1e-12, atol=1e-15)
    assert hand["weights"][drank, milk] == pytest.approx(e_milk / total, rel=1e-12)
    assert hand["weights"][drank, she] == pytest.approx(e_she / total, rel=1e-12)
    assert round(e_milk / total, 2) == 0.68


@pytest.mark.claim("hand-drank-receives-dairy")
def test_what_drank_receives_is_mostly_dairy(hand):
    drank, milk = toy.SENTENCE.index("drank"), toy.SENTENCE.index("milk")
    out = hand["output"][drank]
    dairy = toy.VALUE_COLUMNS.index("dairy")
    # only milk's value carries dairy (1), so drank receives its weight on milk of it
    assert out[dairy] == pytest.approx(hand["weights"][drank, milk], rel=1e-12)
    assert out.argmax() == dairy and round(out[dairy], 2) == 0.68


@pytest.mark.claim("home-drank-milk")
def test_home_example_drank_puts_over_two_thirds_on_milk():
    g = snippet_globals("first_attention.py")
    row = g["weights"][toy.SENTENCE.index("drank")]
    assert row.argmax() == toy.SENTENCE.index("milk") and row.max() > 2 / 3


@pytest.mark.claim("three-hand-one-way")
def test_from_looks_for_cup_but_cup_does_not_look_for_from(hand):
    frm, cup = toy.SENTENCE.index("from"), toy.SENTENCE.index("cup")
    S, W = hand["S"], hand["W"]
    assert S[frm, cup] == pytest.approx(8 / np.sqrt(8), rel=1e-12) and S[cup, frm] == 0
    # cup's row: 4/√8 on milk (what it holds), 0 on the other five
    assert W[cup, frm] == pytest.approx(1 / (np.exp(4 / np.sqrt(8)) + 5), rel=1e-12)
    # from's row: 8/√8 on cup, 0 on the other five
    assert W[frm, cup] == pytest.approx(np.exp(8 / np.sqrt(8)) / (np.exp(8 / np.sqrt(8)) + 5),
                                        rel=1e-12)
    assert (round(W[frm, cup], 2), round(W[cup, frm], 2)) == (0.77, 0.11)


# ---- exercises of chapter 1 ----------------------------------------------------------------


def palette_weights(query):
    """Softmax of the palette's scores for ``query``, written out here (d_k = 2)."""
    keys = np.array([[1.0, 0.2], [0.8, 0.8], [-1.0, 0.0], [0.0, 1.0]])  # red orange blue white
    s = keys @ np.asarray(query, dtype=float) / np.sqrt(2)
    e = np.exp(s - s.max())
    return e / e.sum()


@pytest.mark.claim("lookup-ex-bright")
def test_the_bright_query_weighs_white_most_and_blue_least():
    g = snippet_globals("soft_lookup.py")
    np.testing.assert_array_equal(g["keys"] @ g["bright"][0], [0.2, 0.8, 0.0, 1.0])
    w = palette_weights([0, 1])
    assert [g["names"][i] for i in np.argsort(-w)] == ["white", "orange", "red", "blue"]
    answer = w @ g["values"]
    np.testing.assert_allclose(qkv.attention(g["bright"], g["keys"], g["values"]).output[0],
                               answer, rtol=1e-12)
    assert np.abs(g["values"] - answer).max(axis=-1).min() > 0.1  # no entry holds it
    assert answer.min() > 0.4  # pale: every channel well above 0


@pytest.mark.claim("lookup-ex-factor")
def test_red_first_passes_0_99_at_33_times_the_warm_query():
    red = 0
    on_red = [palette_weights([f, 0])[red] for f in range(1, 40)]
    first = next(f for f, w in zip(range(1, 40), on_red, strict=True) if w > 0.99)
    assert first == 33 == snippet_globals("soft_lookup.py")["factor"]


@pytest.mark.claim("lookup-ex-never-pure")
def test_a_query_aimed_at_blue_never_gives_pure_blue():
    g = snippet_globals("soft_lookup.py")
    w = palette_weights(64 * np.array([-1.0, 0.0]))
    assert 0 < np.delete(w, 2).sum() < 1e-19  # the weight not on blue
    assert g["a"][0, 0] > 0 and g["a"][0, 0] == pytest.approx(w @ g["values"][:, 0], rel=1e-9)


# ---- exercises of chapter 2 ----------------------------------------------------------------


@pytest.mark.claim("proj-ex-params")
def test_one_head_of_64_in_a_512_model_has_98304_numbers():
    g = snippet_globals("where_qkv_come_from.py")
    head = g["head"]
    assert head.w_q.size + head.w_k.size + head.w_v.size == 3 * 512 * 64 == 98_304


@pytest.mark.claim("proj-ex-she-milk")
def test_one_entry_of_w_q_turns_she_towards_milk():
    g = snippet_globals("where_qkv_come_from.py")
    changed = g["w_q"] != toy.hand_built_projections().w_q
    assert changed.sum() == 1  # one entry
    assert changed[toy.FEATURES.index("person"), toy.FEATURES.index("liquid")]
    # she's scores are now 8/√8 on milk, 4/√8 on drank, 0 elsewhere: softmax written out
    e_milk, e_drank = np.exp(8 / np.sqrt(8)), np.exp(4 / np.sqrt(8))
    row = g["row"]
    assert row[toy.SENTENCE.index("milk")] == pytest.approx(e_milk / (e_milk + e_drank + 4))
    assert row[toy.SENTENCE.index("drank")] == pytest.approx(e_drank / (e_milk + e_drank + 4))
    drank_row = qkv.self_attention(toy.feature_embeddings(), toy.hand_built_projections()).weights[1]
    assert row.max() == pytest.approx(drank_row.max(), rel=1e-12)  # "exactly what drank gives it"
    assert (round(row.max(), 2), round(row[1], 2)) == (0.68, 0.16)
