"""Guards for the claims of docs/kv-cache.md (chapter 11)."""

from __future__ import annotations

import numpy as np
import pytest
from chapter_snippets import snippet_globals
from hypothesis import given, settings
from hypothesis import strategies as st

import qkv

# The published configurations, field by field as each model's config.json states them,
# kept here as an independent record to check qkv.MODELS against.
# (layers, query heads, key/value heads, hidden size)
PUBLISHED = {
    # openai-community/gpt2: n_layer, n_head, n_embd (no grouped-query attention)
    "GPT-2 (124M)": (12, 12, 12, 768),
    # meta-llama/Llama-2-7b-hf: num_hidden_layers, num_attention_heads,
    # num_key_value_heads, hidden_size
    "Llama 2 7B": (32, 32, 32, 4096),
    "Llama 3 8B": (32, 32, 8, 4096),  # meta-llama/Meta-Llama-3-8B
    "Mistral 7B": (32, 32, 8, 4096),  # mistralai/Mistral-7B-v0.1
    "Llama 2 70B": (80, 64, 8, 8192),  # meta-llama/Llama-2-70b-hf
    # tiiuae/falcon-7b: num_hidden_layers, num_attention_heads, "multi_query": true
    "Falcon 7B": (32, 71, 1, 4544),
}


def _weights(seed, d_model=16, n_heads=4, n_kv_heads=None):
    return qkv.MultiHeadWeights.random(np.random.default_rng(seed), d_model, n_heads, n_kv_heads)


def _counts(t, n_heads=4, n_kv_heads=None, seed=0):
    w = _weights(seed, n_heads=n_heads, n_kv_heads=n_kv_heads)
    x = np.random.default_rng(seed + 1).normal(size=(t, w.d_model))
    cached, uncached = qkv.WorkCounter(), qkv.WorkCounter()
    qkv.decode_with_cache(x, w, cached)
    qkv.decode_without_cache(x, w, uncached)
    return cached, uncached


@pytest.mark.claim("cache-cross-computed-once")
def test_cross_attention_keys_and_values_computed_once_serve_every_step():
    rng = np.random.default_rng(11)
    w = qkv.MultiHeadWeights.random(rng, d_model=32, n_heads=4)
    patches = rng.normal(size=(9, 32))  # the fixed sequence being read
    text = rng.normal(size=(5, 32))  # the decoder's tokens, one per step
    # once, before the first step: (heads, 9, d_head) each
    k = qkv.split_heads(patches @ w.w_k, w.n_heads)
    v = qkv.split_heads(patches @ w.w_v, w.n_heads)
    for t in range(1, len(text) + 1):
        q = qkv.split_heads(text[t - 1:t] @ w.w_q, w.n_heads)  # the newest token only
        _, per_head = qkv.attention(q, k, v)
        reused = qkv.merge_heads(per_head) @ w.w_o
        recomputed = qkv.multi_head_attention(text[:t], patches, w).output[-1:]
        assert np.allclose(reused, recomputed, rtol=0, atol=1e-12)


@pytest.mark.claim("cache-earlier-kv-unchanged", "recap-cache-equal")
@pytest.mark.parametrize("depth", [1, 2, 5])
def test_earlier_keys_and_values_never_change_in_a_causal_stack(depth):
    rng = np.random.default_rng(depth)
    layers = [qkv.MultiHeadWeights.random(rng, 16, 4) for _ in range(depth)]
    tokens = rng.normal(size=(12, 16))
    keys_and_values = snippet_globals("kv_cache.py")["keys_and_values"]  # the page's code
    final = keys_and_values(layers, tokens, causal=True)
    for t in range(1, 12):  # every prefix, at every layer
        prefix = keys_and_values(layers, tokens[:t], causal=True)
        for (k_p, v_p), (k_f, v_f) in zip(prefix, final, strict=True):
            assert np.allclose(k_p, k_f[:t], rtol=0, atol=1e-12)
            assert np.allclose(v_p, v_f[:t], rtol=0, atol=1e-12)
    # and the page's own three-layer example
    g = snippet_globals("kv_cache.py")
    before = g["keys_and_values"](g["layers"], g["tokens"][:6], True)
    after = g["keys_and_values"](g["layers"], g["tokens"], True)
    for (kb, vb), (ka, va) in zip(before, after, strict=True):
        assert np.allclose(kb, ka[:6], rtol=0, atol=1e-12)
        assert np.allclose(vb, va[:6], rtol=0, atol=1e-12)


@pytest.mark.claim("cache-no-mask-changes")
def test_without_the_mask_deeper_keys_and_values_change():
    g = snippet_globals("kv_cache.py")
    before = g["keys_and_values"](g["layers"], g["tokens"][:6], False)
    after = g["keys_and_values"](g["layers"], g["tokens"], False)
    changes = [max(np.abs(ka[:6] - kb).max(), np.abs(va[:6] - vb).max())
               for (kb, vb), (ka, va) in zip(before, after, strict=True)]
    assert changes[0] <= 1e-12  # layer 1 projects the raw input: nothing to change it yet
    assert all(c > 1e-3 for c in changes[1:])  # from layer 2 on, the new token leaks back


@pytest.mark.claim("cache-decode-equal", "recap-cache-equal")
@settings(max_examples=30, deadline=None)
@given(t=st.integers(1, 12), heads=st.sampled_from([(1, 1), (4, 4), (4, 2), (4, 1), (6, 3)]),
       seed=st.integers(0, 2**16))
def test_cached_uncached_and_full_causal_attention_agree(t, heads, seed):
    n_heads, n_kv = heads
    w = qkv.MultiHeadWeights.random(np.random.default_rng(seed), 24, n_heads, n_kv)
    x = np.random.default_rng(seed + 1).normal(size=(t, 24))
    cached = qkv.decode_with_cache(x, w)
    uncached = qkv.decode_without_cache(x, w)
    full = qkv.multi_head_attention(x, x, w, mask=qkv.causal_mask(t)).output
    assert np.allclose(cached, uncached, rtol=0, atol=1e-12)
    assert np.allclose(cached, full, rtol=0, atol=1e-12)


@pytest.mark.claim("cache-projections-closed-form", "recap-cache-linear")
@pytest.mark.parametrize("t", [1, 2, 5, 16, 40])
def test_key_value_projection_counts(t):
    cached, uncached = _counts(t)
    assert cached.kv_projections == [1] * t  # constant per token
    assert cached.total_kv_projections == t  # linear in T
    assert uncached.kv_projections == list(range(1, t + 1))  # the whole prefix, again
    # 1 + 2 + ... + T, paired from both ends: (T + 1) * T / 2
    assert uncached.total_kv_projections == sum(range(1, t + 1)) == t * (t + 1) // 2


@pytest.mark.claim("cache-scores-closed-form", "recap-cache-linear")
@pytest.mark.parametrize("t", [1, 2, 5, 16, 40])
@pytest.mark.parametrize("n_heads", [1, 4])
def test_score_counts(t, n_heads):
    cached, uncached = _counts(t, n_heads=n_heads)
    steps = range(1, t + 1)
    assert cached.scores == [n_heads * s for s in steps]  # step s: one query, s keys
    assert cached.total_scores == n_heads * t * (t + 1) // 2
    assert uncached.scores == [n_heads * s * s for s in steps]  # step s: the full s x s
    # sum of squares: 1 + 4 + ... + T^2 = T (T + 1) (2T + 1) / 6
    assert uncached.total_scores == n_heads * sum(s * s for s in steps)
    assert uncached.total_scores == n_heads * t * (t + 1) * (2 * t + 1) // 6


@pytest.mark.claim("cache-growth-orders", "recap-cache-linear")
def test_growth_orders_measured_from_the_counters():
    small, big = _counts(64), _counts(256)  # T grows 4x
    ratios = [big[0].total_kv_projections / small[0].total_kv_projections,
              big[0].total_scores / small[0].total_scores,
              big[1].total_kv_projections / small[1].total_kv_projections,
              big[1].total_scores / small[1].total_scores]
    # linear -> 4x, quadratic -> about 16x, cubic -> about 64x
    assert ratios[0] == 4
    assert 15 < ratios[1] < 17 and 15 < ratios[2] < 17
    assert 60 < ratios[3] < 65


@pytest.mark.claim("cache-table-last-token")
def test_the_last_token_at_256():
    cached, uncached = _counts(256)
    assert (cached.kv_projections[-1], uncached.kv_projections[-1]) == (1, 256)
    assert (cached.scores[-1], uncached.scores[-1]) == (4 * 256, 4 * 256 * 256)


@pytest.mark.claim("cache-models-published")
def test_models_match_their_published_configs():
    assert {m.name for m in qkv.MODELS} == set(PUBLISHED)
    for m in qkv.MODELS:
        layers, heads, kv_heads, hidden = PUBLISHED[m.name]
        assert (m.n_layers, m.n_heads, m.n_kv_heads) == (layers, heads, kv_heads)
        assert m.d_head * m.n_heads == hidden


@pytest.mark.claim("cache-bytes-formula", "recap-gqa-shrink")
@pytest.mark.parametrize("n_kv_heads", [8, 2, 1])
def test_formula_equals_the_bytes_of_a_real_cache(n_kv_heads):
    w = qkv.MultiHeadWeights.random(np.random.default_rng(0), 64, 8, n_kv_heads)
    x = np.random.default_rng(1).normal(size=(16, 64))
    cache = qkv.KVCache.empty(n_kv_heads, w.d_head)
    for t in range(len(x)):  # token by token, as decoding fills it
        cache.append(qkv.split_heads(x[t:t + 1] @ w.w_k, n_kv_heads),
                     qkv.split_heads(x[t:t + 1] @ w.w_v, n_kv_heads))
    assert cache.keys.shape == (n_kv_heads, 16, w.d_head)
    assert cache.nbytes() == qkv.kv_cache_bytes(1, n_kv_heads, w.d_head, 16, bytes_per_value=8)
    # one key and one value, of d_head numbers each, per layer, KV head and token
    by_formula = qkv.kv_cache_bytes(3, 5, 7, 11, bytes_per_value=2, batch=13)
    assert by_formula == 2 * 3 * 5 * 7 * 11 * 2 * 13


def _published_bytes(name, n_tokens, heads_for_cache=None):
    layers, heads, kv_heads, hidden = PUBLISHED[name]
    d_head = hidden // heads
    kept = kv_heads if heads_for_cache is None else heads_for_cache
    return 2 * layers * kept * d_head * n_tokens * 2  # key + value, 2 bytes each


@pytest.mark.claim("cache-memory-table")
def test_memory_per_token_and_at_4096_from_the_published_configs():
    for m in qkv.MODELS:
        for n in (1, 4096):
            assert qkv.kv_cache_bytes(m.n_layers, m.n_kv_heads, m.d_head, n) == \
                _published_bytes(m.name, n)
    # The numbers the prose quotes, worked by hand: 2 * 32 * 32 * 128 * 2 = 2**19 bytes.
    assert _published_bytes("Llama 2 7B", 1) == 512 * 2**10
    assert _published_bytes("Llama 2 7B", 4096) == 2 * 2**30
    assert _published_bytes("Llama 3 8B", 1) == 128 * 2**10
    assert _published_bytes("Falcon 7B", 1) == 8 * 2**10
    assert _published_bytes("Llama 2 70B", 4096) == 1.25 * 2**30


def _llama2_7b_parameters():
    """Parameter count of Llama 2 7B from the fields of its config.json."""
    vocab, hidden, mlp, layers = 32000, 4096, 11008, 32  # vocab_size, hidden_size,
    # intermediate_size, num_hidden_layers; tie_word_embeddings is false
    per_layer = 4 * hidden * hidden + 3 * hidden * mlp + 2 * hidden  # attention, MLP, 2 norms
    return 2 * vocab * hidden + layers * per_layer + hidden  # embeddings, head, final norm


@pytest.mark.claim("cache-batch-64gib")
def test_a_batch_of_32_llama2_7b_sequences_at_4096_tokens():
    cache = qkv.kv_cache_bytes(32, 32, 128, 4096, batch=32)
    assert cache == 64 * 2**30
    assert _llama2_7b_parameters() == 6_738_415_616  # the "7B": 6.74 billion
    weights = 2 * _llama2_7b_parameters()  # 16-bit
    assert round(weights / 2**30, 1) == 12.6
    assert round(cache / weights) == 5


@pytest.mark.claim("cache-gqa-shrink", "recap-gqa-shrink")
def test_shrink_factor_is_heads_over_kv_heads():
    expected = {"Llama 3 8B": 4, "Mistral 7B": 4, "Llama 2 70B": 8, "Falcon 7B": 71,
                "GPT-2 (124M)": 1, "Llama 2 7B": 1}
    for m in qkv.MODELS:
        as_multi_head = qkv.kv_cache_bytes(m.n_layers, m.n_heads, m.d_head, 4096)
        actual = qkv.kv_cache_bytes(m.n_layers, m.n_kv_heads, m.d_head, 4096)
        assert as_multi_head / actual == m.n_heads / m.n_kv_heads == expected[m.name]


@pytest.mark.claim("cache-gqa-same-scores")
def test_sharing_key_value_heads_shrinks_the_cache_not_the_score_work():
    x = np.random.default_rng(0).normal(size=(16, 64))
    scores, projected_width = set(), {}
    for n_kv in (8, 4, 2, 1):
        w = qkv.MultiHeadWeights.random(np.random.default_rng(n_kv), 64, 8, n_kv)
        counter = qkv.WorkCounter()
        qkv.decode_with_cache(x, w, counter)
        scores.add(counter.total_scores)
        projected_width[n_kv] = w.w_k.shape[1] + w.w_v.shape[1]
    assert scores == {8 * 16 * 17 // 2}  # every query head still scores every cached key
    assert projected_width == {n: 2 * n * 8 for n in (8, 4, 2, 1)}  # K/V width shrinks
