"""The kv-cache-growing figure of chapter 12: what its ALT text states, checked against its
data() with the projections and the softmax worked out here in NumPy."""

from __future__ import annotations

import numpy as np
from qkv_site.figures import kv_cache_growing

from qkv import toy


def test_each_step_adds_one_row_and_keeps_every_earlier_row_unchanged():
    d = kv_cache_growing.data()
    x, p = toy.embeddings(), toy.projections(toy.D_K)
    assert d.words == ("she", "drank", "milk", "from", "a", "cup")  # "six columns"
    assert [len(k) for k in d.keys] == [1, 2, 3, 4, 5, 6]  # "after step t it holds t rows"
    assert [len(v) for v in d.values] == [1, 2, 3, 4, 5, 6]
    assert d.added == (1,) * 6  # "gains exactly one row"
    assert d.moved == (0.0,) * 6  # "keeps every row stored before it unchanged"
    for t in range(1, 6):  # the same, read off the snapshots themselves
        assert np.array_equal(d.keys[t][:t], d.keys[t - 1])
        assert np.array_equal(d.values[t][:t], d.values[t - 1])
    # "the new word's key and value": row t is word t's input times W_K and W_V
    for t in range(6):
        np.testing.assert_allclose(d.keys[t][t], x[t] @ p.w_k, rtol=0, atol=1e-12)
        np.testing.assert_allclose(d.values[t][t], x[t] @ p.w_v, rtol=0, atol=1e-12)


def test_the_new_words_weights_over_the_cache_are_the_causal_pass():
    d = kv_cache_growing.data()
    x, p = toy.embeddings(), toy.projections(toy.D_K)
    q, k = x @ p.w_q, x @ p.w_k
    for t in range(6):
        scores = k[: t + 1] @ q[t] / np.sqrt(toy.D_K)  # the new query against every cached key
        weights = np.exp(scores - scores.max())
        weights /= weights.sum()
        np.testing.assert_allclose(d.weights[t], weights, rtol=0, atol=1e-12)
        # the caption: those of a causal pass over the whole sentence, zero past the word
        np.testing.assert_allclose(d.causal[t, : t + 1], weights, rtol=0, atol=1e-12)
        assert (d.causal[t, t + 1 :] == 0).all()
