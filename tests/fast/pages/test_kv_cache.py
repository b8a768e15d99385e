"""Guards for the claims of docs/kv-cache.md (chapter 12): cached decoding equal to uncached,
the memory each token adds and what sharing divides, and the exercise on the decoder's
scores. The checks the chapter points to (three causal layers, the equality in float32,
cross-attention, the work counted) are guarded in test_kv_cache_in_depth.py, beside the page
that shows them.

Each fact is derived here, from qkv's public API on the test's own seeded layers, or from the
models' published configurations, and the page's printed output
(``page_output``) is checked against it: what a reader sees under each block, never the
names the page's snippets define.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prose import check_prose
from support import numbers

import qkv


@pytest.fixture(scope="module")
def shown(page_output):
    return page_output("kv-cache.md")


def _numbers(text: str) -> list[float]:
    return numbers(text.replace(",", ""))  # "22,500,864" is one number


EXACT = 1e-12  # "to within 10^-12": the bound the page states for equal numbers


@pytest.mark.claim("cache-decode-equal", "recap-cache-equal")
@settings(max_examples=30, deadline=None)
@given(
    t=st.integers(1, 12),
    heads=st.sampled_from([(1, 1), (4, 4), (4, 2), (4, 1), (6, 3)]),
    seed=st.integers(0, 2**16),
)
def test_cached_uncached_and_full_causal_attention_agree(t, heads, seed):
    n_heads, n_kv = heads
    w = qkv.MultiHeadWeights.random(np.random.default_rng(seed), 24, n_heads, n_kv)
    x = np.random.default_rng(seed + 1).normal(size=(t, 24))
    cached = qkv.decode_with_cache(x, w)
    uncached = qkv.decode_without_cache(x, w)
    full = qkv.multi_head_attention(x, x, w, mask=qkv.causal_mask(t)).output
    assert np.allclose(cached, uncached, rtol=0, atol=EXACT)
    assert np.allclose(cached, full, rtol=0, atol=EXACT)


@pytest.mark.claim("cache-decode-equal")
def test_the_page_shows_cached_uncached_and_one_pass_agree(shown):
    # the block runs two sections (the set-up and the loops), so it has no section name
    printed = [ln.strip() for b in shown.blocks for ln in b.text.splitlines()]
    for label in ("max |cached - uncached|", "max |cached - one pass|"):
        (line,) = [ln for ln in printed if ln.startswith(label)]
        assert _numbers(line)[-1] <= EXACT
    check_prose("cache-decode-equal", EXACT)


@pytest.mark.claim("cache-grows-per-token")
def test_each_token_adds_the_same_keys_and_values_to_every_layer():
    """Llama 3 8B's cache, measured on real arrays: one float16 KVCache per layer, filled token
    by token; what one token adds, at the first token and the hundredth alike."""
    model = {m.name: m for m in qkv.MODELS}["Llama 3 8B"]
    layers = [
        qkv.KVCache.empty(model.n_kv_heads, model.d_head, dtype=np.float16) for _ in range(model.n_layers)
    ]
    token = np.ones((model.n_kv_heads, 1, model.d_head))  # one token's key (and value) in a layer
    added = []
    for step in range(100):
        before = sum(c.nbytes() for c in layers)
        for cache in layers:
            cache.append(token, token)
        if step in (0, 99):
            added.append(sum(c.nbytes() for c in layers) - before)
    assert added[0] == added[1]  # a fixed amount per token, however long the cache
    numbers_added = sum(c.keys.size + c.values.size for c in layers) // len(layers[0])
    assert added[0] == numbers_added * 2  # float16: 2 bytes a number
    bits = 8 * np.dtype(np.float16).itemsize
    # "(32 layers, 8 key/value heads of 128 numbers) ... 65,536 numbers, 128 KiB in 16-bit"
    check_prose(
        "cache-grows-per-token",
        ...,  # the 3 of "Llama 3 8B" names the model
        model.n_layers,
        model.n_kv_heads,
        model.d_head,
        numbers_added,
        added[0] / 1024,
        bits,
    )


@pytest.mark.claim("cache-sharing-divides")
def test_a_filled_cache_holds_the_formulas_bytes_and_sharing_divides_them():
    n_heads, d_model, t = 8, 64, 16
    x = np.random.default_rng(1).normal(size=(t, d_model))
    held = {}
    for n_kv in (8, 4, 2, 1):  # multi-head, grouped-query twice, multi-query
        w = qkv.MultiHeadWeights.random(np.random.default_rng(n_kv), d_model, n_heads, n_kv)
        cache = qkv.KVCache.empty(n_kv, w.d_head)
        for i in range(t):  # token by token, as decoding fills it
            token = x[i : i + 1]
            cache.append(qkv.split_heads(token @ w.w_k, n_kv), qkv.split_heads(token @ w.w_v, n_kv))
        # the page's formula by hand: 2 (key, value) x 1 layer x KV heads x d_head x tokens
        # x batch 1 x 8 bytes (float64)
        assert cache.nbytes() == 2 * 1 * n_kv * w.d_head * t * 1 * 8
        assert cache.nbytes() == qkv.kv_cache_bytes(1, n_kv, w.d_head, t, bytes_per_value=8)
        held[n_kv] = cache.nbytes()
    assert {n_kv: held[8] / b for n_kv, b in held.items()} == {n: n_heads / n for n in held}
    # the formula's other factors: layers and batch multiply it
    one = qkv.kv_cache_bytes(1, 2, 64, 100)
    assert qkv.kv_cache_bytes(24, 2, 64, 100, batch=3) == 24 * 3 * one


@pytest.mark.claim("cache-exercise-scores")
def test_the_exercise_decoder_scores_40400_with_and_2706800_without_the_cache(shown):
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
    assert shown.values(section, "scores with the cache:") == [with_cache]
    assert shown.values(section, "scores without the cache:") == [without]
    assert shown.values(section, "ratio:") == [round(without / with_cache)]
