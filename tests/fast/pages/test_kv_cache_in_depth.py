"""Guards for the claims of docs/kv-cache-in-depth.md, the memory of the KV cache of
chapter 12: the published configurations, the bytes a cache holds, and what sharing
key/value heads divides (sliding windows and latent caches: test_kv_cache_in_depth_mla_windows.py).

Each fact is derived here, from qkv's public API, from closed forms, or from the models'
published configurations, and the page's printed output (``page_output``) is checked
against it.
"""

from __future__ import annotations

import numpy as np
import pytest
from prose import check_prose
from support import numbers

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


@pytest.fixture(scope="module")
def shown(page_output):
    return page_output("kv-cache-in-depth.md")


def _numbers(text: str) -> list[float]:
    return numbers(text.replace(",", ""))  # "22,500,864" is one number


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
