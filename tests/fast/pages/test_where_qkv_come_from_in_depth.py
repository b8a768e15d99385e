"""Guards for the claims of docs/where-qkv-come-from-in-depth.md: widths, biases.

Each test derives its fact itself, from qkv's public API applied to ``qkv.toy`` data, from
hand-written NumPy or from algebra, and then checks that what the page prints under its
executed blocks (``page_output``) agrees with it, to the printed rounding. No expected value
is copied from the printed output, and no test reads a name a snippet defines.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pages_support import (
    DRANK,
    DRANK_ON_MILK,
    DRANK_ON_OTHER,
    DRANK_ON_SHE,
    MILK,
    SHE,
    WORDS,
    assert_printed,
    line_of,
    named_numbers,
    random_projections,
    seeds,
    stated,
    widths,
)
from prose import check_prose
from support import numbers

import qkv
from qkv import toy


@pytest.fixture(scope="module")
def shown_where_depth(page_output):
    """Chapter 2's deep dive: widths that disagree, the key-bias exercise."""
    return page_output("where-qkv-come-from-in-depth.md")


@pytest.mark.claim("proj-dk-must-match")
def test_keys_of_another_width_are_refused_naming_both_shapes(shown_where_depth, random_toy):
    _, _, q, k, v = random_toy
    with pytest.raises(ValueError, match=r"share d_k.*\(6, 8\).*\(6, 5\)") as refused:
        qkv.attention(q, k[:, :5], v)
    # the page wraps the message over lines; the words are the same
    printed = shown_where_depth["where_qkv_come_from.py:dk_must_match"]
    assert printed.split() == f"ValueError: {refused.value}".split()
    assert printed.strip() == textwrap.fill(f"ValueError: {refused.value}", width=70)


@pytest.mark.claim("proj-dv-free")
@settings(deadline=None)  # timing is not what these tests check
@given(seeds, widths, widths)
def test_value_width_is_free_and_sets_the_output_width(seed, d_k, d_v):
    x = np.random.default_rng(seed).normal(size=(5, 6))
    weights, output = qkv.self_attention(x, random_projections(seed, 6, d_k, d_v))
    assert weights.shape == (5, 5)
    assert output.shape == (5, d_v)


@pytest.mark.claim("proj-dv-free")
def test_the_page_values_are_4_wide_beside_8_wide_keys_and_so_is_the_output(shown_where_depth, random_toy):
    x, p = random_toy[:2]
    output = qkv.self_attention(x, p).output
    assert output.shape == (len(WORDS), p.d_v) and p.d_v != p.d_k
    check_prose("proj-dv-free", p.d_v, p.d_k, output.shape[1])
    q_line = numbers(shown_where_depth.line("where_qkv_come_from.py:project", "Q "))
    assert q_line[1::2] == [8, 8, 4]  # the widths of Q, K and V as printed


@pytest.mark.claim("proj-key-bias-cancels")
@settings(max_examples=50, deadline=None)
@given(seeds, widths, st.integers(1, 8))
def test_a_bias_added_to_every_key_changes_no_weight(seed, d_k, t):
    rng = np.random.default_rng(seed)
    q, k, v = rng.normal(size=(t, d_k)), rng.normal(size=(t, d_k)), rng.normal(size=(t, 2))
    b = rng.normal(size=d_k)
    plain, shifted = qkv.attention(q, k, v).weights, qkv.attention(q, k + b, v).weights
    assert np.abs(shifted - plain).max() < stated("proj-key-bias-cancels")[0]


@pytest.fixture(scope="module")
def bias_changes():
    """How far one seeded bias, on the keys or on the queries, moves the weights of both toys."""
    changes = []
    for x, p in [
        (toy.embeddings(), toy.projections(toy.D_K, toy.D_V)),
        (toy.feature_embeddings(), toy.hand_built_projections()),
    ]:
        q, k, v = qkv.project(x, p)
        b = np.random.default_rng(2024).normal(size=p.d_k)
        plain = qkv.attention(q, k, v).weights
        changes.append(
            (
                np.abs(qkv.attention(q, k + b, v).weights - plain).max(),
                np.abs(qkv.attention(q + b, k, v).weights - plain).max(),
            )
        )
    return changes


@pytest.mark.claim("proj-key-bias-cancels")
def test_the_page_shows_the_key_bias_changing_nothing(shown_where_depth, bias_changes):
    (bound,) = stated("proj-key-bias-cancels")  # "below 10^-12": rounding, and only that
    check_prose("proj-key-bias-cancels", bound)
    assert bound <= 1e-10
    assert all(on_keys < bound for on_keys, _ in bias_changes)
    line = shown_where_depth.line("where_qkv_come_from.py:key_bias", "bias on the keys:")
    assert 0 <= numbers(line)[0] < bound


@pytest.mark.claim("proj-query-bias-matters")
def test_a_bias_on_the_queries_changes_the_weights(shown_where_depth, bias_changes):
    assert all(on_queries > 0.01 for _, on_queries in bias_changes)
    line = shown_where_depth.line("where_qkv_come_from.py:key_bias", "bias on the queries:")
    assert numbers(line)[0] > 0.01  # far above the keys' rounding-level change


# ---- moved from chapter 2: one row in three vectors out, the count, two exercises ----


@pytest.mark.claim("proj-three-vectors")
def test_one_embedding_gives_three_different_vectors(shown_where_depth, random_toy):
    x, p, q, k, v = random_toy
    row = x[MILK]
    for projected, w in [(q, p.w_q), (k, p.w_k), (v, p.w_v)]:  # each is milk's row times its matrix
        np.testing.assert_allclose(projected[MILK], [row @ w[:, j] for j in range(w.shape[1])], rtol=1e-12)
    assert not np.allclose(q[MILK], k[MILK]) and v[MILK].shape != q[MILK].shape
    text = shown_where_depth["where_qkv_come_from.py:same_word"]
    assert_printed(line_of(text, "embedding:"), row[:4], 2)
    assert_printed(line_of(text, "as query:"), q[MILK], 2)
    assert_printed(line_of(text, "as key:"), k[MILK], 2)
    assert_printed(line_of(text, "as value:"), v[MILK], 2)


@pytest.mark.claim("proj-param-count")
def test_the_three_matrices_hold_d_model_times_2_d_k_plus_d_v_numbers(shown_where_depth, random_toy):
    p = random_toy[1]
    learned = p.w_q.size + p.w_k.size + p.w_v.size
    assert learned == p.d_model * (2 * p.d_k + p.d_v)
    check_prose("proj-param-count", p.d_model, p.d_k, p.d_k, p.d_v, learned)
    text = shown_where_depth["where_qkv_come_from.py:parameters"]
    assert numbers(line_of(text, "learned numbers in W_Q, W_K, W_V:")) == [learned]
    assert numbers(line_of(text, "d_model * (2 d_k + d_v)"))[-1] == learned


@pytest.mark.claim("proj-ex-she-milk")
def test_one_entry_of_w_q_turns_she_towards_milk(shown_where_depth):
    hand, f = toy.hand_built_projections(), toy.FEATURES.index
    w_q = hand.w_q.copy()
    w_q[f("person"), f("liquid")] = 8.0  # the one entry the solution names, at drank's strength
    row = qkv.self_attention(toy.feature_embeddings(), qkv.Projections(w_q, hand.w_k, hand.w_v)).weights[SHE]
    # she's scores are now 8/√8 on milk, 4/√8 on drank, 0 elsewhere: drank's scores, mirrored
    expected = {w: DRANK_ON_OTHER for w in WORDS} | {"milk": DRANK_ON_MILK, "drank": DRANK_ON_SHE}
    np.testing.assert_allclose(row, [expected[w] for w in WORDS], rtol=1e-12)
    before = qkv.self_attention(toy.feature_embeddings(), hand).weights
    assert row[MILK] == pytest.approx(before[DRANK, MILK], rel=1e-12)  # "exactly what drank gives it"
    assert WORDS[before[SHE].argmax()] == "drank"  # its old favourite
    line = shown_where_depth.line("where_qkv_come_from.py:exercise_she", "she ->")
    printed = named_numbers(line.split("->", 1)[1])
    assert printed == {w: pytest.approx(x, abs=5e-3) for w, x in expected.items()}
    check_prose("proj-ex-she-milk", row[MILK], row[DRANK])


@pytest.mark.claim("proj-shapes")
def test_projection_shapes_follow_d_model_d_k_and_d_v(shown_where_depth, random_toy):
    x, p, q, k, v = random_toy
    t = len(WORDS)
    assert (toy.D_MODEL, toy.D_K, toy.D_V) == (16, 8, 4)  # the widths the sentence names
    assert x.shape == (t, toy.D_MODEL)
    assert p.w_q.shape == p.w_k.shape == (toy.D_MODEL, toy.D_K) and p.w_v.shape == (toy.D_MODEL, toy.D_V)
    assert q.shape == k.shape == (t, toy.D_K) and v.shape == (t, toy.D_V)
    check_prose("proj-shapes", *x.shape, *p.w_q.shape, *p.w_v.shape, *q.shape, *v.shape)
    text = shown_where_depth["where_qkv_come_from.py:project"]
    assert numbers(line_of(text, "X ")) == [t, toy.D_MODEL]
    assert numbers(line_of(text, "W_Q")) == [toy.D_MODEL, toy.D_K] * 2 + [toy.D_MODEL, toy.D_V]
    assert numbers(line_of(text, "Q ")) == [t, toy.D_K] * 2 + [t, toy.D_V]
