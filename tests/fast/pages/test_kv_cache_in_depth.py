"""Guards for the claims of docs/kv-cache-in-depth.md, the KV cache of chapter 12 measured:
earlier keys and values through three causal layers, the cache's equality in float32 and with
shared heads, cross-attention's keys computed once, the work counted while decoding; then
its memory: the published configurations, the bytes a cache holds, and what sharing key/value
heads divides; the sliding windows and latent caches, with the configurations
typed here again from the papers as an independent record; and the exercises.

Each fact is derived here, from qkv's public API, from closed forms, or from the models'
published configurations, and the page's printed output (``page_output``) is checked
against it.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from prose import check_prose
from support import numbers

import qkv
from qkv import smollm2

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


@pytest.fixture(scope="module")
def shown(page_output):
    return page_output("kv-cache-in-depth.md")


def _numbers(text: str) -> list[float]:
    return numbers(text.replace(",", ""))  # "22,500,864" is one number


# ---- the chapter's checks, in full ------------------------------------------------------


def _printed(shown, start: str) -> str:
    """The one line the page prints that starts with ``start``, whichever block prints it
    (the block of the residual stack runs two snippet sections, so it has no section name)."""
    lines = [ln.strip() for b in shown.blocks for ln in b.text.splitlines() if ln.strip().startswith(start)]
    assert len(lines) == 1, f"docs/kv-cache-in-depth.md prints {len(lines)} lines starting {start!r}"
    return lines[0]


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


def _work_table(shown):
    """The page's table of totals: T -> (projections cached, uncached, scores cached, uncached)."""
    rows = [
        _numbers(line) for line in shown["kv_cache_checks.py:work"].splitlines() if re.match(r"\s*\d", line)
    ]
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
    printed = _numbers(shown.line("kv_cache_checks.py:work", "the last token alone at T="))
    assert printed == [t, *last]
    check_prose("cache-table-last-token", t, last[0], last[2], last[1], last[3])


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
    printed = [_numbers(line)[-1] for line in shown["kv_cache_checks.py:decode_variations"].splitlines()[1:]]
    assert len(printed) == 12 and max(printed) < ROUNDING_UNITS
    # The sentence states the bound, not the largest gap printed: that depends on the order
    # of the sums, which depends on the BLAS kernel and threads (3.5 here, 3.1 on another CPU).
    check_prose("cache-decode-variations", ROUNDING_UNITS, 4, 2, 1, 10, 200)
    assert worst > 0  # the gaps are real rounding, not zero by construction


# ---- the memory ------------------------------------------------------------------------------


@pytest.mark.claim("cache-models-published")
def test_models_match_their_published_configs():
    assert {m.name for m in qkv.MODELS} == set(PUBLISHED)
    for m in qkv.MODELS:
        layers, heads, kv_heads, hidden = PUBLISHED[m.name]
        assert (m.n_layers, m.n_heads, m.n_kv_heads) == (layers, heads, kv_heads)
        assert m.d_head * m.n_heads == hidden


def _memory_row(shown, name):
    """The page's memory table row of a model, after its name: layers, heads, KV heads,
    d_head, KiB per token, MiB at 4,096 tokens."""
    return _numbers(shown.line("kv_cache_in_depth.py:memory", name + " ")[len(name) :])


@pytest.mark.claim("cache-models-published")
def test_the_pages_memory_table_lists_the_published_configs(shown):
    for name, (layers, heads, kv_heads, hidden) in PUBLISHED.items():
        assert _memory_row(shown, name)[:4] == [layers, heads, kv_heads, hidden // heads]


@pytest.mark.claim("cache-bytes-formula", "recap-gqa-shrink")
@pytest.mark.parametrize("n_kv_heads", [8, 2, 1])
def test_formula_equals_the_bytes_of_a_real_cache(n_kv_heads):
    w = qkv.MultiHeadWeights.random(np.random.default_rng(0), 64, 8, n_kv_heads)
    x = np.random.default_rng(1).normal(size=(16, 64))
    cache = qkv.KVCache.empty(n_kv_heads, w.d_head)
    for t in range(len(x)):  # token by token, as decoding fills it
        cache.append(
            qkv.split_heads(x[t : t + 1] @ w.w_k, n_kv_heads),
            qkv.split_heads(x[t : t + 1] @ w.w_v, n_kv_heads),
        )
    assert cache.keys.shape == (n_kv_heads, 16, w.d_head)
    assert cache.nbytes() == qkv.kv_cache_bytes(1, n_kv_heads, w.d_head, 16, bytes_per_value=8)
    check_prose("cache-bytes-formula", cache.keys.itemsize)  # float64: 8 bytes per number
    # one key and one value, of d_head numbers each, per layer, KV head and token
    by_formula = qkv.kv_cache_bytes(3, 5, 7, 11, bytes_per_value=2, batch=13)
    assert by_formula == 2 * 3 * 5 * 7 * 11 * 2 * 13


def _grouped_rows(shown):
    """The page's rows "n_kv_heads=8: keys (8, 16, 8), 16,384 bytes (formula 16,384),
    scores 1,088" as n_kv -> (keys shape, bytes held, bytes by formula, scores)."""
    rows = {}
    for line in shown["kv_cache_in_depth.py:grouped"].splitlines():
        n_kv, *shape, held, formula, scores = _numbers(line)
        rows[int(n_kv)] = (tuple(int(n) for n in shape), held, formula, scores)
    return rows


@pytest.mark.claim("cache-bytes-formula")
def test_the_page_shows_a_filled_cache_holding_what_the_formula_says(shown):
    rows = _grouped_rows(shown)
    assert list(rows) == [8, 2, 1]
    for n_kv, ((heads, tokens, d_head), held, formula, _) in rows.items():
        assert heads == n_kv
        # a key and a value of d_head float64 numbers per KV head and token, one layer
        assert (
            held
            == formula
            == 2 * n_kv * tokens * d_head * 8
            == qkv.kv_cache_bytes(1, n_kv, d_head, tokens, bytes_per_value=8)
        )


def _published_bytes(name, n_tokens, heads_for_cache=None):
    layers, heads, kv_heads, hidden = PUBLISHED[name]
    d_head = hidden // heads
    kept = kv_heads if heads_for_cache is None else heads_for_cache
    return 2 * layers * kept * d_head * n_tokens * 2  # key + value, 2 bytes each


@pytest.mark.claim("cache-memory-table")
def test_memory_per_token_and_at_4096_from_the_published_configs(shown):
    for m in qkv.MODELS:
        for n in (1, 4096):
            assert qkv.kv_cache_bytes(m.n_layers, m.n_kv_heads, m.d_head, n) == _published_bytes(m.name, n)
    # The numbers the prose quotes, from the published configurations
    layers, heads, kv_heads, hidden = PUBLISHED["Llama 2 7B"]
    context, kib, gib = 4096, 2**10, 2**30
    per_token = _published_bytes("Llama 2 7B", 1)
    assert per_token == 2 * layers * kv_heads * (hidden // heads) * 2  # K and V, 2 bytes
    check_prose(
        "cache-memory-table",
        ...,
        len(("key", "value")),
        layers,
        kv_heads,
        hidden // heads,
        np.dtype(np.float16).itemsize,
        per_token,
        per_token / kib,
        _published_bytes("Llama 2 7B", context) / gib,
        context,
        ...,
        _published_bytes("Llama 3 8B", 1) / kib,
        ...,
        _published_bytes("Llama 2 70B", context) / gib,
        context,
        _published_bytes("Falcon 7B", 1) / kib,
    )  # ...: the model names' numbers
    for name in PUBLISHED:  # the page's table, rounded to whole KiB and MiB
        per_token, full = _memory_row(shown, name)[4:]
        assert abs(per_token - _published_bytes(name, 1) / 2**10) <= 0.5
        assert abs(full - _published_bytes(name, 4096) / 2**20) <= 0.5


def _llama2_7b_parameters():
    """Parameter count of Llama 2 7B from the fields of its config.json."""
    vocab, hidden, mlp, layers = 32000, 4096, 11008, 32  # vocab_size, hidden_size,
    # intermediate_size, num_hidden_layers; tie_word_embeddings is false
    per_layer = 4 * hidden * hidden + 3 * hidden * mlp + 2 * hidden  # attention, MLP, 2 norms
    return 2 * vocab * hidden + layers * per_layer + hidden  # embeddings, head, final norm


@pytest.mark.claim("cache-batch-64gib")
def test_a_batch_of_32_llama2_7b_sequences_at_4096_tokens():
    batch, context = 32, 4096  # the server's load
    cache = qkv.kv_cache_bytes(32, 32, 128, context, batch=batch)
    assert _llama2_7b_parameters() == 6_738_415_616  # the "7B": 6.74 billion
    bits = 16
    weights = bits // 8 * _llama2_7b_parameters()
    assert round(cache / weights) == 5  # "five times"
    check_prose("cache-batch-64gib", batch, ..., context, cache / 2**30, weights / 2**30, bits)


@pytest.mark.claim("cache-gqa-shrink", "recap-gqa-shrink")
def test_shrink_factor_is_heads_over_kv_heads(shown):
    expected = {
        "Llama 3 8B": 4,
        "Mistral 7B": 4,
        "Llama 2 70B": 8,
        "Falcon 7B": 71,
        "GPT-2 (124M)": 1,
        "Llama 2 7B": 1,
    }
    for m in qkv.MODELS:
        as_multi_head = qkv.kv_cache_bytes(m.n_layers, m.n_heads, m.d_head, 4096)
        actual = qkv.kv_cache_bytes(m.n_layers, m.n_kv_heads, m.d_head, 4096)
        assert as_multi_head / actual == m.n_heads / m.n_kv_heads == expected[m.name]
    for name, factor in expected.items():  # the page: "... 8 KV heads: cache / 4"
        _, heads, kv_heads, _ = PUBLISHED[name]
        line = shown.line("kv_cache_in_depth.py:shrink", name + " ")
        assert _numbers(line[len(name) :]) == [heads, kv_heads, factor]
    by_name = {m.name: m for m in qkv.MODELS}
    llama3, llama70, falcon = (by_name[n] for n in ("Llama 3 8B", "Llama 2 70B", "Falcon 7B"))
    # "Llama 3 8B and Mistral 7B (32 query heads, 8 key/value heads) ... 4 times smaller,
    # Llama 2 70B 8 times, and Falcon 7B (71 query heads, 1 key/value head) 71 times"
    check_prose(
        "cache-gqa-shrink",
        ...,
        llama3.n_heads,
        llama3.n_kv_heads,
        llama3.n_heads / llama3.n_kv_heads,
        ...,
        llama70.n_heads / llama70.n_kv_heads,
        falcon.n_heads,
        falcon.n_kv_heads,
        falcon.n_heads / falcon.n_kv_heads,
    )


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
    check_prose("cache-gqa-same-scores", *[n for n in projected_width if n != 4])  # 8, 2, 1


@pytest.mark.claim("cache-gqa-same-scores")
def test_the_page_shows_the_same_score_count_for_8_2_and_1_kv_heads(shown):
    rows = _grouped_rows(shown)
    tokens = {shape[1] for shape, *_ in rows.values()}
    assert tokens == {16}
    # 8 query heads, each scoring t cached keys at step t, whatever n_kv_heads is
    assert {scores for *_, scores in rows.values()} == {8 * 16 * 17 // 2}
    # while the cache shrinks with the number of KV heads
    assert {n_kv: held for n_kv, (_, held, _, _) in rows.items()} == {
        n_kv: n_kv * rows[1][1] for n_kv in rows
    }


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


MIB, GIB = 2**20, 2**30


# DeepSeek-AI (2024), "DeepSeek-V2", 3.1.2: 60 layers, n_h = 128, d_h = 128, d_c = 512, d_h^R = 64
# DeepSeek-AI (2024), "DeepSeek-V3 technical report", 4.2: 61 layers, same attention widths
LATENT = {"DeepSeek-V2": (60, 128, 128, 512, 64), "DeepSeek-V3": (61, 128, 128, 512, 64)}


# Jiang et al. (2023), Table 1: 32 layers, 8 KV heads of 128, window 4096 in every layer.
# Gemma Team (2024), Table 1 and section 2: local (4096) and global layers alternate;
# 9B: 42 layers, 8 KV heads of 256; 27B: 46 layers, 16 KV heads of 128.
WINDOWED = {
    "Mistral 7B": (32, 32, 8, 128, 4096),
    "Gemma 2 9B": (42, 21, 8, 256, 4096),
    "Gemma 2 27B": (46, 23, 16, 128, 4096),
}


# DeepSeek-AI (2024), "DeepSeek LLM", Table 2: the 67B model has 95 layers, 64 heads, 8 KV heads,
# hidden size 8192
DENSE_67B = (95, 64, 8, 128)


def test_the_configs_are_the_published_ones():
    for m in qkv.LATENT_MODELS:
        assert (m.n_layers, m.n_heads, m.d_head, m.kv_lora_rank, m.qk_rope_head_dim) == LATENT[m.name]
    for m in qkv.WINDOWED_MODELS:
        assert (m.n_layers, m.local_layers, m.n_kv_heads, m.d_head, m.window) == WINDOWED[m.name]
    d = qkv.DEEPSEEK_67B
    assert (d.n_layers, d.n_heads, d.n_kv_heads, d.d_head) == DENSE_67B


def _windowed_by_hand(name, tokens):
    layers, local, kv_heads, d_head, window = WINDOWED[name]
    per_layer_token = 2 * kv_heads * d_head * 2  # K and V, 2 bytes a number
    return per_layer_token * (local * min(tokens, window) + (layers - local) * tokens)


@pytest.mark.claim("cache-window-sizes")
def test_rolling_caches_stop_at_the_window(shown):
    for name, (layers, local, *_) in WINDOWED.items():
        row = shown.row("kv_cache_in_depth.py:window", name, local, "of", layers)
        expected = [_windowed_by_hand(name, n) / MIB for n in (4096, 8192, 32768)]
        assert row[-3:] == pytest.approx(expected, abs=0.5)
    mistral = _windowed_by_hand("Mistral 7B", 32768)
    full = 2 * 32 * 8 * 128 * 32768 * 2
    assert full / mistral == 8  # Jiang et al.: "reduces the cache memory usage by 8x" at 32k
    assert numbers(shown.line("kv_cache_in_depth.py:window", "Mistral 7B at").replace(",", ""))[-1] == 8
    gemma = _windowed_by_hand("Gemma 2 9B", 8192)
    gemma_full = 2 * 42 * 8 * 256 * 8192 * 2
    assert gemma < gemma_full and gemma / gemma_full == 0.75  # only the local half shrinks
    check_prose("cache-window-sizes", mistral / MIB, 8, 32768, ..., gemma / MIB, gemma_full / MIB, 8192)


@pytest.mark.claim("cache-mla-per-token")
def test_an_mla_cache_is_latent_plus_rope_key_per_layer(shown):
    layers, heads, d_head, rank, rope = LATENT["DeepSeek-V2"]
    per_token = layers * (rank + rope) * 2  # one latent and one RoPE key per layer, 2 bytes
    mha = 2 * layers * heads * d_head * 2
    as_gqa = (rank + rope) / (2 * d_head)  # the KV heads whose cache is the same size
    assert per_token == qkv.LATENT_MODELS[0].cache_bytes(1)
    assert as_gqa == 2.25  # DeepSeek-V2, Table 1: "equal to GQA with only 2.25 groups"
    text = shown["kv_cache_in_depth.py:latent"].replace(",", "")
    assert str(per_token) in text and f"{mha / per_token:.1f}x" in text and f"{as_gqa:.2f} KV" in text
    check_prose("cache-mla-per-token", per_token, mha / per_token, heads, d_head, as_gqa)


@pytest.mark.claim("cache-mla-reduction")
def test_the_published_93_percent_needs_the_6_bit_cache(shown):
    layers, _, _, rank, rope = LATENT["DeepSeek-V2"]
    v2_numbers = layers * (rank + rope)  # per token
    dense_numbers = 2 * DENSE_67B[0] * DENSE_67B[2] * DENSE_67B[3]
    same_bits = 1 - v2_numbers / dense_numbers
    six_bits = 1 - v2_numbers * 6 / (dense_numbers * 16)
    published = 0.933  # DeepSeek-V2, abstract: "reducing the KV cache by 93.3%"
    assert abs(same_bits - published) > 0.1  # the architecture alone does not give it
    assert round(six_bits, 3) == published  # with the 6-bit cache it does
    assert numbers(shown.line("kv_cache_in_depth.py:latent", "reduction, both"))[-1] == pytest.approx(
        100 * same_bits, abs=0.05
    )
    assert numbers(shown.line("kv_cache_in_depth.py:latent", "reduction, DeepSeek-V2"))[-1] == pytest.approx(
        100 * six_bits, abs=0.05
    )
    check_prose("cache-mla-reduction", 100 * published, 16, 100 * same_bits, 100 * six_bits, 6)


@pytest.mark.claim("cache-exercise-latent")
def test_deepseek_v3_at_128k_against_llama_3_8b(page_output):
    per_token = 61 * (512 + 64) * 2
    v3 = per_token * 131_072
    llama3 = 2 * 32 * 8 * 128 * 131_072 * 2
    assert 0.5 < v3 / llama3 < 0.6  # "about half"
    text = page_output("kv-cache-in-depth.md")["kv_cache_in_depth_exercises.py:latent_128k"].replace(",", "")
    assert numbers(text) == pytest.approx([3, per_token, 131072, 3, round(v3 / GIB, 2), 3, 8, llama3 / GIB])
    written = (61, 512, 64, 2, per_token, v3 / GIB, 131072, ..., llama3 / GIB, 128 / 32)
    check_prose("cache-exercise-latent", *written)


# ---- moved from test_trained_model.py: this page's trained-model note, on the model --


def cache_numbers(model, trace):
    c = model.config
    decoded = smollm2.decode_cached(model, trace.ids)
    real = sum(cache.keys.nbytes + cache.values.nbytes for cache in decoded.caches)
    # a key and a value per layer, K/V head, number and token; 4 bytes each in float32
    assert real == 2 * c.n_layers * c.n_kv_heads * c.d_head * len(trace.ids) * 4
    per_token = 2 * c.n_layers * c.n_kv_heads * c.d_head * 2  # float16
    every_head = 2 * c.n_layers * c.n_heads * c.d_head * 2
    assert every_head == 3 * per_token  # "a third"
    return real, per_token, every_head


@pytest.mark.claim("note-kv-cache-trained")
def test_note_cache_bytes(model, trace):
    import qkv

    real, per_token, _ = cache_numbers(model, trace)
    c = model.config
    assert (
        qkv.kv_cache_bytes(c.n_layers, c.n_kv_heads, c.d_head, len(trace.ids), bytes_per_value=4) == real
    )  # "exactly what kv_cache_bytes predicts"
    check_prose(
        "note-kv-cache-trained",
        c.n_layers,
        c.n_kv_heads,
        c.d_head,
        per_token,
        c.n_heads,
        len(trace.ids),
        real,
    )
