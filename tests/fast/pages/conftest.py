"""Fixtures the page tests of tests/fast/pages/ share."""

from __future__ import annotations

import pytest
from pages_support import scores_of

import qkv
from qkv import toy


@pytest.fixture(scope="module")
def hand_built():
    """The hand-built toy's Q, K, V and attention, from qkv.toy."""
    q, k, v = qkv.project(toy.feature_embeddings(), toy.hand_built_projections())
    return q, k, v, qkv.attention(q, k, v)


@pytest.fixture(scope="module")
def random_toy():
    """The random toy of chapter 2: X, its projections with d_k = 8 and d_v = 4, Q, K, V."""
    x, p = toy.embeddings(), toy.projections(d_k=toy.D_K, d_v=toy.D_V)
    return (x, p, *qkv.project(x, p))


@pytest.fixture(scope="module")
def tie():
    """Chapter 4's random toy: X and separate projections with d_k = 8 and, as the page says,
    values 8 wide; the scores and weights separate, and with W_Q = W_K."""
    x, p = toy.embeddings(), toy.projections(d_k=toy.D_K, d_v=8)
    qk = qkv.Projections(p.w_k, p.w_k, p.w_v)
    return {
        "x": x,
        "p": p,
        "S": scores_of(x, p),
        "W": qkv.self_attention(x, p).weights,
        "S_tied": scores_of(x, qk),
        "W_tied": qkv.self_attention(x, qk).weights,
    }
