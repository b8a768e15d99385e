"""Chapter 8, who asks and who answers: self, causal and cross-attention. Every claim, checked,
and the chapter's exercises (the deep dive's claims are in test_masks_in_pytorch.py).

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


def printed_ints(text: str) -> np.ndarray:
    """An integer array printed by NumPy (``[[1 0] [1 1]]``), back as an array."""
    rows = re.findall(r"\[([\d ]+)\]", text)
    return np.array([[int(x) for x in row.split()] for row in rows])


# ---- one formula --------------------------------------------------------------------------


@pytest.mark.claim("kinds-one-formula")
def test_self_cross_and_masked_attention_are_one_attention_on_different_sources(shown):
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
    # and the tables the page prints are those weights
    for section, want in [("self", plain.weights), ("cross", crossed.weights)]:
        _, _, printed = weight_table(shown[f"three_kinds.py:{section}"])
        np.testing.assert_allclose(printed, want, rtol=0, atol=PRINTED)


def test_the_self_attention_table_is_the_toy_head_on_the_toy_sentence(shown):
    text = shown["three_kinds.py:self"]
    columns, labels, printed = weight_table(text)
    assert columns == labels == list(toy.SENTENCE)
    assert text.splitlines()[0] == f"self-attention weights: {(len(toy.SENTENCE),) * 2}"
    np.testing.assert_allclose(printed, qkv.self_attention(X, P).weights, rtol=0, atol=PRINTED)


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
    np.testing.assert_array_equal(printed_ints(text), lower)
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
    # on the page: the causal table's last row repeats the self-attention table's
    _, _, causal = weight_table(shown["three_kinds.py:causal"])
    _, _, plain = weight_table(shown["three_kinds.py:self"])
    np.testing.assert_array_equal(causal[-1], plain[-1])
    assert (np.abs(causal[:-1] - plain[:-1]).max(axis=-1) > 0.01).all()


@pytest.mark.claim("kinds-causal-prefix")
@pytest.mark.parametrize("t", range(1, 7))
def test_causal_outputs_of_a_prefix_ignore_every_later_token(t):
    full = qkv.self_attention(X, P, mask=qkv.causal_mask(6)).output
    prefix = qkv.self_attention(X[:t], P, mask=qkv.causal_mask(t)).output
    np.testing.assert_allclose(full[:t], prefix, rtol=1e-12, atol=1e-15)


# ---- padding ------------------------------------------------------------------------------


def padded_batch(junk):
    """The page's batch: the sentence, and its first four words padded with ``junk``."""
    return np.stack([X, np.vstack([X[:4], junk])])


PAD = qkv.padding_mask([6, 4], t=6)

JUNKS = [
    np.random.default_rng(seed).normal(size=(2, 16)) * scale
    for seed, scale in [(8, 1.0), (9, 1e3), (10, 1e-3)]
]


@pytest.mark.claim("kinds-padding-zeros")
def test_padded_keys_get_exactly_zero_weight(shown):
    np.testing.assert_array_equal(PAD, np.array([[[1] * 6], [[1] * 4 + [0] * 2]], dtype=bool))
    for junk in JUNKS:
        weights = qkv.self_attention(padded_batch(junk), P, mask=PAD).weights  # (2, 6, 6)
        assert (weights[1][:, 4:] == 0).all()
        assert (weights[0] > 0).all()  # the unpadded sequence loses nothing
    text = shown["three_kinds.py:padding"]
    assert text.splitlines()[0].startswith(f"padding mask {PAD.shape}")
    np.testing.assert_array_equal(printed_ints(text), PAD[:, 0].astype(int))
    columns, labels, printed = weight_table(text)
    assert columns == labels == [*toy.SENTENCE[:4], "<pad>", "<pad>"]
    assert (printed[:, 4:] == 0).all()
    assert shown.flag("three_kinds.py:padding", "weights on padding all exactly 0:")
    check_prose(
        "kinds-padding-zeros",
        max(qkv.self_attention(padded_batch(junk), P, mask=PAD).weights[1][:, 4:].max() for junk in JUNKS),
    )


@pytest.mark.claim("kinds-padding-no-leak")
def test_padding_content_never_reaches_real_tokens(shown):
    short = qkv.self_attention(X[:4], P)  # the four words alone, unpadded
    for junk in JUNKS:  # whatever the padding holds
        padded = qkv.self_attention(padded_batch(junk), P, mask=PAD)
        np.testing.assert_allclose(padded.output[1, :4], short.output, rtol=1e-12)
        np.testing.assert_allclose(padded.weights[1, :4, :4], short.weights, rtol=1e-12)
    # the page's real rows are the unpadded sequence's weights, zeros appended
    _, _, printed = weight_table(shown["three_kinds.py:padding"])
    np.testing.assert_allclose(printed[:4, :4], short.weights, rtol=0, atol=PRINTED)
    assert (
        shown.line("three_kinds.py:padding", "real tokens' outputs")
        == "real tokens' outputs equal the unpadded ones: True"
    )


@pytest.mark.claim("kinds-padding-queries")
def test_padded_queries_still_attend_to_the_real_tokens(shown):
    for junk in JUNKS:
        padded = qkv.self_attention(padded_batch(junk), P, mask=PAD)
        pad_rows = padded.weights[1][4:]  # (2, 6): the two padding positions as queries
        np.testing.assert_allclose(pad_rows.sum(axis=-1), 1.0, rtol=1e-12)
        assert (pad_rows[:, 4:] == 0).all() and np.isfinite(padded.output[1, 4:]).all()
        if np.abs(junk).max() < 10:  # (a query 1000 times too long puts all on one key)
            assert (pad_rows[:, :4] > 0).all()
    _, labels, printed = weight_table(shown["three_kinds.py:padding"])
    assert labels[4:] == ["<pad>", "<pad>"]
    assert (printed[4:, :4] > 0).all()
    np.testing.assert_allclose(printed[4:].sum(axis=-1), 1.0, rtol=0, atol=6 * PRINTED)


@pytest.mark.claim("kinds-mask-broadcast")
def test_causal_and_padding_masks_combine_by_broadcasting(shown):
    both = qkv.causal_mask(6) & PAD
    assert both.shape == (2, 6, 6)
    for b, length in enumerate([6, 4]):
        for i in range(6):
            for j in range(6):
                assert both[b, i, j] == (j <= i and j < length)
    weights = qkv.self_attention(padded_batch(JUNKS[0]), P, mask=both).weights
    assert (weights[~both] == 0).all() and (weights[both] > 0).all()
    check_prose(
        "kinds-mask-broadcast", *qkv.causal_mask(6).shape, *PAD.shape, *both.shape, weights[~both].max()
    )
    assert (
        shown.line("three_kinds.py:padding", "causal and padding together:")
        == f"causal and padding together: {both.shape}"
    )


# ---- cross --------------------------------------------------------------------------------


@pytest.mark.claim("kinds-cross-shape")
@pytest.mark.parametrize(("t_q", "t_k"), [(3, 6), (1, 9), (7, 2)])
def test_cross_attention_is_rectangular_with_rows_of_one(t_q, t_k):
    rng = np.random.default_rng(t_q * 10 + t_k)
    result = qkv.cross_attention(rng.normal(size=(t_q, 16)), rng.normal(size=(t_k, 16)), P)
    assert result.weights.shape == (t_q, t_k)
    assert result.output.shape == (t_q, P.d_v)
    np.testing.assert_allclose(result.weights.sum(axis=-1), 1.0, rtol=0, atol=1e-12)


@pytest.mark.claim("kinds-cross-shape")
def test_the_page_cross_attention_is_3_by_6_with_rows_of_one(shown):
    cross = qkv.cross_attention(DECODER, X, P)
    assert cross.weights.shape == (3, 6) and cross.output.shape == (3, toy.D_V)
    text = shown["three_kinds.py:cross"]
    assert text.splitlines()[0].split() == f"cross-attention weights: {(3, 6)} output: {(3, toy.D_V)}".split()
    columns, labels, printed = weight_table(text)
    # named by position, not by words: random weights under a sentence and its translation
    # read as an alignment
    assert columns == [f"s{i}" for i in range(1, 7)] and labels == ["t1", "t2", "t3"]
    np.testing.assert_allclose(printed, cross.weights, rtol=0, atol=PRINTED)
    np.testing.assert_allclose(printed.sum(axis=-1), 1.0, rtol=0, atol=6 * PRINTED)
    assert numbers(shown.line("three_kinds.py:cross", "row sums:")) == [1.0] * 3
    check_prose("kinds-cross-shape", *cross.weights.shape, cross.weights.sum(axis=-1).max())


@pytest.mark.claim("kinds-cross-widths")
def test_cross_attention_across_two_widths_gives_every_matrix_its_own_side(shown):
    """The printed shapes obey the sentence's rules: W_Q reads the decoder's width, W_K and
    W_V the encoder's (the toy sentence's, 16), W_Q and W_K share d_k, and W_O returns the
    output to the decoder's width; the widths differ, as the example says."""
    printed = {}
    for name in ("W_Q", "W_K", "W_V", "W_O"):
        ((rows, cols),) = re.findall(
            r"\((\d+), (\d+)\)", shown.line("three_kinds.py:cross_widths", name + " ")
        )
        printed[name] = (int(rows), int(cols))
    d_dec, d_k = printed["W_Q"]
    d_enc, d_v = printed["W_K"][0], printed["W_V"][1]
    assert d_enc == X.shape[-1] != d_dec
    assert printed["W_K"] == (d_enc, d_k) and printed["W_V"] == (d_enc, d_v)
    assert printed["W_O"] == (d_v, d_dec)  # one head
    t_q = 3
    rng = np.random.default_rng(0)
    mats = {name: rng.normal(size=shape) for name, shape in printed.items()}
    decoder = rng.normal(size=(t_q, d_dec))
    result = qkv.attention(decoder @ mats["W_Q"], X @ mats["W_K"], X @ mats["W_V"])
    assert result.weights.shape == (t_q, len(X)) and result.output.shape == (t_q, d_v)
    projected = result.output @ mats["W_O"]
    assert numbers(shown.line("three_kinds.py:cross_widths", "weights")) == [t_q, len(X), t_q, d_v]
    assert numbers(shown.line("three_kinds.py:cross_widths", "after W_O"))[-2:] == list(projected.shape)
    check_prose(
        "kinds-cross-widths",
        *printed["W_Q"],
        *printed["W_K"],
        d_k,
        *printed["W_V"],
        *printed["W_O"],
        *result.output.shape,
        *projected.shape,
    )


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
    lower_triangle = (
        "\n".join(
            ("[" if i == 0 else " ") + "[" + " ".join("1" if j <= i else "0" for j in range(5)) + "]"
            for i in range(5)
        )
        + "]"
    )
    assert three_kinds[section].startswith(lower_triangle + "\n")
    t = 5  # the exercise's five tokens
    forbidden = int((~qkv.causal_mask(t)).sum())
    assert three_kinds.values(section, "pairs forced to weight 0:") == [forbidden]
    assert three_kinds.values(section, "first token's weight on itself:") == [weights[0, 0]]
    # "5 · 4 / 2 = 10 forbidden pairs ... weight 1": T, T - 1, the halving, count, weight
    check_prose("kinds-exercise-causal-count", t, t - 1, ..., forbidden, weights[0, 0])


@pytest.mark.claim("kinds-exercise-cross-shapes")
def test_five_readers_of_six_words_get_5_by_6_weights_and_5_by_4_output(three_kinds):
    reader = np.random.default_rng(30).normal(size=(5, toy.D_MODEL))  # any five positions
    cross = qkv.cross_attention(reader, toy.embeddings(), toy.projections(toy.D_K, toy.D_V))
    assert cross.weights.shape == (len(reader), len(toy.SENTENCE))  # one row per asker
    assert cross.output.shape == (len(reader), toy.D_V)
    assert np.allclose(cross.weights.sum(axis=-1), 1.0)
    assert (
        three_kinds["three_kinds_exercises.py:cross_shapes"].split()
        == f"weights {cross.weights.shape} output {cross.output.shape}".split()
    )
    check_prose("kinds-exercise-cross-shapes", *cross.weights.shape, toy.D_V)
