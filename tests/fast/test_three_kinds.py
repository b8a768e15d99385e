"""Chapter 8, three kinds of attention: self, cross and masked. Every claim, checked."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import qkv
from qkv import toy


@pytest.fixture(scope="module")
def page(page_code):
    """What the code of docs/three-kinds.md defines, run in page order (PyTorch tab included)."""
    return page_code("three-kinds.md")


@pytest.mark.claim("kinds-one-formula")
def test_self_and_cross_attention_are_attention_on_different_sources(page):
    X, p, decoder = page["X"], page["p"], page["decoder"]
    plain = qkv.attention(X @ p.w_q, X @ p.w_k, X @ p.w_v)
    np.testing.assert_array_equal(qkv.self_attention(X, p).weights, plain.weights)
    crossed = qkv.attention(decoder @ p.w_q, X @ p.w_k, X @ p.w_v)
    np.testing.assert_array_equal(page["cross"].weights, crossed.weights)
    np.testing.assert_array_equal(page["cross"].output, crossed.output)
    mask = qkv.causal_mask(6)
    np.testing.assert_array_equal(page["masked"].weights,
                                  qkv.attention(X @ p.w_q, X @ p.w_k, X @ p.w_v, mask=mask).weights)


@pytest.mark.claim("kinds-causal-zeros")
@settings(max_examples=40, deadline=None)
@given(t=st.integers(1, 12), d=st.integers(1, 16), seed=st.integers(0, 2**16),
       spread=st.sampled_from([1.0, 30.0]))
def test_causal_mask_gives_exact_zeros_above_the_diagonal(t, d, seed, spread):
    rng = np.random.default_rng(seed)
    q, k, v = (spread * rng.normal(size=(t, d)) for _ in range(3))
    weights = qkv.attention(q, k, v, mask=qkv.causal_mask(t)).weights
    assert (weights[np.triu_indices(t, k=1)] == 0).all()  # exactly, not approximately
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=0, atol=1e-12)


@pytest.mark.claim("kinds-causal-zeros")
def test_the_page_causal_weights_are_exactly_zero_in_the_future(page):
    weights = page["masked"].weights
    assert (weights[~page["causal"]] == 0).all()
    assert page["causal"].sum() == 6 * 7 // 2  # the diagonal and everything below it


@pytest.mark.claim("kinds-causal-renormalised")
def test_each_causal_row_is_the_softmax_of_its_allowed_scores_alone(page):
    Q, K = page["Q"], page["K"]
    scores = Q @ K.T / np.sqrt(K.shape[-1])
    weights = page["masked"].weights
    for i in range(6):
        np.testing.assert_allclose(weights[i, : i + 1], qkv.softmax(scores[i, : i + 1]), rtol=1e-12)
    assert weights[0, 0] == 1.0  # the first token can only look at itself


@pytest.mark.claim("kinds-causal-last-row")
def test_the_last_token_sees_what_it_would_see_unmasked(page):
    np.testing.assert_allclose(page["masked"].weights[-1], page["self_att"].weights[-1],
                               rtol=1e-12)
    assert not np.allclose(page["masked"].weights[:-1], page["self_att"].weights[:-1])


@pytest.mark.claim("kinds-causal-prefix")
@pytest.mark.parametrize("t", range(1, 7))
def test_causal_outputs_of_a_prefix_ignore_every_later_token(page, t):
    X, p = page["X"], page["p"]
    full = qkv.self_attention(X, p, mask=qkv.causal_mask(6)).output
    prefix = qkv.self_attention(X[:t], p, mask=qkv.causal_mask(t)).output
    np.testing.assert_allclose(full[:t], prefix, rtol=1e-12, atol=1e-15)


@pytest.mark.claim("kinds-padding-zeros")
def test_padded_keys_get_exactly_zero_weight(page):
    weights = page["padded"].weights  # (2, 6, 6)
    assert (weights[1][:, 4:] == 0).all()
    assert (weights[0] > 0).all()  # the unpadded sequence loses nothing
    assert page["pad"].shape == (2, 1, 6)


@pytest.mark.claim("kinds-padding-no-leak")
def test_padding_content_never_reaches_real_tokens(page):
    X, p = page["X"], page["p"]
    np.testing.assert_allclose(page["padded"].output[1, :4], page["short"].output, rtol=1e-12)
    other = page["batch"].copy()
    other[1, 4:] = 1e3 * np.random.default_rng(8).normal(size=(2, 16))  # different junk
    changed = qkv.self_attention(other, p, mask=page["pad"])
    np.testing.assert_allclose(changed.output[1, :4], qkv.self_attention(X[:4], p).output,
                               rtol=1e-12)


@pytest.mark.claim("kinds-padding-queries")
def test_padded_queries_still_attend_to_the_real_tokens(page):
    pad_rows = page["padded"].weights[1][4:]  # (2, 6): the two padding positions as queries
    np.testing.assert_allclose(pad_rows.sum(axis=-1), 1.0, rtol=1e-12)
    assert (pad_rows[:, :4] > 0).all() and (pad_rows[:, 4:] == 0).all()
    assert np.isfinite(page["padded"].output[1, 4:]).all()


@pytest.mark.claim("kinds-mask-broadcast")
def test_causal_and_padding_masks_combine_by_broadcasting(page):
    both = page["both"]
    assert both.shape == (2, 6, 6)
    np.testing.assert_array_equal(both[1], qkv.causal_mask(6) & np.array([1, 1, 1, 1, 0, 0], bool))
    weights = qkv.self_attention(page["batch"], page["p"], mask=both).weights
    assert (weights[~both] == 0).all()


@pytest.mark.claim("kinds-cross-shape")
@pytest.mark.parametrize(("t_q", "t_k"), [(3, 6), (1, 9), (7, 2)])
def test_cross_attention_is_rectangular_with_rows_of_one(page, t_q, t_k):
    p = page["p"]
    rng = np.random.default_rng(t_q * 10 + t_k)
    result = qkv.cross_attention(rng.normal(size=(t_q, 16)), rng.normal(size=(t_k, 16)), p)
    assert result.weights.shape == (t_q, t_k)
    assert result.output.shape == (t_q, p.d_v)
    np.testing.assert_allclose(result.weights.sum(axis=-1), 1.0, rtol=0, atol=1e-12)
    assert page["cross"].weights.shape == (3, 6)
    np.testing.assert_allclose(page["cross"].weights.sum(axis=-1), 1.0, rtol=0, atol=1e-12)


def random_mask(rng, shape):
    mask = rng.random(shape) < 0.5
    mask[..., rng.integers(shape[-1])] = True  # every query keeps at least one key
    return mask


@pytest.mark.claim("kinds-torch-agrees")
def test_torch_masked_attention_and_sdpa_agree_with_qkv(page):
    assert np.abs(page["torch_weights"].numpy() - page["weights"]).max() < 1e-12
    assert np.abs(page["torch_output"].numpy() - page["output"]).max() < 1e-12
    assert np.abs(page["sdpa_output"].numpy() - page["output"]).max() < 1e-12
    masked_attention = page["masked_attention"]
    rng = np.random.default_rng(12)
    for shape_q, t_k in [((5, 8), 5), ((2, 3, 4, 8), 7)]:
        q, v_width = rng.normal(size=shape_q), 3
        k = rng.normal(size=(*shape_q[:-2], t_k, shape_q[-1]))
        v = rng.normal(size=(*shape_q[:-2], t_k, v_width))
        mask = random_mask(rng, (*shape_q[:-1], t_k))
        want = qkv.attention(q, k, v, mask=mask)
        tq, tk, tv, tm = (torch.from_numpy(a) for a in (q, k, v, mask))
        got_w, got_o = masked_attention(tq, tk, tv, tm)
        assert np.abs(got_w.numpy() - want.weights).max() < 1e-12
        assert np.abs(got_o.numpy() - want.output).max() < 1e-12
        sdpa = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm)
        assert np.abs(sdpa.numpy() - want.output).max() < 1e-12


@pytest.mark.claim("kinds-mask-convention")
def test_true_means_may_attend_in_qkv_sdpa_and_the_masked_fill_idiom():
    rng = np.random.default_rng(13)
    q, k, v = (rng.normal(size=(4, 8)) for _ in range(3))
    mask = qkv.causal_mask(4)
    weights = qkv.attention(q, k, v, mask=mask).weights
    assert (weights[mask] > 0).all() and (weights[~mask] == 0).all()  # True = attend
    tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
    sdpa = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=torch.from_numpy(mask))
    ones_and_zeros = torch.from_numpy(mask.astype(np.int64))  # 1 = keep, 0 = hide
    scores = (tq @ tk.T / 8**0.5).masked_fill(ones_and_zeros == 0, float("-inf"))
    idiom = torch.softmax(scores, dim=-1)
    assert np.abs(idiom.numpy() - weights).max() < 1e-12
    assert np.abs(sdpa.numpy() - weights @ v).max() < 1e-12


@pytest.mark.claim("kinds-fully-masked-qkv")
def test_qkv_refuses_a_row_that_may_attend_to_nothing(page):
    with pytest.raises(ValueError, match=r"query row \(0,\)"):
        qkv.attention(page["Q"], page["K"], page["V"], mask=page["blocked"])


@pytest.mark.claim("kinds-fully-masked-torch")
def test_torch_gives_nan_by_hand_and_zeros_from_sdpa(page):
    assert torch.__version__.startswith("2.13"), "the page names the PyTorch version it shows"
    weights, output = page["masked_attention"](page["q"], page["k"], page["v"],
                                               page["torch_blocked"])
    assert torch.isnan(weights[0]).all() and torch.isnan(output[0]).all()
    assert not torch.isnan(output[1:]).any()
    sdpa = page["sdpa_blocked"]
    assert (sdpa[0] == 0).all()
    np.testing.assert_allclose(sdpa[1:].numpy(), output[1:].numpy(), rtol=1e-12)


def test_the_snippet_uses_the_toy_sentence(page):
    assert page["words"] == toy.SENTENCE
