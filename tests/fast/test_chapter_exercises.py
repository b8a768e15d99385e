"""The exercises of chapters 8, 10, 11 and 12: each solution's answer is derived here
independently (by formula, by hand, or from qkv's public functions on the test's own data),
and the text the solution's code prints on the page (read through ``page_output``; the
solutions run inside their folded blocks) must state that answer."""

from __future__ import annotations

import math
import textwrap

import numpy as np
import pytest
from prose import check_prose
from support import numbers

import qkv
from qkv import toy

# ---- chapter 8 -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def three_kinds(page_output):
    return page_output("three-kinds.md")


@pytest.mark.claim("kinds-exercise-causal-count")
def test_causal_mask_of_five_forbids_ten_pairs_and_the_first_token_sees_itself(three_kinds):
    for t in range(1, 12):  # T(T-1)/2 in general: the strict upper triangle
        assert int((~qkv.causal_mask(t)).sum()) == t * (t - 1) // 2
    weights = qkv.self_attention(
        toy.embeddings()[:5], toy.projections(toy.D_K, toy.D_V), mask=qkv.causal_mask(5)
    ).weights
    assert weights[0, 0] == 1.0
    assert np.all(weights[np.triu_indices(5, k=1)] == 0.0)
    section = "three_kinds_exercises.py:causal_count"
    lower_triangle = (
        "\n".join(
            ("[" if i == 0 else " ") + "[" + " ".join("1" if j <= i else "0" for j in range(5)) + "]"
            for i in range(5)
        )
        + "]"
    )
    assert three_kinds[section].startswith(lower_triangle + "\n")
    t = 5  # the exercise's five tokens
    forbidden = int((~qkv.causal_mask(t)).sum())
    assert three_kinds.values(section, "pairs forced to weight 0:") == [forbidden]
    assert three_kinds.values(section, "first token's weight on itself:") == [weights[0, 0]]
    # "5 · 4 / 2 = 10 forbidden pairs ... weight 1": T, T - 1, the halving, count, weight
    check_prose("kinds-exercise-causal-count", t, t - 1, ..., forbidden, weights[0, 0])


@pytest.mark.claim("kinds-exercise-cross-shapes")
def test_five_readers_of_six_words_get_5_by_6_weights_and_5_by_4_output(three_kinds):
    reader = np.random.default_rng(30).normal(size=(5, toy.D_MODEL))  # any five positions
    cross = qkv.cross_attention(reader, toy.embeddings(), toy.projections(toy.D_K, toy.D_V))
    assert cross.weights.shape == (len(reader), len(toy.SENTENCE))  # one row per asker
    assert cross.output.shape == (len(reader), toy.D_V)
    assert np.allclose(cross.weights.sum(axis=-1), 1.0)
    assert (
        three_kinds["three_kinds_exercises.py:cross_shapes"].split()
        == f"weights {cross.weights.shape} output {cross.output.shape}".split()
    )
    check_prose("kinds-exercise-cross-shapes", *cross.weights.shape, toy.D_V)


@pytest.fixture(scope="module")
def masks_in_pytorch(page_output):
    return page_output("masks-in-pytorch.md")  # chapter 8's deep dive


@pytest.mark.claim("kinds-exercise-end-padding")
def test_end_padding_changes_no_real_token_under_a_causal_mask(masks_in_pytorch):
    rng = np.random.default_rng(8)
    p = toy.projections(toy.D_K, toy.D_V)
    for length in range(1, 7):  # every split of a random batch, padding of any size
        x = rng.normal(size=(1, 6, 16))
        x[0, length:] *= 1e3
        both = qkv.self_attention(x, p, mask=qkv.causal_mask(6) & qkv.padding_mask([length], 6))
        causal = qkv.self_attention(x, p, mask=qkv.causal_mask(6))
        assert np.array_equal(both.output[0, :length], causal.output[0, :length])
    # the page's batch: the sentence twice, the first with 4 real words and junk after them
    x = np.stack([toy.embeddings(), toy.embeddings()])
    x[0, 4:] = rng.normal(size=(2, 16)) * 50
    both = qkv.self_attention(x, p, mask=qkv.causal_mask(6) & qkv.padding_mask([4, 6], 6))
    causal = qkv.self_attention(x, p, mask=qkv.causal_mask(6))
    gap = np.abs(both.output[0, :4] - causal.output[0, :4]).max()
    assert masks_in_pytorch.values(
        "three_kinds_exercises.py:end_padding",
        "real tokens, causal + padding vs causal alone:",
    ) == [gap]
    check_prose("kinds-exercise-end-padding", gap)


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


@pytest.mark.claim("traps-exercise-left-padding")
def test_left_padding_with_a_causal_mask_empties_the_pad_queries(traps):
    # query i of sequence b sees keys 0..i; it has none when all of them are padding,
    # i.e. when i < t - length
    t, lengths = 4, [2, 4]
    by_hand = [(b, i) for b, n in enumerate(lengths) for i in range(t) if i < t - n]
    assert by_hand == [(0, 0), (0, 1)]
    padding = [i for i in range(t) if i < t - lengths[0]]  # the first sequence's pads
    check_prose("traps-exercise-left-padding", *padding, *[i for _, i in by_hand])
    left = qkv.padding_mask(lengths, t)[..., ::-1]  # padding at the start: the mirror image
    allowed = left & qkv.causal_mask(t)
    empty = [(int(b), int(i)) for b, i in zip(*np.nonzero(~allowed.any(axis=-1)), strict=True)]
    assert empty == by_hand
    with pytest.raises(ValueError, match=r"\(0, 0\)") as refused:
        qkv.attention(np.ones((2, t, 3)), np.ones((2, t, 3)), np.ones((2, t, 3)), mask=allowed)
    section = "traps_exercises.py:left_padding"
    assert (
        traps.line(section, "(sequence, query) pairs left with no key:")
        == f"(sequence, query) pairs left with no key: {by_hand}"
    )
    refusal = traps[section].split("\n", 1)[1].strip()
    assert refusal == textwrap.fill(f"qkv refuses: {refused.value}", 72)


# ---- chapter 11 ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def multi_head(page_output):
    return page_output("multi-head.md")


@pytest.mark.claim("heads-exercise-gpt2")
def test_gpt2_small_heads_are_64_wide_and_the_layer_holds_4_times_768_squared(multi_head):
    d_model, n_heads = 768, 12  # GPT-2 small, as the exercise gives it
    w = qkv.MultiHeadWeights.random(np.random.default_rng(5), d_model=d_model, n_heads=n_heads)
    assert w.d_head == d_model // n_heads
    matrices = (w.w_q, w.w_k, w.w_v, w.w_o)
    count = sum(m.size for m in matrices)
    assert {m.shape for m in matrices} == {(d_model, d_model)}
    assert count == len(matrices) * d_model**2
    section = "multi_head_exercises.py:gpt2_sizes"
    assert multi_head.line(section, "d_head =") == f"d_head = {w.d_head}"
    assert multi_head.values(section, "weights in the layer:") == [count]
    # "each 768 × 768 ..., so the layer holds 4 × 768^2 = 2,359,296 weights"
    check_prose(
        "heads-exercise-gpt2",
        *w.w_q.shape,
        len(matrices),
        d_model,
        np.log(w.w_q.size) / np.log(d_model),
        count,
    )


@pytest.mark.claim("heads-exercise-grouped")
def test_grouped_query_layer_shapes_and_weight_count(multi_head):
    d_model, n_heads, n_kv = 768, 12, 4  # as the exercise gives them
    g = qkv.MultiHeadWeights.random(
        np.random.default_rng(5), d_model=d_model, n_heads=n_heads, n_kv_heads=n_kv
    )
    d_head = d_model // n_heads
    shapes = {
        "w_q": (d_model, d_model),
        "w_k": (d_model, n_kv * d_head),
        "w_v": (d_model, n_kv * d_head),
        "w_o": (d_model, d_model),
    }
    assert {name: getattr(g, name).shape for name in shapes} == shapes
    count = sum(m.size for m in (g.w_q, g.w_k, g.w_v, g.w_o))
    assert count == 2 * d_model**2 + 2 * d_model * n_kv * d_head
    assert 1 - count / (4 * d_model**2) == pytest.approx(1 / 3)  # "a third fewer"
    square = np.log(g.w_q.size) / np.log(d_model)
    # "keep 768 × 768; ... 4 heads of 64, ... 768 × 256, ... 2 × 768^2 + 2 × 768 × 256 = ..."
    check_prose(
        "heads-exercise-grouped",
        *g.w_q.shape,
        n_kv,
        d_head,
        *g.w_k.shape,
        len(("w_q", "w_o")),
        d_model,
        square,
        len(("w_k", "w_v")),
        *g.w_k.shape,
        count,
    )
    section = "multi_head_exercises.py:grouped_shapes"
    for name, shape in shapes.items():
        assert multi_head.line(section, f"{name} ") == f"{name} {shape}"
    assert multi_head.values(section, "weights in the layer:") == [count]


# ---- chapter 12 and its deep dive ------------------------------------------------------------


@pytest.fixture(scope="module")
def kv_cache(page_output):
    return page_output("kv-cache.md")


@pytest.fixture(scope="module")
def kv_cache_in_depth(page_output):
    return page_output("kv-cache-in-depth.md")


@pytest.mark.claim("cache-exercise-size")
def test_the_exercise_cache_takes_192_mib_and_768_without_sharing(kv_cache_in_depth):
    layers, query_heads, kv_heads, d_head, tokens, size = 24, 16, 4, 64, 8192, 2  # given
    shared = 2 * layers * kv_heads * d_head * tokens * size  # K and V, per layer, head, token
    assert qkv.kv_cache_bytes(layers, kv_heads, d_head, tokens, size) == shared
    unshared = qkv.kv_cache_bytes(layers, query_heads, d_head, tokens, size)
    assert unshared == 4 * shared  # "four times as much"
    section = "kv_cache_in_depth_exercises.py:cache_size"
    mib = 2**20
    shown = kv_cache_in_depth
    assert shown.values(section, f"{kv_heads} key/value heads:") == [shared, shared / mib]
    assert shown.values(section, f"{query_heads} key/value heads:") == [unshared, unshared / mib]
    check_prose(
        "cache-exercise-size",
        len(("key", "value")),
        layers,
        kv_heads,
        d_head,
        tokens,
        size,
        shared,
        shared / mib,
        query_heads,
        unshared / mib,
    )


@pytest.mark.claim("cache-exercise-scores")
def test_the_exercise_decoder_scores_40400_with_and_2706800_without_the_cache(kv_cache):
    h, t = 8, 100
    with_cache = h * t * (t + 1) // 2
    without = h * t * (t + 1) * (2 * t + 1) // 6
    check_prose(
        "cache-exercise-scores",
        h,
        t,
        t + 1,
        ...,
        with_cache,  # "/ 2": the formula's
        h,
        t,
        t + 1,
        2 * t + 1,
        ...,
        without,
        without / with_cache,
    )  # "/ 6" likewise
    w = qkv.MultiHeadWeights.random(np.random.default_rng(6), d_model=16, n_heads=h)
    x = np.random.default_rng(7).normal(size=(t, 16))
    cached, recomputed = qkv.WorkCounter(), qkv.WorkCounter()
    qkv.decode_with_cache(x, w, cached)
    qkv.decode_without_cache(x, w, recomputed)
    assert (cached.total_scores, recomputed.total_scores) == (with_cache, without)
    section = "kv_cache_exercises.py:score_count"
    assert kv_cache.values(section, "scores with the cache:") == [with_cache]
    assert kv_cache.values(section, "scores without the cache:") == [without]
    assert kv_cache.values(section, "ratio:") == [round(without / with_cache)]
