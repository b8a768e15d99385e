"""The exercises of chapters 8, 9, 10 and 11: each solution's code gives the answer its text
states, and that answer is derived here independently (by formula or by hand)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from chapter_snippets import snippet_globals

import qkv


@pytest.fixture(scope="module")
def three_kinds():
    return snippet_globals("three_kinds_exercises.py")


@pytest.fixture(scope="module")
def traps():
    return snippet_globals("traps_exercises.py")


@pytest.fixture(scope="module")
def kv_cache():
    return snippet_globals("kv_cache_exercises.py")


# ---- chapter 8 -----------------------------------------------------------------------------


@pytest.mark.claim("kinds-exercise-causal-count")
def test_causal_mask_of_five_forbids_ten_pairs_and_the_first_token_sees_itself(three_kinds):
    mask = three_kinds["mask"]
    assert int((~mask).sum()) == 5 * 4 // 2 == 10
    for t in range(1, 12):  # T(T-1)/2 in general: the strict upper triangle
        assert int((~qkv.causal_mask(t)).sum()) == t * (t - 1) // 2
    weights = three_kinds["weights"]
    assert weights[0, 0] == 1.0
    assert np.all(weights[~mask] == 0.0)


@pytest.mark.claim("kinds-exercise-cross-shapes")
def test_five_readers_of_six_words_get_5_by_6_weights_and_5_by_4_output(three_kinds):
    cross = three_kinds["cross"]
    assert cross.weights.shape == (5, 6)
    assert cross.output.shape == (5, qkv.toy.D_V) == (5, 4)
    assert np.allclose(cross.weights.sum(axis=-1), 1.0)


@pytest.mark.claim("kinds-exercise-end-padding")
def test_end_padding_changes_no_real_token_under_a_causal_mask(three_kinds):
    assert three_kinds["gap"] == 0.0
    # and for every split of a random batch, not only the page's
    rng = np.random.default_rng(8)
    p = qkv.toy.projections(qkv.toy.D_K, qkv.toy.D_V)
    for length in range(1, 7):
        x = rng.normal(size=(1, 6, 16))
        both = qkv.self_attention(x, p, mask=qkv.causal_mask(6) & qkv.padding_mask([length], 6))
        causal = qkv.self_attention(x, p, mask=qkv.causal_mask(6))
        assert np.array_equal(both.output[0, :length], causal.output[0, :length])


# ---- chapter 9 -----------------------------------------------------------------------------


@pytest.mark.claim("traps-exercise-wrong-axis")
def test_softmax_down_the_columns_of_the_exercise_by_hand(traps):
    e2 = math.exp(2)
    by_hand = np.array([[e2 / (e2 + 1), 0.5], [1 / (e2 + 1), 0.5]])
    np.testing.assert_allclose(traps["wrong"], by_hand, rtol=1e-12)
    sums = traps["wrong"].sum(axis=1)
    assert round(sums[0], 3) == 1.381 and round(sums[1], 3) == 0.619
    assert math.isclose(sums.mean(), 1.0)
    np.testing.assert_allclose(traps["right"].sum(axis=1), 1.0)


@pytest.mark.claim("traps-exercise-left-padding")
def test_left_padding_with_a_causal_mask_empties_the_pad_queries(traps):
    # query i of sequence b sees keys 0..i; it has none when all of them are padding,
    # i.e. when i < t - length
    t, lengths = traps["t"], traps["lengths"]
    by_hand = [(b, i) for b, n in enumerate(lengths) for i in range(t) if i < t - n]
    assert traps["empty"] == by_hand == [(0, 0), (0, 1)]
    with pytest.raises(ValueError, match=r"\(0, 0\)"):
        qkv.attention(np.ones((2, t, 3)), np.ones((2, t, 3)), np.ones((2, t, 3)),
                      mask=traps["allowed"])


# ---- chapter 10 ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def multi_head():
    return snippet_globals("multi_head_exercises.py")


@pytest.mark.claim("heads-exercise-gpt2")
def test_gpt2_small_heads_are_64_wide_and_the_layer_holds_4_times_768_squared(multi_head):
    assert multi_head["w"].d_head == 768 // 12 == 64
    assert multi_head["params"] == 4 * 768 * 768 == 2_359_296


@pytest.mark.claim("heads-exercise-grouped")
def test_grouped_query_layer_shapes_and_weight_count(multi_head):
    g = multi_head["g"]
    assert g.w_q.shape == g.w_o.shape == (768, 768)
    assert g.w_k.shape == g.w_v.shape == (768, 4 * 64)
    assert multi_head["grouped"] == 2 * 768**2 + 2 * 768 * 256 == 1_572_864
    assert 1 - 1_572_864 / 2_359_296 == pytest.approx(1 / 3)


# ---- chapter 11 ----------------------------------------------------------------------------


@pytest.mark.claim("cache-exercise-size")
def test_the_exercise_cache_takes_192_mib_and_768_without_sharing(kv_cache):
    assert kv_cache["shared"] == 2 * 24 * 4 * 64 * 8192 * 2 == 201_326_592 == 192 * 2**20
    assert kv_cache["unshared"] == 4 * kv_cache["shared"] == 768 * 2**20


@pytest.mark.claim("cache-exercise-scores")
def test_the_exercise_decoder_scores_40400_with_and_2706800_without_the_cache(kv_cache):
    h, t = 8, 100
    assert kv_cache["cached"].total_scores == h * sum(range(1, t + 1)) == 40_400
    assert kv_cache["recomputed"].total_scores == h * sum(s * s for s in range(1, t + 1))
    assert kv_cache["recomputed"].total_scores == 2_706_800
    assert round(2_706_800 / 40_400) == 67
