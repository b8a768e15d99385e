"""Guards for the claims of docs/kv-cache.md (chapter 12) and its exercise on the decoder's
scores.

Each fact is derived here, from qkv's public API on the test's own seeded layers, from closed
forms, or from the models' published configurations, and the page's printed output
(``page_output``) is checked against it: what a reader sees under each block, never the
names the page's snippets define.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
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


def _printed(shown, start: str) -> str:
    """The one line the page prints that starts with ``start``, whichever block prints it
    (the block of the residual stack runs two snippet sections, so it has no section name)."""
    lines = [ln.strip() for b in shown.blocks for ln in b.text.splitlines() if ln.strip().startswith(start)]
    assert len(lines) == 1, f"docs/kv-cache.md prints {len(lines)} lines starting {start!r}"
    return lines[0]


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
        q = qkv.split_heads(text[t - 1 : t] @ w.w_q, w.n_heads)  # the newest token only
        _, per_head = qkv.attention(q, k, v)
        reused = qkv.merge_heads(per_head) @ w.w_o
        recomputed = qkv.multi_head_attention(text[:t], patches, w).output[-1:]
        assert np.allclose(reused, recomputed, rtol=0, atol=1e-12)


def _keys_and_values(layers, x, attend):
    """The keys and values each layer of a residual stack computes, its attention ``attend``."""
    per_layer = []
    for layer in layers:
        per_layer.append((x @ layer.w_k, x @ layer.w_v))
        x = x + attend(x, layer)
    return per_layer


def _qkv(causal):
    """qkv's multi-head attention of a layer, causal or not."""
    return lambda x, w: (
        qkv.multi_head_attention(x, x, w, mask=qkv.causal_mask(len(x)) if causal else None).output
    )


def _torch(causal):
    """The same layer with PyTorch's scaled_dot_product_attention: the reference."""

    def attend(x, w):
        heads = lambda m: torch.from_numpy(x @ m).unflatten(-1, (w.n_heads, -1)).transpose(0, 1)  # noqa: E731
        out = torch.nn.functional.scaled_dot_product_attention(
            heads(w.w_q), heads(w.w_k), heads(w.w_v), is_causal=causal
        )
        return out.transpose(0, 1).flatten(-2).numpy() @ w.w_o

    return attend


def _moved(layers, tokens, causal, upto):
    """Per layer, how far the keys and values of the first ``upto`` tokens, computed by qkv with
    every token present, are from PyTorch's for those ``upto`` tokens alone."""
    full = _keys_and_values(layers, tokens, _qkv(causal))
    alone = _keys_and_values(layers, tokens[:upto], _torch(causal))
    return [
        max(np.abs(k_f[:upto] - k_a).max(), np.abs(v_f[:upto] - v_a).max())
        for (k_f, v_f), (k_a, v_a) in zip(full, alone, strict=True)
    ]


def _printed_changes(shown, label):
    """The page's row of changes, layer by layer: "causal   layer 1: 0.0e+00  layer 2: ..."."""
    found = _numbers(_printed(shown, label))
    assert found[0::2] == [1, 2, 3]  # the layer numbers; the changes sit between them
    return found[1::2]


EXACT = 1e-12  # "to within 10^-12": the bound the page states for equal numbers
DEPTHS, LENGTH = [1, 2, 5], 12  # the stacks and the sequence the test checks


@pytest.mark.claim("cache-earlier-kv-unchanged", "recap-cache-equal")
@pytest.mark.parametrize("depth", DEPTHS)
def test_earlier_keys_and_values_never_change_in_a_causal_stack(depth):
    rng = np.random.default_rng(depth)
    layers = [qkv.MultiHeadWeights.random(rng, 16, 4) for _ in range(depth)]
    tokens = rng.normal(size=(LENGTH, 16))
    for t in range(1, LENGTH):  # every prefix, at every layer
        assert max(_moved(layers, tokens, causal=True, upto=t)) <= EXACT, f"first {t} tokens"


@pytest.mark.claim("cache-earlier-kv-unchanged")
def test_the_page_shows_a_seventh_token_leaving_three_causal_layers_unchanged(shown):
    assert all(c <= EXACT for c in _printed_changes(shown, "causal"))
    # "to within 10^-12; ... every prefix of a 12-token sequence through up to 5 layers"
    check_prose("cache-earlier-kv-unchanged", EXACT, LENGTH, max(DEPTHS))


@pytest.mark.claim("cache-no-mask-changes")
def test_without_the_mask_deeper_keys_and_values_change(shown):
    for seed in range(3):
        rng = np.random.default_rng(seed)
        layers = [qkv.MultiHeadWeights.random(rng, 32, 4) for _ in range(3)]
        changes = _moved(layers, rng.normal(size=(7, 32)), causal=False, upto=6)
        assert changes[0] <= 1e-12  # layer 1 projects the raw input: nothing to change it yet
        assert all(c > 1e-3 for c in changes[1:])  # from layer 2 on, the new token leaks back
    first, *deeper = _printed_changes(shown, "no mask")
    assert first <= 1e-12 and all(c > 1e-3 for c in deeper)


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
    for label in ("max |cached - uncached|", "max |cached - one pass|"):
        assert _numbers(shown.line("kv_cache.py:decode", label))[-1] <= EXACT
    check_prose("cache-decode-equal", EXACT)


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


def _work_table(shown):
    """The page's table of totals: T -> (projections cached, uncached, scores cached, uncached)."""
    rows = [_numbers(line) for line in shown["kv_cache.py:work"].splitlines() if re.match(r"\s*\d", line)]
    return {int(t): rest for t, *rest in rows}


@pytest.mark.claim("cache-projections-closed-form", "cache-scores-closed-form")
def test_the_pages_table_follows_the_closed_forms(shown):
    h = 4  # "4 heads here"
    table = _work_table(shown)
    assert list(table) == [4, 16, 64, 256]
    for t, row in table.items():
        assert row == [t, t * (t + 1) // 2, h * t * (t + 1) // 2, h * t * (t + 1) * (2 * t + 1) // 6]


@pytest.mark.claim("cache-growth-orders")
def test_the_pages_table_grows_about_4_16_16_and_64_times_from_64_to_256_tokens(shown):
    table = _work_table(shown)
    short, long = 64, 256  # two rows of the printed table
    ratios = [big / small for big, small in zip(table[long], table[short], strict=True)]
    powers = [1, 2, 2, 3]  # linear, quadratic, quadratic, cubic
    factor = long / short
    for ratio, power in zip(ratios, powers, strict=True):  # close to factor ** power
        assert abs(np.log(ratio) / np.log(factor) - power) < 0.02
    check_prose(
        "cache-growth-orders", short, long, factor, *ratios, *[x for power in powers for x in (factor, power)]
    )


@pytest.mark.claim("cache-table-last-token")
def test_the_last_token_at_256(shown):
    t, h = 256, 4  # the table's last row; "4 heads here"
    # step T: 1 key and value with the cache, all T without; h x T scores, or the h x T x T square
    last = [1, t, h * t, h * t * t]
    printed = _numbers(shown.line("kv_cache.py:work", "the last token alone at T="))
    assert printed == [t, *last]
    check_prose("cache-table-last-token", t, last[0], last[2], last[1], last[3])


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


@pytest.mark.claim("cache-window-latent-shrink")
def test_a_window_caps_the_cache_and_a_latent_cache_is_smaller_than_every_heads():
    rng = np.random.default_rng(5)
    t, d, window = 12, 8, 4
    q, k, v = rng.normal(size=(3, t, d))
    full = qkv.attention(q, k, v, mask=qkv.sliding_window_mask(t, window)).output
    kept_k, kept_v = np.zeros((0, d)), np.zeros((0, d))
    for i in range(t):  # a rolling cache: append, then drop what falls out of the window
        kept_k = np.vstack([kept_k, k[i : i + 1]])[-window:]
        kept_v = np.vstack([kept_v, v[i : i + 1]])[-window:]
        assert len(kept_k) == min(i + 1, window)  # it stops growing at the window
        np.testing.assert_allclose(qkv.attention(q[i : i + 1], kept_k, kept_v).output[0], full[i], atol=1e-12)
    sizes = [qkv.kv_cache_bytes(32, 8, 128, n, window=4096) for n in (1000, 4096, 8192, 32768)]
    assert sizes[0] < sizes[1] == sizes[2] == sizes[3]
    for m in qkv.LATENT_MODELS:  # one latent and one RoPE key per token and layer, 2 bytes each
        assert m.cache_bytes(1) == m.n_layers * (m.kv_lora_rank + m.qk_rope_head_dim) * 2
        assert m.qk_rope_head_dim < m.kv_lora_rank  # "one small RoPE key"
        assert m.cache_bytes(1) < qkv.kv_cache_bytes(m.n_layers, m.n_heads, m.d_head, 1)


ROUNDING_UNITS = 10  # "under 10 rounding units": fixed before the variations were run


@pytest.mark.claim("cache-decode-variations")
def test_cache_agrees_to_rounding_in_float32_with_shared_heads_and_long_sequences(shown):
    worst = 0.0
    for n_kv in (4, 2, 1):
        for dtype in (np.float64, np.float32):
            for t in (10, 200):
                rng = np.random.default_rng(7 * n_kv + t)  # the test's own layers
                w64 = qkv.MultiHeadWeights.random(rng, 32, 4, n_kv_heads=n_kv)
                w = qkv.MultiHeadWeights(
                    *(a.astype(dtype) for a in (w64.w_q, w64.w_k, w64.w_v, w64.w_o)), 4, n_kv
                )
                x = rng.normal(size=(t, 32)).astype(dtype)
                cached = qkv.decode_with_cache(x, w)
                assert cached.dtype == dtype  # the cache keeps the inputs' type
                full = qkv.multi_head_attention(x, x, w, mask=qkv.causal_mask(t)).output
                gaps = [np.abs(cached - qkv.decode_without_cache(x, w)).max(), np.abs(cached - full).max()]
                units = max(gaps) / (np.finfo(dtype).eps * np.abs(full).max())
                assert units < ROUNDING_UNITS, (n_kv, dtype, t, units)
                worst = max(worst, units)
    printed = [_numbers(line)[-1] for line in shown["kv_cache.py:decode_variations"].splitlines()[1:]]
    assert len(printed) == 12 and max(printed) < ROUNDING_UNITS
    # The sentence states the bound, not the largest gap printed: that depends on the order
    # of the sums, which depends on the BLAS kernel and threads (3.5 here, 3.1 on another CPU).
    check_prose("cache-decode-variations", ROUNDING_UNITS, 4, 2, 1, 10, 200)
    assert worst > 0  # the gaps are real rounding, not zero by construction


# ---- chapter 12 and its deep dive ------------------------------------------------------------


@pytest.fixture(scope="module")
def kv_cache(page_output):
    return page_output("kv-cache.md")


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
