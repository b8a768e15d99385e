"""What the projections W_Q, W_K and W_V fix, and what tying two of them does: facts of
algebra about qkv.project and qkv.attention, checked on constructed and random heads.

The pages' sentences that state these facts carry claim marks guarded here; the tests of
what the pages print are with the pages' other tests."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prose import check_prose

import qkv

seeds = st.integers(0, 2**32 - 1)


def tied_scores(x, w_k):
    """Raw scores q kᵀ of a head with W_Q = W_K."""
    q, k, _ = qkv.project(x, qkv.Projections(w_k, w_k, w_k))
    return q @ k.T, k


@pytest.mark.claim("three-tied-top-not-self")
def test_a_tied_head_can_score_another_word_above_itself():
    # k_j = 2 k_i: s_ij = 2|k_i|² > |k_i|² = s_ii. A tied head's row need not peak on itself.
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 6))
    x[2] = 2 * x[0]  # word 2's embedding is word 0's doubled, so its key is too
    s, k = tied_scores(x, rng.normal(size=(6, 4)))
    np.testing.assert_allclose(s[0, 2], 2 * s[0, 0], rtol=1e-12)
    assert s[0, 0] > 0 and s[0].argmax() == 2  # word 0's top key is not its own
    # and with softmax: a tied head's largest weight goes where its largest score is
    w = qkv.softmax(s / np.sqrt(k.shape[1]))
    assert w[0].argmax() == 2 and w[0, 2] > w[0, 0]


@pytest.mark.claim("three-tied-pairwise-self")
@settings(max_examples=60, deadline=None)
@given(seeds, st.integers(1, 8), st.integers(2, 10))
def test_tied_of_any_two_words_one_scores_itself_at_least_as_high_as_the_other(seed, d_k, t):
    rng = np.random.default_rng(seed)
    # keys of very different lengths, so rows whose top is another word are common
    x = rng.normal(size=(t, 6)) * rng.uniform(0.1, 3.0, size=(t, 1))
    s, k = tied_scores(x, rng.normal(size=(6, d_k)))
    own = np.diag(s)
    gap = own[:, None] + own[None, :] - 2 * s  # s_ii + s_jj - 2 s_ij
    squared = ((k[:, None, :] - k[None, :, :]) ** 2).sum(axis=-1)  # |k_i - k_j|²
    tol = 1e-9 * max(1.0, np.abs(s).max())
    np.testing.assert_allclose(gap, squared, rtol=0, atol=tol)
    prefers_other = s > own[:, None] + tol  # [i, j]: i scores j above itself
    assert not (prefers_other & prefers_other.T).any()


@pytest.mark.claim("three-tied-pairwise-self")
def test_the_pairwise_sentence_writes_the_identity_tested_above():
    # s_ii + s_jj - 2 s_ij = |k_i - k_j|^2 >= 0: the 2 and the 0 are the identity's, which
    # the property test above checks on random tied heads
    check_prose("three-tied-pairwise-self", 2, 0)


def test_the_pairwise_guarantee_is_all_a_tie_gives():
    # Not every row peaks on itself: over random tied heads with keys of unequal lengths,
    # some row's top score is another word's (so the pairwise statement is not a weak
    # restatement of a per-row one), and with separate matrices a pair can prefer each other.
    rng = np.random.default_rng(1)
    tied_rows_elsewhere = 0
    for _ in range(50):
        x = rng.normal(size=(6, 6)) * rng.uniform(0.1, 3.0, size=(6, 1))
        s, _ = tied_scores(x, rng.normal(size=(6, 4)))
        tied_rows_elsewhere += int((s.argmax(axis=-1) != np.arange(6)).sum())
    assert tied_rows_elsewhere > 0
    x, w_q, w_k = np.eye(2), np.eye(2), np.array([[0.0, 1.0], [1.0, 0.0]])  # each asks for the other
    q, k = x @ w_q, x @ w_k
    s = q @ k.T
    assert s[0, 1] > s[0, 0] and s[1, 0] > s[1, 1]


def _scores_with(x, w_q, w_k, *, query_bias=None, key_bias=None, rope=False, qk_norm=False):
    q, k = x @ w_q, x @ w_k
    if query_bias is not None:
        q = q + query_bias
    if key_bias is not None:
        k = k + key_bias
    if qk_norm:
        q = q / np.linalg.norm(q, axis=-1, keepdims=True)
        k = k / np.linalg.norm(k, axis=-1, keepdims=True)
    if rope:
        q, k = qkv.rope(q), qkv.rope(k)
    return q @ k.T


@pytest.mark.claim("three-products-plain-scores-only")
@pytest.mark.parametrize("variant", ["plain", "query bias", "key bias", "rope", "qk-norm"])
def test_only_the_plain_scores_depend_on_w_q_and_w_k_through_their_product_alone(variant):
    rng = np.random.default_rng(7)
    d_model, d_k, t = 8, 4, 5
    x, w_q, w_k = (
        rng.normal(size=(t, d_model)),
        rng.normal(size=(d_model, d_k)),
        rng.normal(size=(d_model, d_k)),
    )
    a = rng.normal(size=(d_k, d_k)) + 3 * np.eye(d_k)  # invertible, well conditioned
    moved_q, moved_k = w_q @ a, w_k @ np.linalg.inv(a).T
    np.testing.assert_allclose(moved_q @ moved_k.T, w_q @ w_k.T, rtol=1e-10, atol=1e-10)  # same product
    kwargs = {
        "plain": {},
        "query bias": {"query_bias": rng.normal(size=d_k)},
        "key bias": {"key_bias": rng.normal(size=d_k)},
        "rope": {"rope": True},
        "qk-norm": {"qk_norm": True},
    }[variant]
    before, after = _scores_with(x, w_q, w_k, **kwargs), _scores_with(x, moved_q, moved_k, **kwargs)
    w_before, w_after = qkv.softmax(before), qkv.softmax(after)
    if variant == "plain":
        np.testing.assert_allclose(after, before, rtol=1e-9, atol=1e-9)
        return
    assert np.abs(after - before).max() > 0.1, variant  # the scores part
    if variant == "key bias":
        # a key bias adds q_i·b to the whole of row i, which softmax ignores: the weights stay
        # (the page names a query bias for that reason; the depth page of chapter 2 says so)
        np.testing.assert_allclose(w_after, w_before, rtol=1e-9, atol=1e-12)
    else:
        assert np.abs(w_after - w_before).max() > 1e-3, variant  # and so do the weights


@pytest.mark.claim("three-widths-weights-vs-parameters")
@settings(max_examples=30, deadline=None)
@given(seeds, st.integers(1, 12), st.integers(1, 12), st.integers(1, 8))
def test_d_k_and_d_v_leave_the_attention_weights_and_grow_the_parameters(seed, d_k, d_v, t):
    d_model = 6
    x = np.random.default_rng(seed).normal(size=(t, d_model))
    p = qkv.Projections.random(np.random.default_rng(seed), d_model, d_k, d_v)
    wider = qkv.Projections.random(np.random.default_rng(seed), d_model, d_k + 1, d_v + 1)
    weights, output = qkv.self_attention(x, p)
    assert weights.shape == qkv.self_attention(x, wider).weights.shape == (t, t)  # one per pair
    assert output.shape == (t, d_v)
    params = sum(w.size for w in (p.w_q, p.w_k, p.w_v))
    assert params == d_model * (2 * d_k + d_v)
    assert sum(w.size for w in (wider.w_q, wider.w_k, wider.w_v)) == params + 3 * d_model
