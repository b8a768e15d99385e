"""What the two-products chapter and its deep dive print about a tied head (W_Q = W_K):
the weight ratio the chapter writes, and the seventh word that outscores milk's own key.

The algebra behind these sentences is tested in tests/fast/test_projections.py."""

from __future__ import annotations

import numpy as np
import pytest
from prose import check_prose

import qkv
from qkv import toy

WORDS = toy.SENTENCE
MILK, FROM = WORDS.index("milk"), WORDS.index("from")


@pytest.fixture(scope="module")
def tied():
    """The random toy of the chapter (d_k = 8) with W_Q = W_K: scaled scores and weights."""
    x, p = toy.embeddings(), toy.projections(d_k=toy.D_K, d_v=8)
    q, k, _ = qkv.project(x, qkv.Projections(p.w_k, p.w_k, p.w_v))
    s = q @ k.T / np.sqrt(p.d_k)
    e = np.exp(s)  # written out: the weights are e^s over each row's total
    return x, p, s, e / e.sum(axis=-1, keepdims=True), e.sum(axis=-1)


@pytest.mark.claim("three-tied-weights-not-symmetric")
def test_tied_milk_gives_from_the_ratio_the_chapter_writes(page_output, tied):
    _, _, s, w, _ = tied
    assert s[MILK, FROM] == pytest.approx(s[FROM, MILK], abs=1e-12)
    ratio = w[MILK, FROM] / w[FROM, MILK]
    check_prose("three-tied-weights-not-symmetric", ratio)
    shown = page_output("why-three-projections.md")
    printed = shown.values("tie_query_key.py:symmetric", "weight milk -> from over from -> milk:")
    assert printed == [pytest.approx(ratio, abs=0.05)]


@pytest.mark.claim("three-tied-row-total-ratio")
def test_tied_the_row_totals_differ_by_that_same_ratio(page_output, tied):
    _, _, _, w, totals = tied
    ratio = totals[FROM] / totals[MILK]
    np.testing.assert_allclose(ratio, w[MILK, FROM] / w[FROM, MILK], rtol=1e-9)
    check_prose("three-tied-row-total-ratio", ratio)
    shown = page_output("why-three-projections.md")
    printed = shown.values("tie_query_key.py:symmetric", "row total of from over that of milk:")
    assert printed == [pytest.approx(ratio, abs=0.05)]


@pytest.mark.claim("three-tied-top-not-self")
def test_tied_milk_scores_its_doubled_copy_above_itself(page_output, tied):
    x, p, _, _, _ = tied
    k = x @ p.w_k  # tied: milk's query is its key
    own, doubled = k[MILK] @ k[MILK], k[MILK] @ (2 * k[MILK])
    assert doubled == pytest.approx(2 * own, rel=1e-12) and own > 0
    check_prose("three-tied-top-not-self")  # "twice" is written out
    shown = page_output("why-three-projections-in-depth.md")
    printed = shown.values("tie_query_key.py:longer_key", "milk with itself:")
    np.testing.assert_allclose(printed, [own, doubled], atol=0.005 + 1e-9)


@pytest.mark.claim("three-tied-pairwise-self")
def test_tied_no_pair_of_the_seven_words_each_prefers_the_other(page_output, tied):
    x, p, _, _, _ = tied
    k = np.vstack([x, 2 * x[MILK]]) @ p.w_k
    s, own = k @ k.T, np.einsum("ij,ij->i", k, k)
    prefers = s > own[:, None]
    assert prefers.any() and not (prefers & prefers.T).any()
    shown = page_output("why-three-projections-in-depth.md")
    assert shown.values(
        "tie_query_key.py:longer_key", "pairs in which each scores the other above itself:"
    ) == [0]
    gap = own[:, None] + own[None, :] - 2 * s
    printed = shown.values("tie_query_key.py:longer_key", "smallest s_ii + s_jj - 2 s_ij over pairs:")
    assert printed == [pytest.approx(gap[~np.eye(len(k), dtype=bool)].min(), abs=0.005 + 1e-9)]
    assert printed[0] >= 0
