"""Helpers the page tests of tests/fast/pages/ share."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from prose import claim_sentence, written_numbers
from qkv_site.figures import soft_vs_hard
from support import numbers

import qkv
from qkv import toy

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
