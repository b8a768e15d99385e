"""Guards for docs/position.md (chapter 9): without a mask order is invisible to attention; a
causal mask leaks position; RoPE makes order visible through the queries and keys (the values
of the first layer stay free of it), and the rotated score depends only on the offset.

Each fact is derived here, with attention and the rotation written out in NumPy (checked
against ``qkv.rope``) on the toys of ``qkv.toy`` and on seeded random inputs; then the text
the page prints under its blocks is checked against it, to the rounding it prints. Where
the page states its own seeded inputs (the offset query and key; the added positions, on its
deep dive docs/position-variants.md), the test draws the same ones to compare numbers.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prose import check_prose
from support import softmax_by_hand, values_after

import qkv
from qkv import toy
from qkv.exercises import check_rope

REVERSED = [5, 4, 3, 2, 1, 0]  # the page's shuffle: the sentence backwards
SHE, MILK = toy.SENTENCE.index("she"), toy.SENTENCE.index("milk")


@pytest.fixture(scope="module")
def hand_built():
    """The hand-built toy's Q, K, V, projected here."""
    x, p = toy.feature_embeddings(), toy.hand_built_projections()
    return x, p, x @ p.w_q, x @ p.w_k, x @ p.w_v


@pytest.fixture(scope="module")
def shown(page_output):
    return page_output("position.md")


def reference_attention(q, k, v, causal=False):
    """softmax(q kᵀ / √d_k) v written out with np.exp, independent of qkv; with ``causal``,
    query i reads keys 0..i only."""
    s = q @ k.T / np.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.arange(len(k))[None, :] <= np.arange(len(q))[:, None], s, -np.inf)
    w = softmax_by_hand(s)
    return w, w @ v


def angles(positions, d=toy.D_K):
    """Pair i at position m turns by m · 10000^(-2i/d): (T, d/2)."""
    return np.asarray(positions, dtype=float)[:, None] * 10_000.0 ** (-np.arange(0, d, 2) / d)


def rotate(x, angle_per_pair):
    """Turn each adjacent pair (0, 1), (2, 3), ... of every row by its own angles: (T, d)."""
    out = x.copy()
    c, s = np.cos(angle_per_pair), np.sin(angle_per_pair)  # (T, d/2)
    out[:, 0::2] = x[:, 0::2] * c - x[:, 1::2] * s
    out[:, 1::2] = x[:, 0::2] * s + x[:, 1::2] * c
    return out


@pytest.fixture(scope="module")
def rope_weights(hand_built):
    """RoPE weights in order, and those of the reversed sentence put back in order."""
    *_, q, k, v = hand_built
    in_order, _ = reference_attention(rotate(q, angles(range(6))), rotate(k, angles(range(6))), v)
    # reversed, word i stands at position 5 - i
    back, _ = reference_attention(rotate(q, angles(range(6))[::-1]), rotate(k, angles(range(6))[::-1]), v)
    return in_order, back


def test_the_written_out_rotation_is_qkv_rope():
    x = np.random.default_rng(8).normal(size=(7, 8))
    np.testing.assert_allclose(qkv.rope(x), rotate(x, angles(range(7))), rtol=1e-12, atol=1e-14)


@pytest.mark.claim("pos-permutation-equivariant")
def test_the_page_reversal_changes_nothing_but_the_order(hand_built, shown):
    *_, q, k, v = hand_built
    w, out = reference_attention(q, k, v)
    w_rev, out_rev = reference_attention(q[REVERSED], k[REVERSED], v[REVERSED])
    back = np.argsort(REVERSED)
    np.testing.assert_allclose(w_rev[back][:, back], w, rtol=0, atol=1e-15)
    np.testing.assert_allclose(out_rev[back], out, rtol=0, atol=1e-15)
    text = shown["position.py:shuffle"]
    assert shown.line("position.py:shuffle", "shuffled:") == "shuffled: " + " ".join(reversed(toy.SENTENCE))
    gaps = values_after(text, "weights, unshuffled, differ by")
    rounding = 1e-15  # "to within rounding (10^-15)"
    assert len(gaps) == 2 and all(0 <= g < rounding for g in gaps)
    check_prose("pos-permutation-equivariant", rounding)


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
    np.testing.assert_allclose(permuted.weights, plain.weights[perm][:, perm], rtol=1e-12, atol=1e-12)


@pytest.mark.claim("pos-ex-long")
def test_the_last_of_99_copies_gives_she_one_hundredth(hand_built, shown):
    x, p, *_ = hand_built
    long = x[[SHE] + [MILK] * 99]
    w, _ = reference_attention(long @ p.w_q, long @ p.w_k, long @ p.w_v, causal=True)
    np.testing.assert_allclose(w[-1], 1 / len(long), rtol=1e-12)  # an even spread
    check_prose("pos-ex-long", len(long), w[-1, 0])
    (shown_share,) = values_after(shown["position.py:exercise_long"], "the last copy's weight on she:")
    assert abs(shown_share - w[-1, 0]) <= 5e-5 + 1e-12


@pytest.mark.claim("pos-rope-sees-order")
def test_with_rope_reversing_the_sentence_moves_the_weights_by_up_to_a_third(rope_weights, shown):
    in_order, back = rope_weights
    moved = np.abs(back - in_order).max()
    assert 0.3 < moved < 0.37  # "up to a third"
    text = shown["position.py:rotate"]
    (shown_moved,) = values_after(text, "with RoPE, the shuffled sentence's weights differ by up to")
    assert abs(shown_moved - moved) <= 0.005 + 1e-9


@pytest.mark.claim("pos-values-not-rotated")
def test_rope_output_blends_the_unrotated_values(hand_built, rope_weights, shown):
    *_, v = hand_built
    in_order, _ = rope_weights
    want = in_order[SHE] @ v  # the weights moved, the values are those without position
    rotated = in_order[SHE] @ qkv.rope(v)  # what rotating them too would hand over
    assert np.abs(want - rotated).max() > 0.1
    prefix = f"she's output ({', '.join(toy.VALUE_COLUMNS)}):"
    np.testing.assert_allclose(values_after(shown["position.py:rotate"], prefix), want, atol=0.005 + 1e-9)


@pytest.mark.claim("pos-offset-only")
@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 2000), st.integers(0, 2000), st.integers(-500, 500))
def test_any_rotated_score_depends_only_on_the_offset(seed, m, n, shift):
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(2, 1, 8))
    here = rotate(q, angles([m])) @ rotate(k, angles([n])).T
    moved = qkv.rope(q, [m + shift + 500]) @ qkv.rope(k, [n + shift + 500]).T
    assert abs(here.item() - moved.item()) < 1e-9 * max(1.0, abs(here.item()))


@pytest.mark.claim("pos-ex-write-rope")
def test_the_written_rope_passes_and_turns_pairs_as_qkv_rope_does(shown):
    """The solution's verdict, as the page prints it, is check_rope's pass; and turning a pair
    (a, b) as the complex number a + bi times e^(iθ) is the rotation this test writes out."""
    assert " ".join(shown["position.py:write_rope"].split()) == check_rope(qkv.rope).message
    x = np.random.default_rng(9).normal(size=(5, toy.D_K))
    theta = angles(range(5))
    z = (x[:, 0::2] + 1j * x[:, 1::2]) * np.exp(1j * theta)
    np.testing.assert_allclose(
        np.stack([z.real, z.imag], axis=-1).reshape(5, -1), rotate(x, theta), atol=1e-12
    )
    check_prose("pos-ex-write-rope")
