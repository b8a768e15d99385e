"""Chapter 9, traps worth knowing: each wrong version fails as the page says, each fix works."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import qkv


@pytest.fixture(scope="module")
def page(page_code):
    """What the code of docs/traps.md defines, run in page order (PyTorch blocks included)."""
    return page_code("traps.md")


@pytest.mark.claim("traps-same-vector")
def test_one_vector_for_all_three_makes_attention_a_word_similarity(page):
    X = page["X"]
    rng = np.random.default_rng(0)
    for x in (X, rng.normal(size=(9, 5))):  # X Xᵀ is symmetric for any X
        scores = x @ x.T
        np.testing.assert_array_equal(scores, scores.T)
    weights = qkv.attention(X, X, X).weights
    np.testing.assert_array_equal(weights.argmax(axis=-1), np.arange(6))  # each word: itself
    np.testing.assert_array_equal(page["wrong"].weights, weights)


@pytest.mark.claim("traps-projections-differ")
def test_separate_projections_give_asymmetric_scores_and_no_self_favourite(page):
    Q, K = page["Q"], page["K"]
    assert not np.allclose(Q @ K.T, (Q @ K.T).T)
    assert not np.allclose(Q, K)
    favourite = page["right"].weights.argmax(axis=-1)
    assert (favourite != np.arange(6)).all()


@pytest.mark.claim("traps-identical-embeddings")
def test_a_word_and_its_copy_get_equal_weight_and_need_not_be_favourites(page):
    w, milk, copy = page["w"], page["milk"], page["copy"]
    np.testing.assert_array_equal(page["twice"][milk], page["twice"][copy])
    np.testing.assert_allclose(w[:, milk], w[:, copy], rtol=1e-12, atol=0)
    assert w[milk].argmax() not in (milk, copy)
    from_ = page["labels"].index("from")
    assert w[milk].argmax() == from_
    assert w[milk, from_] > 3 * w[milk, milk]


@pytest.mark.claim("traps-not-self")
def test_no_word_gives_its_largest_weight_to_itself(page):
    w = page["w"]
    assert all(w[i].argmax() != i for i in range(7))


@pytest.mark.claim("traps-forgot-values")
def test_forgetting_v_gives_the_right_shape_and_the_wrong_numbers(page):
    forgot, output, V6 = page["forgot"], page["output"], page["V6"]
    assert forgot.shape == output.shape == (6, 6)  # no shape check would complain
    assert np.abs(forgot - output).max() > 0.5
    np.testing.assert_allclose(forgot.sum(axis=-1), 1.0, rtol=1e-12)
    assert not np.allclose(output.sum(axis=-1), 1.0, atol=0.1)
    np.testing.assert_allclose(output, qkv.attention(page["Q6"], page["K6"], V6).output,
                               rtol=1e-12)


def mha_reference_weights(mha, x, mask):
    """The attention weights nn.MultiheadAttention should give, computed with qkv."""
    w_q, w_k, _ = mha.in_proj_weight.detach().double().numpy().reshape(3, 16, 16)
    b_q, b_k, _ = mha.in_proj_bias.detach().double().numpy().reshape(3, 16)
    xs = x[0].double().numpy()
    return qkv.attention(xs @ w_q.T + b_q, xs @ w_k.T + b_k, xs, mask=mask).weights


@pytest.mark.claim("traps-mha-polarity")
def test_multihead_attention_reads_true_as_blocked(page):
    causal, backwards, forwards = page["causal"], page["backwards"][0], page["forwards"][0]
    np.testing.assert_allclose(forwards.numpy(),
                               mha_reference_weights(page["mha"], page["x"], causal),
                               rtol=1e-4, atol=1e-6)
    # given True = attend, each token sees only later tokens and the last sees nothing
    upper = np.triu(np.ones((6, 6), dtype=bool), k=1)
    assert (backwards.numpy()[:-1][~upper[:-1]] == 0).all()
    assert (backwards.numpy()[:-1][upper[:-1]] > 0).all()
    assert torch.isnan(backwards[-1]).all()


@pytest.mark.claim("traps-float-mask")
def test_a_zero_one_float_mask_hides_nothing_and_zero_minus_inf_works(page):
    assert page["leak"].min() > 0  # every future pair keeps a positive weight
    q, k, v, causal = page["q"], page["k"], page["v"], page["causal"]
    as_float = page["as_float"]
    assert as_float.dtype == torch.float64
    np.testing.assert_array_equal(as_float.numpy(), causal.astype(float))  # 1 allowed, 0 not
    want = qkv.attention(page["Q"], page["K"], page["V"], mask=causal).output
    leaky = F.scaled_dot_product_attention(q, k, v, attn_mask=as_float)
    # SDPA adds the float mask to the scaled scores: +1 on every allowed pair
    added = qkv.attention(page["Q"], page["K"], page["V"]).weights  # unmasked
    plus_one = np.exp(np.log(added) + causal)  # weights of scores + mask, unnormalised
    plus_one /= plus_one.sum(axis=-1, keepdims=True)
    assert np.abs(leaky.numpy() - plus_one @ page["V"]).max() < 1e-12
    assert np.abs(leaky.numpy() - want).max() > 0.1
    good = F.scaled_dot_product_attention(q, k, v, attn_mask=page["additive"])
    assert np.abs(good.numpy() - want).max() < 1e-12


@pytest.mark.claim("traps-wrong-axis")
def test_softmax_over_queries_leaves_rows_that_do_not_sum_to_one(page):
    by_query, by_key = page["by_query"], page["by_key"]
    np.testing.assert_allclose(by_query.sum(axis=0), 1.0, rtol=1e-12)  # columns do instead
    rows = by_query.sum(axis=-1)
    assert abs(rows.mean() - 1.0) < 1e-12  # T columns of 1 shared over T rows
    assert rows.min() < 0.8 and rows.max() > 1.5
    np.testing.assert_allclose(by_key.sum(axis=-1), 1.0, rtol=1e-12)


@pytest.mark.claim("traps-nan-spreads")
def test_nan_from_two_empty_rows_fills_every_row_of_the_next_layer(page):
    mask = page["mask"]
    assert (~mask.any(axis=-1)).sum() == 2  # the two left pads may attend to nothing
    assert torch.isnan(page["layer1"]).any(-1).sum() == 2
    assert torch.isnan(page["layer2"]).all()  # even rows whose mask hides the pads
    assert (0.0 * torch.tensor(float("nan"))).isnan()  # why: 0 × NaN is NaN
    with pytest.raises(ValueError, match="allows no key"):
        qkv.attention(page["Q"], page["K"], page["V"], mask=mask)


@pytest.mark.claim("traps-nan-fix")
def test_letting_each_query_see_itself_removes_the_nan_and_changes_no_real_row(page):
    ok, layer1, fixed = page["ok"], page["layer1"], page["fixed"]
    assert not torch.isnan(ok).any()
    np.testing.assert_allclose(ok[2:].numpy(), layer1[2:].numpy(), rtol=1e-12)
    np.testing.assert_allclose(
        ok.numpy(), qkv.attention(page["Q"], page["K"], page["V"], mask=fixed).output, rtol=1e-12)


@pytest.mark.claim("traps-position-splits-keys")
def test_rotary_positions_give_the_two_copies_different_keys_and_weights(page):
    twice, p = page["twice"], page["p"]
    milk, copy = page["milk"], page["copy"]  # positions 2 and 6, identical embeddings
    Q, K, V = qkv.project(twice, p)
    np.testing.assert_allclose(K[milk], K[copy], rtol=1e-12, atol=1e-15)  # no position: one key
    Qr, Kr = qkv.rope(Q), qkv.rope(K)
    assert not np.allclose(Kr[milk], Kr[copy])
    w = qkv.attention(Qr, Kr, V).weights
    assert not np.isclose(w[:, milk], w[:, copy], rtol=1e-6, atol=0).any()
    # the score a query at m gives the key at n depends on m - n alone: recompute it
    # with both moved by the same shift, by rotating each pair by hand
    def rotate(v, position):
        angles = position * 10_000.0 ** (-np.arange(0, len(v), 2) / len(v))
        c, s = np.cos(angles), np.sin(angles)
        out = v.copy()
        out[0::2] = v[0::2] * c - v[1::2] * s
        out[1::2] = v[0::2] * s + v[1::2] * c
        return out
    for m in range(7):
        for n in (milk, copy):
            shifted = rotate(Q[m], m + 11) @ rotate(K[n], n + 11)
            assert np.isclose(Qr[m] @ Kr[n], shifted, rtol=1e-10, atol=1e-12)
