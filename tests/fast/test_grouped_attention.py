"""qkv.grouped_attention (what multi_head_attention and qkv.smollm2 attend with) and a
KVCache that keeps its dtype."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import qkv


def _heads(seed, n_heads, n_kv_heads, t_q=5, t_k=7, d=4, lead=()):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(*lead, n_heads, t_q, d))
    k = rng.normal(size=(*lead, n_kv_heads, t_k, d))
    v = rng.normal(size=(*lead, n_kv_heads, t_k, d + 1))  # d_v differs from d_k on purpose
    return q, k, v


@pytest.mark.parametrize(("n_heads", "n_kv_heads"), [(4, 4), (6, 3), (9, 3), (4, 1)])
def test_each_query_head_attends_with_its_groups_keys(n_heads, n_kv_heads):
    q, k, v = _heads(0, n_heads, n_kv_heads)
    weights, out = qkv.grouped_attention(q, k, v)
    group = n_heads // n_kv_heads
    for h in range(n_heads):  # one head at a time, by qkv.attention alone
        alone = qkv.attention(q[h], k[h // group], v[h // group])
        np.testing.assert_allclose(weights[h], alone.weights, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(out[h], alone.output, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize(("n_heads", "n_kv_heads"), [(8, 2), (9, 3)])
def test_grouped_attention_equals_torch_sdpa_with_gqa(n_heads, n_kv_heads):
    q, k, v = _heads(1, n_heads, n_kv_heads, t_q=6, t_k=6, lead=(2,))
    mask = qkv.causal_mask(6)
    _, ours = qkv.grouped_attention(q, k, v, mask=mask)
    theirs = torch.nn.functional.scaled_dot_product_attention(
        *(torch.from_numpy(a) for a in (q, k, v)),
        attn_mask=torch.from_numpy(mask),
        enable_gqa=True,
    ).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


def test_the_mask_is_shared_by_every_head():
    q, k, v = _heads(2, 6, 2, t_q=4, t_k=4)
    weights = qkv.grouped_attention(q, k, v, mask=qkv.causal_mask(4)).weights
    assert weights.shape == (6, 4, 4)
    assert (np.triu(weights, k=1) == 0).all()


def test_multi_head_attention_is_projections_then_grouped_attention():
    rng = np.random.default_rng(3)
    w = qkv.MultiHeadWeights.random(rng, d_model=12, n_heads=6, n_kv_heads=2)
    x = rng.normal(size=(5, 12))
    layer = qkv.multi_head_attention(x, x, w, mask=qkv.causal_mask(5))
    by_hand = np.zeros((5, 12))
    for h in range(6):  # per head, with the key/value columns of its group
        cols_q = slice(2 * h, 2 * h + 2)
        cols_kv = slice(2 * (h // 3), 2 * (h // 3) + 2)
        scores = (x @ w.w_q[:, cols_q]) @ (x @ w.w_k[:, cols_kv]).T / np.sqrt(2)
        scores[np.triu_indices(5, 1)] = -np.inf
        p = np.exp(scores - scores.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        np.testing.assert_allclose(layer.weights[h], p, rtol=1e-12)
        by_hand += (p @ (x @ w.w_v[:, cols_kv])) @ w.w_o[cols_q]
    np.testing.assert_allclose(layer.output, by_hand, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    ("shapes", "message"),
    [
        (((5, 3, 4), (2, 3, 4), (2, 3, 4)), "multiple of n_kv_heads"),
        (((3, 4), (3, 4), (3, 4)), "n_heads, Tq, d_head"),
        (((4, 3, 4), (2, 3, 4), (1, 3, 4)), "n_kv_heads"),
    ],
)
def test_bad_head_counts_are_refused(shapes, message):
    q, k, v = (np.zeros(s) for s in shapes)
    with pytest.raises(ValueError, match=message):
        qkv.grouped_attention(q, k, v)


def test_a_float32_cache_stays_float32():
    cache = qkv.KVCache.empty(n_kv_heads=3, d_head=64, dtype=np.float32)
    for _ in range(5):
        cache.append(np.ones((3, 1, 64)), np.ones((3, 1, 64)))  # float64 in
    assert cache.keys.dtype == cache.values.dtype == np.float32
    assert cache.nbytes() == qkv.kv_cache_bytes(1, 3, 64, 5, bytes_per_value=4)
    assert cache.nbytes() == 2 * 3 * 64 * 5 * 4
