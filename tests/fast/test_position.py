"""Guards for docs/position.md: order is invisible to attention; RoPE makes it visible
through the queries and keys only, and the rotated score depends only on the offset."""

from __future__ import annotations

import numpy as np
import pytest
from chapter_snippets import snippet_globals
from hypothesis import given, settings
from hypothesis import strategies as st

import qkv
from qkv import toy


@pytest.fixture(scope="module")
def page():
    return snippet_globals("position.py")


def reference_attention(q, k, v):
    """softmax(q kᵀ / √d_k) v written out with np.exp, independent of qkv."""
    s = q @ k.T / np.sqrt(q.shape[-1])
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    w = e / e.sum(axis=-1, keepdims=True)
    return w, w @ v


def rotate(x, angle_per_pair):
    """Turn each adjacent pair (0, 1), (2, 3), ... of every row by its own angles: (T, d)."""
    out = x.copy()
    c, s = np.cos(angle_per_pair), np.sin(angle_per_pair)  # (T, d/2)
    out[:, 0::2] = x[:, 0::2] * c - x[:, 1::2] * s
    out[:, 1::2] = x[:, 0::2] * s + x[:, 1::2] * c
    return out


@pytest.mark.claim("pos-permutation-equivariant")
def test_the_page_reversal_changes_nothing_but_the_order(page):
    order, back, plain = page["order"], page["back"], page["plain"]
    assert [toy.SENTENCE[i] for i in order] == list(reversed(toy.SENTENCE))
    np.testing.assert_allclose(page["shuffled"].weights[back][:, back], plain.weights, atol=1e-15)
    np.testing.assert_allclose(page["shuffled"].output[back], plain.output, atol=1e-15)


@pytest.mark.claim("pos-permutation-equivariant")
@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 9))
def test_any_permutation_of_any_input_permutes_the_output(seed, t):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(t, 5))
    p = qkv.Projections.random(rng, 5, 4, 3)
    perm = rng.permutation(t)
    plain, permuted = qkv.self_attention(x, p), qkv.self_attention(x[perm], p)
    np.testing.assert_allclose(permuted.output, plain.output[perm], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(permuted.weights, plain.weights[perm][:, perm], rtol=1e-12,
                               atol=1e-12)


@pytest.mark.claim("pos-rope-sees-order")
def test_with_rope_reversing_the_sentence_moves_the_weights_by_up_to_a_third(page):
    x, p = page["x"], page["p"]
    q, k, v = qkv.project(x, p)
    angles = np.arange(6)[:, None] * 10_000.0 ** (-np.arange(0, 8, 2) / 8)  # (T, d/2)
    w_in_order, _ = reference_attention(rotate(q, angles), rotate(k, angles), v)
    # reversed: word i now sits at position 5 - i
    w_reversed, _ = reference_attention(rotate(q, angles[::-1]), rotate(k, angles[::-1]), v)
    np.testing.assert_allclose(page["in_order"].weights, w_in_order, rtol=1e-12)
    np.testing.assert_allclose(page["unshuffled"], w_reversed, rtol=1e-12)
    assert 0.3 < np.abs(w_reversed - w_in_order).max() < 0.37  # "up to a third"


@pytest.mark.claim("pos-values-not-rotated")
def test_rope_output_blends_the_unrotated_values(page):
    x, p = page["x"], page["p"]
    _, _, v = qkv.project(x, p)
    result = page["in_order"]
    np.testing.assert_allclose(result.output, result.weights @ v, rtol=1e-12)
    assert not np.allclose(qkv.rope(v), v)  # rotating them would have changed them


@pytest.mark.claim("pos-offset-only")
def test_the_page_scores_depend_only_on_the_offset(page):
    score = page["score"]
    base = score(3, 0)
    for m, n in [(10, 7), (500, 497), (1000, 997)]:
        assert abs(score(m, n) - base) < 1e-12
    assert abs(score(3, 1) - base) > 0.1 and abs(score(10, 9) - base) > 0.1


@pytest.mark.claim("pos-offset-only")
@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 2000), st.integers(0, 2000),
       st.integers(-500, 500))
def test_any_rotated_score_depends_only_on_the_offset(seed, m, n, shift):
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(2, 1, 8))
    here = (rotate(q, np.array([m]) * 10_000.0 ** (-np.arange(0, 8, 2) / 8)[None])
            @ rotate(k, np.array([n]) * 10_000.0 ** (-np.arange(0, 8, 2) / 8)[None]).T)
    moved = qkv.rope(q, [m + shift + 500]) @ qkv.rope(k, [n + shift + 500]).T
    assert abs(here.item() - moved.item()) < 1e-9 * max(1.0, abs(here.item()))


@pytest.mark.claim("pos-ex-self-score")
def test_rope_leaves_every_own_key_score_unchanged(page):
    np.testing.assert_allclose(page["rotated_self"], page["plain_self"], rtol=1e-12, atol=1e-12)
    rng = np.random.default_rng(5)
    q, k = rng.normal(size=(2, 40, 8))
    angles = np.arange(40)[:, None] * 10_000.0 ** (-np.arange(0, 8, 2) / 8)
    np.testing.assert_allclose((rotate(q, angles) * rotate(k, angles)).sum(-1), (q * k).sum(-1),
                               rtol=1e-10, atol=1e-12)


@pytest.mark.claim("pos-ex-added-reaches-values")
def test_added_positions_change_a_words_value_but_rope_does_not(page):
    x, p, order = page["x"], page["p"], page["order"]
    milk = toy.SENTENCE.index("milk")
    at = order.index(milk)
    assert at != milk  # milk moves when the sentence is reversed
    pos = page["positions"]
    v_in_order, v_reversed = (x + pos) @ p.w_v, (x[order] + pos) @ p.w_v
    assert np.abs(v_in_order[milk] - v_reversed[at]).max() > 0.1
    np.testing.assert_allclose(page["v_in_order"], v_in_order, rtol=1e-12)
    # RoPE: V = X W_V, untouched by position, the same row wherever milk stands
    np.testing.assert_array_equal((x @ p.w_v)[milk], (x[order] @ p.w_v)[at])
