"""Guards for the claims of docs/multi-head.md, "Many narrow heads instead of one wide one":
merging undoing splitting, the cost in short, the order blindness, and the exercise on
GPT-2 small's heads (the shape at every step and the grouped-query exercise, now on the
deep dive, are guarded in test_multi_head_in_depth.py).

Each fact is derived here, from qkv's public API on the test's own seeded layers, and the
page's printed output (``page_output``) is checked against it.
"""

from __future__ import annotations

import numpy as np
import pytest
from pages_support import EXACT, _layer, _n_params, even, on_first, on_previous
from prose import check_prose
from support import attention_product_flops

import qkv

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


@pytest.mark.claim("heads-merge-inverts-split")
def test_merge_heads_undoes_split_heads_exactly():
    x = np.random.default_rng(1).normal(size=(3, 7, 48))
    for n_heads in (1, 2, 3, 4, 6, 8, 12, 48):
        assert np.array_equal(qkv.merge_heads(qkv.split_heads(x, n_heads)), x)
    w, x = _layer()  # the page's layer: head i is columns 64 i to 64 i + 63
    q = qkv.split_heads(x @ w.w_q, w.n_heads)
    last = w.d_head - 1
    for i in range(w.n_heads):  # its own (512, 64) matrix: the band of W_Q
        own = w.w_q[:, w.d_head * i : w.d_head * i + last + 1]
        np.testing.assert_allclose(q[i], x @ own, rtol=1e-12, atol=1e-12)  # BLAS order
    check_prose("heads-merge-inverts-split", last, *own.shape)


@pytest.mark.claim("heads-cost-in-short")
@pytest.mark.parametrize("t", [6, 100])
def test_eight_narrow_heads_cost_one_wide_head_and_store_eight_maps(t):
    w8, x = _layer(t=t)
    w1 = qkv.MultiHeadWeights.random(np.random.default_rng(1), 512, 1)
    # the arithmetic, counted on the arrays attention computes, and the parameters
    flops = [attention_product_flops(t, t, w.d_head, w.d_head, w.n_heads) for w in (w8, w1)]
    assert flops[0] == flops[1]
    assert _n_params(w8) == _n_params(w1)
    for w in (w8, w1):  # every matrix square, however the columns are grouped
        assert {m.shape for m in (w.w_q, w.w_k, w.w_v, w.w_o)} == {(512, 512)}
    maps8, maps1 = (qkv.multi_head_attention(x, x, w).weights for w in (w8, w1))
    assert maps8.shape == (8, t, t) and maps1.shape == (1, t, t)  # one map per head
    # the softmax is not among the equal counts: one exponential per score it normalises,
    # and eight heads normalise eight maps (so "the same arithmetic" in all was too much)
    exponentials = [maps.size for maps in (maps8, maps1)]
    assert exponentials[0] == 8 * exponentials[1] and maps8.nbytes == 8 * maps1.nbytes
    # "Eight heads of 64 ... one head of 512 ... 512 × 512 ... 8 weight maps where one head
    # computes 1, so 8 times the exponentials and 8 times the memory"
    check_prose(
        "heads-cost-in-short",
        w8.d_head,
        w1.d_head,
        *w8.w_q.shape,
        len(maps8),
        len(maps1),
        exponentials[0] / exponentials[1],
        maps8.nbytes / maps1.nbytes,
    )


@pytest.mark.claim("heads-order-blind")
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_shuffling_the_tokens_only_shuffles_every_heads_weights_and_outputs(seed):
    w, x = _layer(seed=seed, d_model=64, n_heads=8, t=6)
    order = np.random.default_rng(seed + 10).permutation(6)
    assert not np.array_equal(order, np.arange(6))
    plain = qkv.multi_head_attention(x, x, w)
    shuffled = qkv.multi_head_attention(x[order], x[order], w)
    # Query i of the shuffled run is token order[i]; key j is token order[j].
    expected_weights = plain.weights[:, order][:, :, order]
    assert np.allclose(shuffled.weights, expected_weights, rtol=0, atol=EXACT)
    assert np.allclose(shuffled.output, plain.output[order], rtol=0, atol=EXACT)
    check_prose("heads-order-blind", EXACT)
    # "without a mask": under a causal mask the same shuffle changes more than the order
    causal = qkv.causal_mask(6)
    masked = qkv.multi_head_attention(x, x, w, mask=causal).output
    masked_shuffled = qkv.multi_head_attention(x[order], x[order], w, mask=causal).output
    assert not np.allclose(masked_shuffled, masked[order], rtol=0, atol=1e-3)


# ---- two heads of the trained model, side by side (figure trained-two-heads) ---------------


@pytest.fixture(scope="module")
def two_heads():
    """The figure's data, and the even spread over the sentence, computed here from the trace."""
    from qkv_site.figures import trained_two_heads
    from support import model_trace

    d = trained_two_heads.data()
    weights = model_trace("The cat sat on the mat because it was warm").weights.astype(np.float64)
    return d, weights


@pytest.mark.model
@pytest.mark.claim("two-heads-chosen")
def test_the_two_heads_are_the_top_scoring_ones_of_the_trained_model_pages_scores(two_heads):
    from qkv_site.figures import trained_head_types

    d, weights = two_heads
    types = trained_head_types.data()
    n_layers, n_heads = weights.shape[:2]
    tops = []
    for kind in ("previous", "first"):
        by_head = types.scores[types.kinds.index(kind)]
        tops.append(np.unravel_index(np.argmax(by_head), by_head.shape))
    (pl, ph), (fl, fh) = tops
    assert d.heads == ((pl, ph), (fl, fh))
    assert n_layers * n_heads == 270  # every head of the model was scored
    check_prose("two-heads-chosen", pl + 1, ph + 1, fl + 1, fh + 1)


@pytest.mark.model
@pytest.mark.claim("two-heads-previous")
def test_the_previous_token_head_puts_most_weight_one_word_back(two_heads):
    d, weights = two_heads
    (layer, head), _ = d.heads
    w = weights[layer, head]
    t = w.shape[-1]
    even_share = even(t, range(1, t))
    on_previous_w = on_previous(w)
    assert on_previous_w > 3 * even_share  # the reading: far above an even spread, not only a number
    check_prose("two-heads-previous", on_previous_w, even_share)


@pytest.mark.model
@pytest.mark.claim("two-heads-first")
def test_the_first_token_head_parks_every_words_weight_on_the_first_token(two_heads):
    d, weights = two_heads
    _, (layer, head) = d.heads
    w = weights[layer, head]
    assert w[:, 0].min() > 0.995
    check_prose("two-heads-first", round(float(w[:, 0].min()), 2), ...)  # ...: the citation's year


@pytest.mark.model
@pytest.mark.claim("two-heads-random")
def test_both_heads_keep_their_jobs_on_random_tokens(model):
    """The control that removes the words: texts of random tokens written twice. Each head
    still puts more than three times an even spread's weight on its target, in every text."""
    from qkv_site.figures import trained_two_heads

    from qkv import smollm2
    from qkv.lab import head_scores

    d = trained_two_heads.data()
    for ids in head_scores.repeated_random_tokens(4, 12, seed=0):
        w = smollm2.forward(model, ids).weights.astype(np.float64)
        t = w.shape[-1]
        even_share = even(t, range(1, t))
        (pl, ph), (fl, fh) = d.heads
        assert on_previous(w[pl, ph]) > 3 * even_share
        assert on_first(w[fl, fh]) > 3 * even_share
