"""Guards for the claims of docs/faq.md, "Short answers to common questions", that its long
answers' blocks print (``page_output`` of docs/faq-long-answers.md) or its figure shows.
"""

from __future__ import annotations

import numpy as np
import pytest
from pages_support import _cosine
from prose import check_prose
from qkv_site.figures import dot_vs_cosine
from support import shapes

import qkv


@pytest.fixture(scope="module")
def shown(page_output):
    return page_output("faq-long-answers.md")  # the FAQ's code runs on its long answers


@pytest.mark.claim("faq-cross-widths")
def test_cross_attention_matrices_read_the_width_of_their_own_sequence(shown):
    """Every shape the sentence gives, checked on the printed matrices: W_Q's rows are the
    decoder's width, W_K's and W_V's the encoder's, and W_O returns to the decoder's width."""
    printed = {
        name: shapes(shown.line("faq.py:other_source", name + " "))[0]
        for name in ("W_Q", "W_K", "W_V", "W_O")
    }
    weights, out, projected = shapes(shown.line("faq.py:other_source", "weights"))
    t_dec, t_enc = weights
    d_dec, d_k = printed["W_Q"]
    d_enc = printed["W_K"][0]
    d_v = printed["W_V"][1]
    assert d_dec != d_enc  # the example uses two widths, as the sentence says
    assert printed["W_K"] == (d_enc, d_k) and printed["W_V"] == (d_enc, d_v)
    assert printed["W_O"] == (1 * d_v, d_dec)  # one head
    assert out == (t_dec, d_v) and projected == (t_dec, d_dec)
    # and the formula runs with these shapes, while keys made at the decoder's width cannot
    rng = np.random.default_rng(1)
    dec, enc = rng.normal(size=(t_dec, d_dec)), rng.normal(size=(t_enc, d_enc))
    mats = {name: rng.normal(size=shape) for name, shape in printed.items()}
    w, o = qkv.attention(dec @ mats["W_Q"], enc @ mats["W_K"], enc @ mats["W_V"])
    assert w.shape == (t_dec, t_enc) and (o @ mats["W_O"]).shape == (t_dec, d_dec)
    with pytest.raises(ValueError):
        enc @ mats["W_Q"]  # W_Q reads d_dec columns, the encoder has d_enc
    check_prose("faq-cross-widths", ...)  # ...: "chapter 8"


def _dot_and_cosine_weights():
    """The figure's query and keys weighted by softmax of q·k and of cos(q, k), written here."""
    q, keys = dot_vs_cosine.QUERY, dot_vs_cosine.KEYS
    dot = np.exp(keys @ q)
    cos = np.exp(_cosine(q[None], keys)[0])
    return dot / dot.sum(), cos / cos.sum()


@pytest.mark.claim("faq-dot-vs-cosine")
def test_the_figures_dot_product_favours_the_long_key_and_cosine_the_nearer_one():
    d = dot_vs_cosine.data()
    q, keys = dot_vs_cosine.QUERY, dot_vs_cosine.KEYS
    lengths = np.linalg.norm(keys, axis=1)
    angles = np.degrees(np.arccos(_cosine(q[None], keys)[0]))
    long, short = int(np.argmax(lengths)), int(np.argmin(lengths))
    assert long != short and angles[short] < angles[long]  # the short key is nearer in direction
    dot, cos = _dot_and_cosine_weights()
    np.testing.assert_allclose(d.dot, dot, rtol=0, atol=1e-12)
    np.testing.assert_allclose(d.cosine, cos, rtol=0, atol=1e-12)
    assert dot[long] > 0.5 and cos[short] > 0.5  # "most of the weight" in each case
    np.testing.assert_allclose(d.lengths, lengths, rtol=0, atol=1e-12)
    np.testing.assert_allclose(d.angles, angles, rtol=0, atol=1e-9)
    check_prose("faq-dot-vs-cosine")


def test_dot_vs_cosine_alt_states_what_the_figure_shows():
    """The ALT's findings: key b long and further round, about four fifths of the dot-product
    weight on it, and cosine weights favouring a while staying close to even."""
    d = dot_vs_cosine.data()
    a, b = 0, 1
    assert "a (short)" == d.names[a] and "b (long)" == d.names[b]
    assert d.lengths[b] > d.lengths[a] and d.angles[b] > d.angles[a]
    assert abs(d.dot[b] - 4 / 5) < 0.025  # "about four fifths"
    assert d.cosine[a] > d.cosine[b] and abs(d.cosine[a] - d.cosine[b]) < 0.2  # "close to even"
    assert "four fifths" in dot_vs_cosine.ALT and "close to even" in dot_vs_cosine.ALT
