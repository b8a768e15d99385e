"""Guards for the claims of docs/kv-cache.md (chapter 12).

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
    return _numbers(shown.line("kv_cache.py:memory", name + " ")[len(name) :])


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
    for line in shown["kv_cache.py:grouped"].splitlines():
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
        line = shown.line("kv_cache.py:shrink", name + " ")
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
