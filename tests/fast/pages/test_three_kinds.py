"""Chapter 8, who asks and who answers: self, causal and cross-attention. Every claim, checked
(the deep dive's claims, padding and two widths among them, are in test_masks_in_pytorch.py).

Each fact is computed here from qkv's public functions on the toy sentence (``qkv.toy``) or
on the test's own seeded data, and where the page prints it (its weight tables, shapes and
verdicts, read through ``page_output``) the printed text must agree, to its rounding.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pages_support import P, X
from prose import check_prose
from support import numbers

import qkv
from qkv import toy

DECODER = toy.embeddings(("t1", "t2", "t3"), seed=7)  # the page's three decoder positions
PRINTED = 5e-4 + 1e-12  # the page prints weights to 3 decimals


@pytest.fixture(scope="module")
def shown(page_output):
    return page_output("three-kinds.md")


def weight_table(text: str) -> tuple[list[str], list[str], np.ndarray]:
    """The one labelled weight table a block prints: column labels, row labels, values."""
    lines = text.splitlines()
    rows = [i for i, line in enumerate(lines) if re.fullmatch(r"\s*\S+(\s+\d\.\d{3})+", line)]
    assert rows and rows == list(range(rows[0], rows[-1] + 1)), f"no single table in:\n{text}"
    columns = lines[rows[0] - 1].split()
    labels = [lines[i].split()[0] for i in rows]
    return columns, labels, np.array([numbers(lines[i].split(None, 1)[1]) for i in rows])


# ---- one formula --------------------------------------------------------------------------


@pytest.mark.claim("kinds-one-formula")
def test_self_cross_and_masked_attention_are_one_attention_on_different_sources():
    plain = qkv.attention(X @ P.w_q, X @ P.w_k, X @ P.w_v)
    np.testing.assert_array_equal(qkv.self_attention(X, P).weights, plain.weights)
    np.testing.assert_array_equal(qkv.self_attention(X, P).output, plain.output)
    crossed = qkv.attention(DECODER @ P.w_q, X @ P.w_k, X @ P.w_v)
    cross = qkv.cross_attention(DECODER, X, P)
    np.testing.assert_array_equal(cross.weights, crossed.weights)
    np.testing.assert_array_equal(cross.output, crossed.output)
    mask = qkv.causal_mask(6)
    np.testing.assert_array_equal(
        qkv.self_attention(X, P, mask=mask).weights,
        qkv.attention(X @ P.w_q, X @ P.w_k, X @ P.w_v, mask=mask).weights,
    )
    # the tables the deep dive prints are these weights: test_masks_in_pytorch.py


# ---- causal -------------------------------------------------------------------------------


@pytest.mark.claim("kinds-causal-zeros")
@settings(max_examples=40, deadline=None)
@given(
    t=st.integers(1, 12),
    d=st.integers(1, 16),
    seed=st.integers(0, 2**16),
    spread=st.sampled_from([1.0, 30.0]),
)
def test_causal_mask_gives_exact_zeros_above_the_diagonal(t, d, seed, spread):
    rng = np.random.default_rng(seed)
    q, k, v = (spread * rng.normal(size=(t, d)) for _ in range(3))
    weights = qkv.attention(q, k, v, mask=qkv.causal_mask(t)).weights
    assert (weights[np.triu_indices(t, k=1)] == 0).all()  # exactly, not approximately
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=0, atol=1e-12)


@pytest.mark.claim("kinds-causal-zeros")
def test_the_page_causal_weights_are_exactly_zero_in_the_future(shown):
    text = shown["three_kinds.py:causal"]
    lower = np.tril(np.ones((6, 6), dtype=int))  # j <= i, by hand
    np.testing.assert_array_equal(qkv.causal_mask(6), lower.astype(bool))
    weights = qkv.self_attention(X, P, mask=qkv.causal_mask(6)).weights
    assert (weights[lower == 0] == 0).all()
    _, _, printed = weight_table(text)
    assert (printed[lower == 0] == 0).all()
    assert (
        shown.line("three_kinds.py:causal", "weights on future tokens")
        == "weights on future tokens all exactly 0: True"
    )
    check_prose("kinds-causal-zeros", np.exp(-np.inf), weights[lower == 0].max())


@pytest.mark.claim("kinds-causal-renormalised")
def test_each_causal_row_is_the_softmax_of_its_allowed_scores_alone(shown):
    Q, K, _ = qkv.project(X, P)
    scores = Q @ K.T / np.sqrt(toy.D_K)
    weights = qkv.self_attention(X, P, mask=qkv.causal_mask(6)).weights
    by_hand = np.zeros((6, 6))
    for i in range(6):
        allowed = np.exp(scores[i, : i + 1] - scores[i, : i + 1].max())
        by_hand[i, : i + 1] = allowed / allowed.sum()
    np.testing.assert_allclose(weights, by_hand, rtol=1e-12, atol=1e-15)
    assert weights[0, 0] == 1.0  # the first token can only look at itself
    check_prose("kinds-causal-renormalised", weights[0, 0])
    _, _, printed = weight_table(shown["three_kinds.py:causal"])
    np.testing.assert_allclose(printed, by_hand, rtol=0, atol=PRINTED)
    assert printed[0].tolist() == [1, 0, 0, 0, 0, 0]
    assert numbers(shown.line("three_kinds.py:causal", "row sums:")) == [1.0] * 6


@pytest.mark.claim("kinds-causal-last-row")
def test_the_last_token_sees_what_it_would_see_unmasked(shown):
    masked = qkv.self_attention(X, P, mask=qkv.causal_mask(6)).weights
    unmasked = qkv.self_attention(X, P).weights
    np.testing.assert_allclose(masked[-1], unmasked[-1], rtol=1e-12)
    assert not np.allclose(masked[:-1], unmasked[:-1])
    # on the page: the causal table's last row is the unmasked row, the others are not
    _, _, causal = weight_table(shown["three_kinds.py:causal"])
    np.testing.assert_allclose(causal[-1], unmasked[-1], rtol=0, atol=PRINTED)
    assert (np.abs(causal[:-1] - unmasked[:-1]).max(axis=-1) > 0.01).all()


@pytest.mark.claim("kinds-causal-prefix")
@pytest.mark.parametrize("t", range(1, 7))
def test_causal_outputs_of_a_prefix_ignore_every_later_token(t):
    full = qkv.self_attention(X, P, mask=qkv.causal_mask(6)).output
    prefix = qkv.self_attention(X[:t], P, mask=qkv.causal_mask(t)).output
    np.testing.assert_allclose(full[:t], prefix, rtol=1e-12, atol=1e-15)


# ---- cross --------------------------------------------------------------------------------


@pytest.mark.claim("kinds-cross-shape")
@pytest.mark.parametrize(("t_q", "t_k"), [(3, 6), (1, 9), (7, 2)])
def test_cross_attention_is_rectangular_with_rows_of_one(t_q, t_k):
    rng = np.random.default_rng(t_q * 10 + t_k)
    result = qkv.cross_attention(rng.normal(size=(t_q, 16)), rng.normal(size=(t_k, 16)), P)
    assert result.weights.shape == (t_q, t_k)
    assert result.output.shape == (t_q, P.d_v)
    np.testing.assert_allclose(result.weights.sum(axis=-1), 1.0, rtol=0, atol=1e-12)


# ---- chapter 8 -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def three_kinds(page_output):
    return page_output("three-kinds.md")


@pytest.mark.claim("kinds-exercise-causal-count")
def test_causal_mask_of_five_forbids_ten_pairs_and_the_first_token_sees_itself(three_kinds):
    for t in range(1, 12):  # T(T-1)/2 in general: the strict upper triangle
        assert int((~qkv.causal_mask(t)).sum()) == t * (t - 1) // 2
    weights = qkv.self_attention(
        toy.embeddings()[:5], toy.projections(toy.D_K, toy.D_V), mask=qkv.causal_mask(5)
    ).weights
    assert weights[0, 0] == 1.0
    assert np.all(weights[np.triu_indices(5, k=1)] == 0.0)
    section = "three_kinds_exercises.py:causal_count"
    t = 5  # the exercise's five tokens
    forbidden = int((~qkv.causal_mask(t)).sum())
    assert three_kinds.values(section, "pairs forced to weight 0:") == [forbidden]
    assert three_kinds.values(section, "first token's weight on itself:") == [weights[0, 0]]
    # "5 · 4 / 2 = 10 forbidden pairs ... weight 1": T, T - 1, the halving, count, weight
    check_prose("kinds-exercise-causal-count", t, t - 1, ..., forbidden, weights[0, 0])
