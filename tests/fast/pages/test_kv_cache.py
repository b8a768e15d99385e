"""Guards for the claims of docs/kv-cache.md (chapter 12): cached decoding equal to uncached,
the memory each token adds and what sharing divides, and the exercise on the decoder's
scores; and the closed forms of the work counted (their sentences are on the deep dive, but
these two tests read no block, and tests/fast/test_guards_fail_when_broken.py imports them
from here). The checks the chapter points to that read the deep dive's blocks (three causal
layers, the equality in float32, cross-attention, the printed work table) are guarded in
test_kv_cache_in_depth.py, beside the page that shows them.

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


def _weights(seed, d_model=16, n_heads=4, n_kv_heads=None):
    return qkv.MultiHeadWeights.random(np.random.default_rng(seed), d_model, n_heads, n_kv_heads)


def _counts(t, n_heads=4, n_kv_heads=None, seed=0):
    w = _weights(seed, n_heads=n_heads, n_kv_heads=n_kv_heads)
    x = np.random.default_rng(seed + 1).normal(size=(t, w.d_model))
    cached, uncached = qkv.WorkCounter(), qkv.WorkCounter()
    qkv.decode_with_cache(x, w, cached)
    qkv.decode_without_cache(x, w, uncached)
    return cached, uncached


LENGTHS = [1, 2, 5, 16, 40]  # sequences the counters are read on


@pytest.mark.claim("cache-projections-closed-form", "recap-cache-linear")
def test_key_value_projection_counts():
    for t in LENGTHS:
        cached, uncached = _counts(t)
        assert cached.kv_projections == [1] * t, t  # constant per token
        assert cached.total_kv_projections == t, t  # linear in T
        assert uncached.kv_projections == list(range(1, t + 1)), t  # the whole prefix, again
        # 1 + 2 + ... + T, paired from both ends: (T + 1) * T / 2
        assert uncached.total_kv_projections == t * (t + 1) // 2, t
    # "exactly 1 key and value ...; 1 + 2 + ... + T = T(T+1)/2": the first terms
    check_prose(
        "cache-projections-closed-form", cached.kv_projections[-1], *uncached.kv_projections[:2], ..., ...
    )


@pytest.mark.claim("cache-scores-closed-form", "recap-cache-linear")
@pytest.mark.parametrize("n_heads", [1, 4])
def test_score_counts(n_heads):
    for t in LENGTHS:
        cached, uncached = _counts(t, n_heads=n_heads)
        steps = range(1, t + 1)
        assert cached.scores == [n_heads * s for s in steps], t  # step s: one query, s keys
        assert cached.total_scores == n_heads * t * (t + 1) // 2, t
        assert uncached.scores == [n_heads * s * s for s in steps], t  # step s: the full s x s
        # sum of squares: 1 + 4 + ... + T^2 = T (T + 1) (2T + 1) / 6
        assert uncached.total_scores == n_heads * t * (t + 1) * (2 * t + 1) // 6, t
    # "h(1 + 4 + ... + T^2)": the first terms per head, and the square's exponent
    first, second = (s // n_heads for s in uncached.scores[:2])
    squared = np.log(second) / np.log(2)  # step 2 computes 2^2 scores per head
    check_prose("cache-scores-closed-form", ..., ..., first, second, squared, ..., ..., ...)


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
