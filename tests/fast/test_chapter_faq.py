"""Guards for the claims of docs/faq.md (chapter 12)."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
from chapter_snippets import snippet_globals
from hypothesis import given, settings
from hypothesis import strategies as st

import qkv

finite = st.floats(-5, 5, allow_nan=False, allow_infinity=False)


@pytest.mark.claim("faq-sharper-query-lookup")
def test_a_longer_query_turns_the_blend_into_one_lookup():
    g = snippet_globals("faq.py")
    keys, values, query, best = g["keys"], g["values"], g["query"], g["best"]
    assert best == int(np.argmax(keys @ query)) == 2
    top = []
    for sharpness in (1, 4, 16):
        weights, out = qkv.attention(sharpness * query[None], keys, values)
        top.append(weights[0, best])
    assert top[0] < top[1] < top[2]
    weights, out = qkv.attention(16 * query[None], keys, values)
    assert np.argmax(weights[0]) == best
    assert np.abs(weights[0] - np.eye(5)[best]).max() < 5e-4  # one-hot to three decimals
    assert np.linalg.norm(out[0] - values[best]) < 1e-3


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**16))
@pytest.mark.claim("faq-sharper-query-lookup")
def test_scaling_up_a_query_never_lowers_the_best_keys_weight(seed):
    rng = np.random.default_rng(seed)
    keys, query = rng.normal(size=(6, 8)), rng.normal(size=8)
    best = np.argmax(keys @ query)
    weights = [qkv.attention(s * query[None], keys, keys).weights[0, best] for s in (1, 2, 4, 8)]
    assert all(a <= b + 1e-15 for a, b in itertools.pairwise(weights))


@pytest.mark.claim("faq-dk-shared-dv-free")
@pytest.mark.parametrize(("t_q", "t_k", "d_k", "d_v"), [(3, 5, 4, 7), (2, 9, 16, 1), (4, 4, 3, 3)])
def test_d_v_is_free_and_the_weights_stay_tq_by_tk(t_q, t_k, d_k, d_v):
    rng = np.random.default_rng(0)
    weights, out = qkv.attention(rng.normal(size=(t_q, d_k)), rng.normal(size=(t_k, d_k)),
                                 rng.normal(size=(t_k, d_v)))
    assert weights.shape == (t_q, t_k)
    assert out.shape == (t_q, d_v)


@pytest.mark.claim("faq-dk-mismatch-error")
def test_mismatched_d_k_raises_naming_both_shapes():
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 6)), rng.normal(size=(5, 7))
    with pytest.raises(ValueError, match=re.escape("(3, 4)")) as err:
        qkv.attention(q, k, v)
    assert "(5, 6)" in str(err.value) and "d_k" in str(err.value)


@pytest.mark.claim("faq-head-weights-columns")
def test_each_heads_matrices_are_a_block_of_columns():
    g = snippet_globals("faq.py")
    w, x = g["w"], g["x"]
    for name in ("w_q", "w_k", "w_v"):
        wide = getattr(w, name)
        per_head = qkv.split_heads(x @ wide, w.n_heads)
        for h in range(w.n_heads):
            own = x @ wide[:, h * w.d_head:(h + 1) * w.d_head]
            assert np.allclose(per_head[h], own, rtol=0, atol=1e-12)


@pytest.mark.claim("faq-weights-count")
def test_count_of_weights_in_a_512_wide_8_head_layer():
    w = snippet_globals("faq.py")["w"]
    assert (w.d_model, w.n_heads, w.d_head) == (512, 8, 64)  # the layer the page describes
    # one head's W_Q, W_K, W_V are its block of d_head columns (faq-head-weights-columns)
    per_head = [sum(m[:, h * w.d_head:(h + 1) * w.d_head].size for m in (w.w_q, w.w_k, w.w_v))
                for h in range(w.n_heads)]
    assert per_head == [98_304] * 8
    assert w.w_q.size + w.w_k.size + w.w_v.size == 786_432
    assert w.w_o.size == 262_144
    assert w.w_q.size + w.w_k.size + w.w_v.size + w.w_o.size == 1_048_576


@pytest.mark.claim("faq-dk-models")
def test_head_size_of_gpt2_and_llama():
    by_name = {m.name: m for m in qkv.MODELS}
    assert by_name["GPT-2 (124M)"].d_head == 768 // 12 == 64
    for name in ("Llama 2 7B", "Llama 3 8B"):
        assert by_name[name].d_head == 4096 // 32 == 128


@pytest.mark.claim("faq-scale-per-head")
def test_the_layer_scales_by_the_head_size_not_the_model_width():
    g = snippet_globals("faq.py")
    w, x = g["w"], g["x"]
    q = qkv.split_heads(x @ w.w_q, w.n_heads)
    k = qkv.split_heads(x @ w.w_k, w.n_heads)
    layer = qkv.multi_head_attention(x, x, w).weights
    by_head = qkv.softmax(q @ k.swapaxes(-1, -2) / np.sqrt(64))
    by_width = qkv.softmax(q @ k.swapaxes(-1, -2) / np.sqrt(512))
    assert np.allclose(layer, by_head, rtol=0, atol=1e-12)
    assert not np.allclose(layer, by_width, atol=1e-3)


@pytest.mark.claim("faq-cosine-bounded")
@settings(max_examples=60, deadline=None)
@given(t=st.integers(2, 12), d=st.integers(1, 16), seed=st.integers(0, 2**16))
def test_cosine_weights_can_never_be_sharp(t, d, seed):
    cosine_scores = snippet_globals("faq.py")["cosine_scores"]
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(t, d)), rng.normal(size=(t, d))
    scores = cosine_scores(q, k)
    assert np.all(np.abs(scores) <= 1 + 1e-12)
    ceiling = np.exp(1) / (np.exp(1) + (t - 1) * np.exp(-1))  # best key +1, the rest -1
    assert np.all(qkv.softmax(scores) <= ceiling + 1e-12)


@pytest.mark.claim("faq-cosine-ceiling")
def test_the_ceiling_for_six_keys_is_reached_and_is_0_596():
    g = snippet_globals("faq.py")
    assert g["T"] == 6
    ceiling = np.e**2 / (np.e**2 + 5)
    assert round(ceiling, 3) == 0.596
    assert np.isclose(qkv.softmax(g["best_case"]).max(), ceiling, rtol=0, atol=1e-12)
    assert qkv.softmax(g["cos"]).max() < ceiling / 2  # random vectors stay well below it


@pytest.mark.claim("faq-cosine-temperature")
def test_a_temperature_lets_cosine_attention_be_sharp():
    best_case = snippet_globals("faq.py")["best_case"]
    assert qkv.softmax(best_case / 0.05).max() > 0.999


@pytest.mark.claim("faq-magnitude-sharpens")
@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**16), factor=st.floats(1.5, 10))
def test_a_longer_query_sharpens_dot_product_weights_but_not_cosine_weights(seed, factor):
    cosine_scores = snippet_globals("faq.py")["cosine_scores"]
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(1, 8)), rng.normal(size=(6, 8))
    before = qkv.entropy(qkv.softmax(q @ k.T / np.sqrt(8)))[0]
    after = qkv.entropy(qkv.softmax(factor * q @ k.T / np.sqrt(8)))[0]
    assert after < before
    assert np.allclose(qkv.softmax(cosine_scores(q, k)), qkv.softmax(cosine_scores(factor * q, k)),
                       rtol=0, atol=1e-12)


@pytest.mark.claim("faq-cross-shapes")
def test_decoder_reading_encoder_gets_tq_by_tk_weights():
    g = snippet_globals("faq.py")
    weights, out = qkv.cross_attention(g["decoder_states"], g["encoder_states"], g["p"])
    assert weights.shape == (4, 11)
    assert out.shape == (4, g["p"].d_v)
    assert np.allclose(weights.sum(axis=-1), 1.0, rtol=0, atol=1e-12)


@pytest.mark.claim("faq-kv-same-length")
def test_keys_and_values_must_have_the_same_length():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=re.escape("(6, 64)")) as err:
        qkv.attention(rng.normal(size=(6, 64)), rng.normal(size=(6, 64)), rng.normal(size=(7, 64)))
    assert "(7, 64)" in str(err.value)


@given(st.lists(finite, min_size=2, max_size=8))
@pytest.mark.claim("faq-cosine-bounded")
def test_the_ceiling_holds_for_any_scores_in_minus_one_one(raw):
    scores = np.tanh(np.array(raw))  # anything in (-1, 1)
    t = len(scores)
    assert qkv.softmax(scores).max() <= np.e**2 / (np.e**2 + t - 1) + 1e-12
