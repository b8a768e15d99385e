"""Guards for the sliding-window and latent-cache section of docs/kv-cache-in-depth.md (the
KV cache's memory, from chapter 12) and its exercise 2.

The configurations are typed here again from the papers, as an independent record to check
``qkv.LATENT_MODELS``, ``qkv.WINDOWED_MODELS`` and ``qkv.DEEPSEEK_67B`` against, and every size
is multiplied out by hand; then the page's printed output and its sentences are checked.
"""

from __future__ import annotations

import pytest
from prose import check_prose
from support import numbers

import qkv

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


@pytest.fixture(scope="module")
def shown(page_output):
    return page_output("kv-cache-in-depth.md")


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
