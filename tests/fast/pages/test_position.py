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
from support import numbers, softmax_by_hand, values_after

import qkv
from qkv import toy

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


@pytest.mark.claim("pos-causal-changes-outputs")
def test_with_a_causal_mask_reversing_changes_every_words_output(hand_built, shown):
    *_, q, k, v = hand_built
    _, out = reference_attention(q, k, v, causal=True)
    _, out_rev = reference_attention(q[REVERSED], k[REVERSED], v[REVERSED], causal=True)
    back = out_rev[np.argsort(REVERSED)]  # each word's reversed output, in sentence order
    change = np.abs(back - out).max(axis=1)  # per word, its largest change in any column
    assert (change > 0.5).all()  # every word, and by a lot
    check_prose("pos-causal-changes-outputs", change.min())
    lines = shown["position.py:causal_shuffle"].splitlines()[1:]
    assert [ln.split()[0] for ln in lines] == list(toy.SENTENCE)
    for i, line in enumerate(lines):
        np.testing.assert_allclose(numbers(line), [*out[i], *back[i]], atol=0.005 + 1e-9)


@pytest.mark.claim("pos-causal-counts")
def test_identical_copies_get_outputs_that_tell_where_they_stand(hand_built, shown):
    x, p, *_ = hand_built
    copies = x[[SHE] + [MILK] * 5]
    q, k, v = copies @ p.w_q, copies @ p.w_k, copies @ p.w_v
    _, out_plain = reference_attention(q, k, v)
    w_causal, out_causal = reference_attention(q, k, v, causal=True)
    np.testing.assert_allclose(out_plain[1:], out_plain[[1] * 5], rtol=0, atol=1e-15)  # alike
    for i in range(1, 6):  # copy at position i: an even spread over the i + 1 it may read
        np.testing.assert_allclose(w_causal[i, : i + 1], 1 / (i + 1), rtol=1e-12)
    shares = w_causal[1:, 0]  # the weight each copy puts on "she"
    assert (np.diff(shares) < 0).all()
    person = toy.VALUE_COLUMNS.index("person")  # she's value is 1 there, milk's 0
    np.testing.assert_allclose(out_causal[1:, person], shares, rtol=1e-12)
    check_prose("pos-causal-counts", ..., *shares)  # "i + 1" is the formula's, not a number
    text = shown["position.py:counting"]
    np.testing.assert_allclose(values_after(text, "no mask:"), out_plain[1:, person], atol=5e-4 + 1e-9)
    np.testing.assert_allclose(values_after(text, "causal mask:"), shares, atol=5e-4 + 1e-9)


@pytest.mark.claim("pos-ex-long")
def test_the_last_of_99_copies_gives_she_one_hundredth(hand_built, shown):
    x, p, *_ = hand_built
    long = x[[SHE] + [MILK] * 99]
    w, _ = reference_attention(long @ p.w_q, long @ p.w_k, long @ p.w_v, causal=True)
    np.testing.assert_allclose(w[-1], 1 / len(long), rtol=1e-12)  # an even spread
    check_prose("pos-ex-long", len(long), w[-1, 0])
    (shown_share,) = values_after(shown["position.py:exercise_long"], "the last copy's weight on she:")
    assert abs(shown_share - w[-1, 0]) <= 5e-5 + 1e-12


@pytest.mark.claim("pos-values-layer-two")
def test_from_layer_two_on_the_values_carry_position(shown):
    x = toy.embeddings()
    layer1, layer2 = (toy.projections(d_k=8, d_v=16, seed=s) for s in (2, 3))  # as the page

    def values(tokens):
        q, k, v = tokens @ layer1.w_q, tokens @ layer1.w_k, tokens @ layer1.w_v
        _, out = reference_attention(rotate(q, angles(range(6))), rotate(k, angles(range(6))), v)
        return v, (tokens + out) @ layer2.w_v

    first, second = values(x)
    first_rev, second_rev = values(x[REVERSED])
    at = REVERSED.index(MILK)
    layer1_gap = np.abs(first[MILK] - first_rev[at]).max()
    layer2_gap = np.abs(second[MILK] - second_rev[at]).max()
    assert layer1_gap < 1e-12 and layer2_gap > 0.1
    check_prose("pos-values-layer-two", ..., ..., layer2_gap)  # "layer 1", "layer 2": labels
    line = shown.line("position.py:layer_two", "milk's value, in order vs reversed:")
    _, shown_1, _, shown_2 = numbers(line)
    assert shown_1 == 0 and abs(shown_2 - layer2_gap) <= 0.005 + 1e-9


@pytest.mark.claim("pos-rope-sees-order")
def test_with_rope_reversing_the_sentence_moves_the_weights_by_up_to_a_third(rope_weights, shown):
    in_order, back = rope_weights
    moved = np.abs(back - in_order).max()
    assert 0.3 < moved < 0.37  # "up to a third"
    text = shown["position.py:rotate"]
    (shown_moved,) = values_after(text, "with RoPE, the shuffled sentence's weights differ by up to")
    assert abs(shown_moved - moved) <= 0.005 + 1e-9
    for word in ("drank", "from"):  # each word's favourite key, in order and reversed
        i = toy.SENTENCE.index(word)
        j = int(in_order[i].argmax())
        line = shown.line("position.py:rotate", f"{word} ->")
        assert line.startswith(f"{word} -> {toy.SENTENCE[j]}:")
        np.testing.assert_allclose(numbers(line), [in_order[i, j], back[i, j]], atol=0.005 + 1e-9)


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
def test_the_page_scores_depend_only_on_the_offset(shown):
    q, k = np.random.default_rng(0).normal(size=(2, 1, toy.D_K))  # the page's query and key

    def score(m, n):
        return (rotate(q, angles([m])) @ rotate(k, angles([n])).T).item()

    lines = [ln.strip() for ln in shown["position.py:offset"].splitlines()]
    assert len(lines) == 6
    exact = 1e-12  # "to within 10^-12"
    pairs = [numbers(line)[:2] for line in lines[:3]]  # the three pairs at offset 3
    assert abs(score(*pairs[2]) - score(*pairs[0])) < exact
    check_prose("pos-offset-only", *pairs[0], *pairs[1], *pairs[2], exact)
    for line in lines:
        m, n, offset, value = numbers(line)
        assert offset == m - n
        assert abs(value - score(m, n)) <= 5e-7 + 1e-12  # printed to 6 decimals
        same = abs(score(m, n) - score(3, 0))
        assert same < 1e-12 if offset == 3 else same > 0.01  # offset -3 too: the sign counts
    assert {numbers(line)[2] for line in lines} == {1, 2, 3, -3}
    assert sum(numbers(line)[2] == 3 for line in lines) == 3  # 3/0, 10/7 and 500/497


@pytest.mark.claim("pos-offset-signed")
def test_a_key_as_far_after_the_query_scores_differently(shown):
    """The page's key 3 after its query (offset -3) against the three at offset 3: the same
    distance |m - n|, another score, so RoPE's score follows the signed offset."""
    q, k = np.random.default_rng(0).normal(size=(2, 1, toy.D_K))  # the page's query and key

    def score(m, n):
        return (rotate(q, angles([m])) @ rotate(k, angles([n])).T).item()

    rows = {tuple(numbers(line)[:3]): numbers(line)[3] for line in shown["position.py:offset"].splitlines()}
    (m, n, offset), printed = next((key, value) for key, value in rows.items() if key[2] < 0)
    assert (m, n, offset) == (0, 3, -3) and abs(printed - score(0, 3)) <= 5e-7 + 1e-12
    assert abs(score(0, 3) - score(3, 0)) > 0.01  # same distance, not the same score
    check_prose("pos-offset-signed", n - m, m - n, n - m)


@pytest.mark.claim("pos-offset-only")
@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 2000), st.integers(0, 2000), st.integers(-500, 500))
def test_any_rotated_score_depends_only_on_the_offset(seed, m, n, shift):
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(2, 1, 8))
    here = rotate(q, angles([m])) @ rotate(k, angles([n])).T
    moved = qkv.rope(q, [m + shift + 500]) @ qkv.rope(k, [n + shift + 500]).T
    assert abs(here.item() - moved.item()) < 1e-9 * max(1.0, abs(here.item()))


@pytest.mark.claim("pos-ex-self-score")
def test_rope_leaves_every_own_key_score_unchanged(shown):
    # the page's check: the random toy, where the own-key scores are not all 0
    x, p = toy.embeddings(), toy.projections(toy.D_K, toy.D_V)
    q, k = x @ p.w_q, x @ p.w_k
    plain = (q * k).sum(-1)
    rotated = (rotate(q, angles(range(6))) * rotate(k, angles(range(6)))).sum(-1)
    np.testing.assert_allclose(rotated, plain, rtol=1e-12, atol=1e-12)
    assert np.abs(plain).min() > 0.1
    text = shown["position.py:exercise_self"]
    for prefix in ("own-key scores, plain:", "own-key scores, rotated:"):
        np.testing.assert_allclose(values_after(text, prefix), plain, rtol=0, atol=5e-5 + 1e-12)
    rng = np.random.default_rng(5)  # and at 40 positions of random queries and keys
    q, k = rng.normal(size=(2, 40, 8))
    np.testing.assert_allclose((qkv.rope(q) * qkv.rope(k)).sum(-1), (q * k).sum(-1), rtol=1e-10, atol=1e-12)
