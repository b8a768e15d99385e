"""Fixtures the page tests of tests/fast/pages/ share."""

from __future__ import annotations

import numpy as np
import pytest
from pages_support import (
    HALF,
    SENTENCE,
    above,
    even,
    on_after_copy,
    on_earlier_copy,
    on_first,
    on_previous,
    once_per_run_fixture,
    scores_of,
)
from qkv_site.figures._trained import TEXTS
from support import softmax_by_hand

import qkv
from qkv import smollm2, toy
from qkv.lab import head_scores, interventions


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


@pytest.fixture(scope="module")
def trace(model):
    return smollm2.run(SENTENCE, model)


@pytest.fixture(scope="module")
def texts(model):
    return [smollm2.run(text, model) for text in TEXTS]


@pytest.fixture(scope="module")
def repeats():
    ids = head_scores.repeated_random_tokens(4, HALF, seed=0)
    assert np.array_equal(ids[:, :HALF], ids[:, HALF:])  # what the scores below assume
    return ids


@pytest.fixture(scope="module")
def repeated(model, repeats):
    return [smollm2.forward(model, ids) for ids in repeats]


@once_per_run_fixture
def kinds(texts, repeated):
    """{kind: ((layers, heads) scores, even-spread baseline)}, as the page defines them."""
    n = [len(t.ids) for t in texts]
    second_half = range(HALF, 2 * HALF)
    return {
        "first": (
            np.mean([on_first(t.weights.astype(float)) for t in texts], 0),
            np.mean([even(k, range(1, k)) for k in n]),
        ),
        "previous": (
            np.mean([on_previous(t.weights.astype(float)) for t in texts], 0),
            np.mean([even(k, range(1, k)) for k in n]),
        ),
        "duplicate": (
            np.mean([on_earlier_copy(t.weights.astype(float)) for t in repeated], 0),
            even(2 * HALF, second_half),
        ),
        "induction": (
            np.mean([on_after_copy(t.weights.astype(float)) for t in repeated], 0),
            even(2 * HALF, second_half),
        ),
    }


@once_per_run_fixture
def induction_losses(model, kinds, repeats):
    """Loss on the repeated half as run, with the induction heads off, with the
    previous-token heads off, and with four draws of as many other heads off (the page's
    draw: NumPy's generator seeded 0 choosing among the other heads in layer order)."""
    induction, previous = above(kinds["induction"][0]), above(kinds["previous"][0])
    rng = np.random.default_rng(0)
    others = [(ly, h) for ly in range(30) for h in range(9) if (ly, h) not in induction | previous]
    controls = [{others[i] for i in rng.choice(len(others), len(induction), replace=False)} for _ in range(4)]
    variants = [set(), induction, previous, *controls]
    rows = np.arange(HALF, 2 * HALF - 1)  # predicting positions HALF + 1 .. 2 HALF - 1
    logits = interventions.run_edited(
        model, repeats, interventions.heads_off(model.config, variants), rows=rows
    ).logits.astype(np.float64)
    log_p = (
        logits
        - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True))
        - logits.max(-1, keepdims=True)
    )
    nxt = repeats[:, rows + 1]  # (texts, rows)
    loss = np.array(
        [
            [-np.mean([log_p[v, t, r, nxt[t, r]] for r in range(len(rows))]) for t in range(len(repeats))]
            for v in range(len(variants))
        ]
    ).mean(axis=1)
    return loss, controls


@once_per_run_fixture
def first_time_loss(repeated):
    losses = []
    for t in repeated:
        lg = t.logits[: HALF - 1].astype(np.float64)
        log_p = lg - lg.max(-1, keepdims=True)
        log_p -= np.log(np.exp(log_p).sum(-1, keepdims=True))
        losses.append(-log_p[np.arange(HALF - 1), t.ids[1:HALF]].mean())
    return float(np.mean(losses))


@once_per_run_fixture
def saturation(texts):
    """Within-row and pooled spread of raw scores, and largest weights with/without 1/8."""
    within, pooled, top = [], [], {8.0: [], 1.0: []}
    for t in texts:
        n = len(t.ids)
        q = t.q.astype(np.float64)
        k = t.k.astype(np.float64)[:, [h // 3 for h in range(9)]]  # each query head's keys
        raw = np.einsum("lhid,lhjd->lhij", q, k)
        for i in range(1, n):
            within.append(raw[:, :, i, : i + 1].std(-1))
        pooled.append(raw[:, :, np.tril(np.ones((n, n), bool))])
        for divisor in top:
            s = np.where(np.tril(np.ones((n, n), bool)), raw / divisor, -np.inf)
            w = softmax_by_hand(s)
            top[divisor].append(w[:, :, 1:].max(-1).ravel())
    return (
        float(np.mean(within)),
        float(np.concatenate(pooled, -1).std()),
        {d: np.concatenate(v) for d, v in top.items()},
    )
