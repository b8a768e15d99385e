"""Helpers the page tests of tests/fast/pages/ share."""

from __future__ import annotations

import inspect
from functools import cache

import numpy as np
import pytest
from hypothesis import strategies as st
from prose import claim_sentence, written_numbers
from qkv_site.figures import soft_vs_hard
from support import numbers

import qkv
from qkv import toy
from qkv.lab.scaling import score_samples
from qkv.toy import D_V

seeds = st.integers(0, 2**32 - 1)


widths = st.integers(1, 12)


WORDS = toy.SENTENCE


DRANK, MILK, FROM, CUP, SHE = (WORDS.index(w) for w in ("drank", "milk", "from", "cup", "she"))


def stated(claim_id):
    """The numbers a guarded sentence writes, in order. A test reads an exercise's givens
    (a threshold, a factor) here and computes with them, rather than keep its own copy."""
    return [w.value for w in written_numbers(claim_sentence(claim_id))]


def reference_attention(q, k, v):
    """softmax(q kᵀ / √d_k) v written out with np.exp, independent of qkv."""
    scores = q @ k.T / np.sqrt(q.shape[-1])
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights, weights @ v


def random_projections(seed, d_model, d_k, d_v):
    return qkv.Projections.random(np.random.default_rng(seed), d_model, d_k, d_v)


def random_tied_case(seed, d_k, t):
    """``t`` random inputs of width 6 and projections with W_Q tied to W_K."""
    p = random_projections(seed, 6, d_k, 3)
    x = np.random.default_rng(seed).normal(size=(t, 6))
    return x, qkv.Projections(p.w_k, p.w_k, p.w_v)


def assert_printed(text, expected, decimals):
    """The numbers in ``text`` are ``expected`` rounded to ``decimals`` places."""
    np.testing.assert_allclose(numbers(text), np.ravel(expected), rtol=0, atol=0.5 * 10.0**-decimals + 1e-9)


def named_numbers(text):
    """'she 0.16, drank 0.04, ...' (after a label and a colon) as {'she': 0.16, ...}."""
    pairs = [item.split() for item in text.split(":", 1)[-1].split(",")]
    return {name: float(value) for name, value in pairs}


def unnamed_block(shown, marker):
    """What a block that runs several snippet sections prints, found by one printed line."""
    found = [
        b.text
        for b in shown.blocks
        if b.section is None and any(ln.strip().startswith(marker) for ln in b.text.splitlines())
    ]
    assert len(found) == 1, f"docs/{shown.page}: {len(found)} such blocks print {marker!r}"
    return found[0]


def line_of(text, start):
    """The one line of ``text`` that starts with ``start`` (stripped)."""
    (line,) = [ln.strip() for ln in text.splitlines() if ln.strip().startswith(start)]
    return line


# drank's hand-written scores (chapter 2): 8/√8 on milk, 4/√8 on she, 0 on the other four
E_8, E_4 = np.exp(8 / np.sqrt(8)), np.exp(4 / np.sqrt(8))


DRANK_ON_MILK, DRANK_ON_SHE, DRANK_ON_OTHER = np.array([E_8, E_4, 1]) / (E_8 + E_4 + 4)


# ---- 1. Attention is a weighted average --------------------------------------------------

# The palette of chapter 1, from the figure module that draws it (tests/fast/test_figures.py
# checks it against what the page prints), in the order the page lists the entries.
NAMES, KEYS, VALUES = soft_vs_hard.NAMES, soft_vs_hard.KEYS, soft_vs_hard.VALUES


WARM = soft_vs_hard.QUERY  # "something warm"


RED, ORANGE, BLUE = NAMES.index("red"), NAMES.index("orange"), NAMES.index("blue")


def palette_weights(query):
    """Softmax of the palette's scores for ``query``, written out here (d_k = 2)."""
    s = KEYS @ np.asarray(query, dtype=float) / np.sqrt(2)
    e = np.exp(s - s.max())
    return e / e.sum()


def scores_of(x, p):
    q, k, _ = qkv.project(x, p)
    return q @ k.T / np.sqrt(p.d_k)


def pair_lines(text):
    """The printed 'milk -> from' and 'from -> milk' lines: [score, weight] for each."""
    return numbers(line_of(text, "milk -> from:")), numbers(line_of(text, "from -> milk:"))


def _cosine(q, k):
    """Cosine of every query with every key: (Tq, d), (Tk, d) -> (Tq, Tk)."""
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    k = k / np.linalg.norm(k, axis=-1, keepdims=True)
    return q @ k.T


def _layer(seed=0, d_model=512, n_heads=8, n_kv_heads=None, t=6, batch=()):
    rng = np.random.default_rng(seed)
    w = qkv.MultiHeadWeights.random(rng, d_model=d_model, n_heads=n_heads, n_kv_heads=n_kv_heads)
    return w, rng.normal(size=(*batch, t, d_model))


def _n_params(w: qkv.MultiHeadWeights) -> int:
    return sum(np.size(m) for m in (w.w_q, w.w_k, w.w_v, w.w_o))


EXACT = 1e-12  # "to within 10^-12": the bound the page states for equal outputs


X = toy.embeddings()  # the toy sentence, as every chapter uses it

P = toy.projections(toy.D_K, toy.D_V)  # the site's toy head


Z = 5  # standard errors allowed

DIMS = [2**i for i in range(10)]  # the page's table: d_k = 1, 2, 4, ..., 512

N = inspect.signature(score_samples).parameters["n_draws"].default  # pairs per d_k


def rel_se_std(d: int, n: int) -> float:
    """Relative standard error of the sample std of q·k (see module docstring)."""
    return 0.5 * np.sqrt((2 + 6 / d) / n)


def printed(text: str, prefix: str) -> list[float]:
    """The numbers of the one printed line that starts with ``prefix``, after it."""
    (line,) = [ln.strip() for ln in text.splitlines() if ln.strip().startswith(prefix)]
    return numbers(line.removeprefix(prefix))


SENTENCE = "The cat sat on the mat because it was warm"

THRESHOLD = 0.5  # more than half the weight: what the page counts as a kind of head

HALF = 12  # random tokens in each half of a repeated text, as the page

INDUCTION = {(17, 3), (17, 4), (17, 5), (18, 6), (18, 7)}  # as the page finds them (from 0)

PREVIOUS = {(1, 2), (2, 1), (11, 1), (16, 0)}


def once_per_run_fixture(compute):
    """A module fixture computed once per test run, not once per pytest-xdist worker (the
    workers share this module's tests, and these take 10 to 60 s each): the worker that
    computes it sets up the fixtures ``compute`` names; the other reads its result."""

    @pytest.fixture(scope="module", name=compute.__name__)
    def fixture(request, once_per_run):
        needs = inspect.signature(compute).parameters
        return once_per_run(
            f"trained-model-{compute.__name__}",
            lambda: compute(*(request.getfixturevalue(name) for name in needs)),
        )

    fixture.__doc__ = compute.__doc__
    return fixture


def even(t: int, queries) -> float:
    """Mean weight a uniform causal head gives one key per query: query i sees i + 1 keys."""
    return float(np.mean([1 / (i + 1) for i in queries]))


def on_first(w):  # (..., T, T) -> (...): mean weight on key 0 over queries 1..T-1
    return np.mean([w[..., i, 0] for i in range(1, w.shape[-1])], axis=0)


def on_previous(w):
    return np.mean([w[..., i, i - 1] for i in range(1, w.shape[-1])], axis=0)


def on_earlier_copy(w):  # repeated texts: query i in the second half, its copy at i - HALF
    return np.mean([w[..., i, i - HALF] for i in range(HALF, 2 * HALF)], axis=0)


def on_after_copy(w):  # ... and the token that followed the copy, at i - HALF + 1
    return np.mean([w[..., i, i - HALF + 1] for i in range(HALF, 2 * HALF)], axis=0)


def above(scores) -> set[tuple[int, int]]:
    return {(int(ly), int(h)) for ly, h in np.argwhere(scores > THRESHOLD)}


def log_softmax(logits):
    lg = np.asarray(logits, dtype=np.float64)
    lg = lg - lg.max(-1, keepdims=True)
    return lg - np.log(np.exp(lg).sum(-1, keepdims=True))


@cache
def reference(d_k: int, scale: bool):
    """Raw scores, scaled scores, weights, outputs (all queries) and values, from qkv."""
    q, k, v = qkv.project(toy.embeddings(), toy.projections(d_k, d_v=D_V))
    raw = q @ k.T  # (T, T)
    weights, output = qkv.attention(q, k, v, scale=scale)
    return raw, raw * qkv.scale_factor(scale, d_k), weights, output, v


def decoded(values, data) -> np.ndarray:
    return np.asarray(values, dtype=float) / 10 ** data["decimals"]


def by_state(data, field, query, d_k, scale):
    """Look a state up in the exported data, the way the page does."""
    q, d, s = WORDS.index(query), d_k - 1, int(scale)
    if field == "raw":
        return decoded(data["raw"][q][d], data)
    if field == "scaled":
        return decoded(data["scaled"][q][d], data) if scale else decoded(data["raw"][q][d], data)
    return decoded(data[field][s][q][d], data)
