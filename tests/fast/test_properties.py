"""Invariants of attention that hold for every input, checked with Hypothesis."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import qkv

finite = st.floats(-10, 10, allow_nan=False, allow_infinity=False, width=64)
sizes = st.integers(1, 6)


@st.composite
def qkv_inputs(draw, same_length=False):
    t_q, t_k, d_k, d_v = draw(sizes), draw(sizes), draw(sizes), draw(sizes)
    if same_length:
        t_k = t_q
    q = draw(arrays(np.float64, (t_q, d_k), elements=finite))
    k = draw(arrays(np.float64, (t_k, d_k), elements=finite))
    v = draw(arrays(np.float64, (t_k, d_v), elements=finite))
    return q, k, v


@st.composite
def masks_with_an_allowed_key_per_row(draw, t_q, t_k):
    mask = draw(arrays(np.bool_, (t_q, t_k)))
    mask[np.arange(t_q), draw(arrays(np.int64, t_q, elements=st.integers(0, t_k - 1)))] = True
    return mask


@pytest.mark.claim("rows-sum-to-one")
@given(qkv_inputs())
def test_rows_of_weights_sum_to_one(inputs):
    weights = qkv.attention(*inputs).weights
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-12)
    assert (weights >= 0).all()


@given(arrays(np.float64, st.tuples(sizes, sizes), elements=finite), finite)
def test_softmax_ignores_a_constant_added_to_a_row(z, c):
    np.testing.assert_allclose(qkv.softmax(z + c), qkv.softmax(z), rtol=1e-9, atol=1e-15)


@given(qkv_inputs(same_length=True), st.randoms(use_true_random=False))
def test_self_attention_without_mask_is_permutation_equivariant(inputs, random):
    q, k, v = inputs
    perm = np.array(random.sample(range(len(q)), len(q)))
    weights, output = qkv.attention(q, k, v)
    p_weights, p_output = qkv.attention(q[perm], k[perm], v[perm])
    np.testing.assert_allclose(p_output, output[perm], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(p_weights, weights[perm][:, perm], rtol=1e-9, atol=1e-12)


@given(st.data())
def test_masked_weights_are_exactly_zero(data):
    q, k, v = data.draw(qkv_inputs())
    mask = data.draw(masks_with_an_allowed_key_per_row(len(q), len(k)))
    weights = qkv.attention(q, k, v, mask=mask).weights
    assert (weights[~mask] == 0.0).all()
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4), st.integers(1, 3), st.integers(1, 6), st.integers(0, 2**32))
def test_grouped_query_with_all_kv_heads_equals_multi_head(n_heads, d_head, t, seed):
    """n_kv_heads == n_heads must be plain multi-head attention: one K/V head per query head,
    computed here independently as a loop of single-head attentions."""
    rng = np.random.default_rng(seed)
    d_model = 6
    w = qkv.MultiHeadWeights.random(rng, d_model, n_heads, n_kv_heads=n_heads, d_head=d_head)
    x_q, x_kv = rng.normal(size=(t, d_model)), rng.normal(size=(t + 1, d_model))
    per_head = []
    for h in range(n_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        q, k, v = x_q @ w.w_q[:, cols], x_kv @ w.w_k[:, cols], x_kv @ w.w_v[:, cols]
        per_head.append(qkv.softmax(q @ k.T / np.sqrt(d_head)) @ v)
    expected = np.concatenate(per_head, axis=-1) @ w.w_o
    got = qkv.multi_head_attention(x_q, x_kv, w).output
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


# ---- rotary position embedding --------------------------------------------------------------


@given(st.integers(0, 50), st.integers(0, 50), st.integers(-20, 20), st.integers(0, 2**16))
def test_rope_score_depends_only_on_the_offset(m, n, shift, seed):
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(2, 1, 16))

    def score(a, b):
        return (qkv.rope(q, [a]) @ qkv.rope(k, [b]).T).item()

    np.testing.assert_allclose(score(m, n), score(m + 60 + shift, n + 60 + shift), rtol=1e-9, atol=1e-9)


@given(st.integers(0, 50), st.integers(1, 50), st.integers(0, 2**16))
def test_rope_score_depends_on_the_signed_offset_not_on_the_distance(m, d, seed):
    """A key d positions after the query and one d before are at the same distance |m - n|
    but score differently: the score is a function of the signed offset, not of the distance.
    Per pair i turned by θ_i, q · R(φ) k = (q_e k_e + q_o k_o) cos φ + (q_o k_e − q_e k_o) sin φ
    with φ = (n − m) θ_i, so s(+d) − s(−d) = 2 Σ_i (q_o k_e − q_e k_o) sin(d θ_i): zero
    for a query parallel to its key in every pair (q = k), not for random q and k."""
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(2, 1, 16))

    def score(a, b, q=q, k=k):
        return (qkv.rope(q, [a]) @ qkv.rope(k, [b]).T).item()

    theta = qkv.rope_angles([1], 16)[0]  # (8,): each pair's angle per step
    q_e, q_o, k_e, k_o = q[0, 0::2], q[0, 1::2], k[0, 0::2], k[0, 1::2]
    by_hand = 2 * np.sum((q_o * k_e - q_e * k_o) * np.sin(d * theta))
    after, before = score(m, m + d), score(m + d, m)  # key d after the query, key d before
    np.testing.assert_allclose(after - before, by_hand, rtol=1e-9, atol=1e-9)
    assert abs(after - before) > 1e-6  # told apart, though the distance is d both times
    np.testing.assert_allclose(score(m, m + d, k=q), score(m + d, m, k=q), rtol=1e-12, atol=1e-12)


@given(st.integers(1, 12), st.integers(0, 2**16))
def test_rope_keeps_every_norm_and_is_undone_by_the_opposite_angle(t, seed):
    x = np.random.default_rng(seed).normal(size=(3, t, 8))
    turned = qkv.rope(x)
    np.testing.assert_allclose(np.linalg.norm(turned, axis=-1), np.linalg.norm(x, axis=-1))
    back = qkv.rope(turned, -np.arange(t))
    np.testing.assert_allclose(back, x, atol=1e-12)


def test_rope_rejects_odd_widths_and_wrong_position_counts():
    with pytest.raises(ValueError, match="d must be even"):
        qkv.rope(np.zeros((2, 5)))
    with pytest.raises(ValueError, match="3 positions for 2 tokens"):
        qkv.rope(np.zeros((2, 4)), [0, 1, 2])
