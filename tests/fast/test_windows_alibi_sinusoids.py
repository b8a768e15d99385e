"""The sliding-window mask, ALiBi's slopes and bias, sinusoidal positions and the cache sizes of
MLA and sliding-window models, each checked against a construction written out here: loops
over positions, the slopes typed from the paper's rule, the sines and cosines of Vaswani et al.
(2017) one entry at a time, and the cache bytes multiplied out by hand."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import qkv


@given(st.integers(1, 40), st.integers(1, 50))
def test_sliding_window_mask_is_the_direct_construction(t, window):
    # query i sees itself and the window - 1 keys before it, none after it
    expected = np.zeros((t, t), dtype=bool)
    for i in range(t):
        for j in range(t):
            expected[i, j] = 0 <= i - j <= window - 1
    np.testing.assert_array_equal(qkv.sliding_window_mask(t, window), expected)


@given(st.integers(1, 40), st.integers(1, 50))
def test_each_query_sees_min_of_its_position_and_the_window(t, window):
    counts = qkv.sliding_window_mask(t, window).sum(axis=1)
    np.testing.assert_array_equal(counts, [min(i + 1, window) for i in range(t)])
    if window >= t:
        np.testing.assert_array_equal(qkv.sliding_window_mask(t, window), qkv.causal_mask(t))


def test_alibi_slopes_for_8_heads_are_the_papers():
    # Press et al. (2022), section 3: for 8 heads, 1/2, 1/4, ..., 1/256
    written = [1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256]
    np.testing.assert_array_equal(qkv.alibi_slopes(8), written)


def test_alibi_slopes_for_12_heads_fill_in_every_other_slope_of_16():
    # 8 heads' slopes, then the 1st, 3rd, 5th and 7th of 16 heads' 2^(-8k/16) = 2^(-k/2)
    written = [2.0**-k for k in range(1, 9)] + [2**-0.5, 2**-1.5, 2**-2.5, 2**-3.5]
    np.testing.assert_allclose(qkv.alibi_slopes(12), written, rtol=1e-15)


def test_alibi_slopes_follow_the_papers_rule_for_every_head_count():
    """Press et al. (2022): for a power of two n, the geometric sequence that starts at and
    multiplies by 2^(-8/n); for any other n, the slopes of the largest power of two m below
    it, then every other slope of 2m, as many as are missing."""
    for n in range(1, 70):
        slopes = qkv.alibi_slopes(n)
        m = 2 ** int(math.log2(n))
        if m == n:
            ratio = 2.0 ** (-8 / n)
            np.testing.assert_allclose(slopes, ratio ** np.arange(1, n + 1), rtol=1e-14, err_msg=f"n={n}")
        else:
            np.testing.assert_array_equal(slopes[:m], qkv.alibi_slopes(m), err_msg=f"n={n}")
            np.testing.assert_array_equal(
                slopes[m:], qkv.alibi_slopes(2 * m)[0::2][: n - m], err_msg=f"n={n}"
            )
        assert len(set(slopes.tolist())) == n and (slopes > 0).all() and (slopes <= 1).all(), n


@given(st.integers(1, 12), st.integers(1, 16))
def test_alibi_bias_is_minus_slope_times_distance(t, n_heads):
    bias = qkv.alibi_bias(t, n_heads)
    slopes = qkv.alibi_slopes(n_heads)
    assert bias.shape == (n_heads, t, t)
    for h in range(n_heads):
        for i in range(t):
            for j in range(t):
                assert bias[h, i, j] == -slopes[h] * abs(i - j)


@given(st.integers(1, 30), st.integers(1, 16).map(lambda h: 2 * h))
def test_sinusoidal_positions_are_the_formula(t, d):
    pe = qkv.sinusoidal_positions(t, d)
    for p in range(t):
        for i in range(d // 2):
            angle = p / 10_000 ** (2 * i / d)
            assert math.isclose(pe[p, 2 * i], math.sin(angle), abs_tol=1e-12)
            assert math.isclose(pe[p, 2 * i + 1], math.cos(angle), abs_tol=1e-12)


def test_mla_cache_bytes_by_hand():
    # DeepSeek-V2: 60 layers × (512 + 64) numbers × 2 bytes; V3 has 61 layers
    assert qkv.mla_cache_bytes(60, 512, 64, 1) == 60 * 576 * 2 == 69_120
    assert qkv.mla_cache_bytes(61, 512, 64, 1000, bytes_per_value=1, batch=3) == 61 * 576 * 1000 * 3
    v2, v3 = qkv.LATENT_MODELS
    assert v2.cache_bytes(1) == 69_120 and v3.cache_bytes(1) == 70_272


def test_windowed_cache_bytes_by_hand():
    # a rolling window holds min(tokens, window) tokens per local layer
    assert qkv.kv_cache_bytes(32, 8, 128, 100, window=4096) == 2 * 32 * 8 * 128 * 100 * 2
    assert qkv.kv_cache_bytes(32, 8, 128, 32768, window=4096) == 2 * 32 * 8 * 128 * 4096 * 2
    mistral, gemma9, _ = qkv.WINDOWED_MODELS
    assert mistral.cache_bytes(32768) == 2 * 32 * 8 * 128 * 4096 * 2
    per_layer_token = 2 * 8 * 256 * 2  # Gemma 2 9B: K and V, 8 KV heads of 256, 2 bytes
    assert gemma9.cache_bytes(8192) == 21 * per_layer_token * 4096 + 21 * per_layer_token * 8192
    assert gemma9.cache_bytes(1000) == 42 * per_layer_token * 1000  # inside the window
