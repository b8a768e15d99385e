"""The weighted-sum figure of chapter 5: its steps are the weights times the value rows, they
end at the output qkv.attention returns, and what its ALT text says about the words holds."""

from __future__ import annotations

import numpy as np
from qkv_site.figures import weighted_sum as figure

from qkv import toy
from qkv.projections import project


def test_the_steps_add_up_to_the_output_attention_returns():
    d = figure.data()
    q, k, v = project(toy.embeddings(), toy.projections(toy.D_K, toy.D_V))
    she = toy.SENTENCE.index("she")
    scores = k @ q[she] / np.sqrt(toy.D_K)
    weights = np.exp(scores - scores.max()) / np.exp(scores - scores.max()).sum()
    np.testing.assert_allclose(d.weights, weights, rtol=1e-12)
    np.testing.assert_array_equal(d.values, v)
    np.testing.assert_allclose(d.contributions, weights[:, None] * v, rtol=1e-12)
    np.testing.assert_array_equal(d.running[0], 0.0)  # the first bar starts at zero
    # "it ends exactly where the six steps end" (to rounding: a sum in another order)
    np.testing.assert_allclose(d.running[-1], d.output, rtol=0, atol=1e-14)
    np.testing.assert_allclose(d.output, weights @ v, rtol=0, atol=1e-14)


def test_alt_names_the_word_with_the_longest_steps_and_the_one_that_hardly_moves():
    d = figure.data()
    weight = dict(zip(d.words, d.weights, strict=True))
    assert f"{weight['drank']:.2f}" == "0.45" and f"{weight['from']:.2f}" == "0.02"
    longest = np.abs(d.contributions).argmax(axis=0)  # the word with the longest step, per chart
    assert sum(d.words[i] == "drank" for i in longest) == 3  # "in three of the four charts"
    assert "longest step in three of the four charts" in figure.ALT
    smallest = np.abs(d.contributions).max(axis=1).argmin()
    assert d.words[smallest] == "from"  # "from, with 0.02, hardly moves any"
    assert "from, with 0.02, hardly moves any" in figure.ALT
