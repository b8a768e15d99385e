"""The query-key-arrows figure of chapter 2: what its ALT text states, checked against its
data() and against drank's query and the keys worked out by hand from the hand-built
matrices (a one-hot row of X picks one row of W)."""

from __future__ import annotations

import math

import numpy as np
from qkv_site.figures import query_key_arrows as figure

from qkv import toy


def by_hand():
    """Drank's query and every key over all eight columns, from the matrices' rows."""
    p = toy.hand_built_projections()
    rows = {f: i for i, f in enumerate(toy.FEATURES)}
    query = p.w_q[rows["verb"]]  # drank is the one-hot row "verb"
    keys = np.stack([sum(p.w_k[rows[f]] for f in toy.WORD_FEATURES[w]) for w in toy.SENTENCE])
    return query, keys


def test_the_plane_holds_every_score_exactly():
    d = figure.data()
    query, keys = by_hand()
    plane = [toy.FEATURES.index(f) for f in ("liquid", "person")]
    # "entries only in these two key columns": nothing of the query outside the plane
    assert d.off_plane == 0.0 and np.count_nonzero(query) == 2
    assert np.flatnonzero(query).tolist() == sorted(plane)
    np.testing.assert_array_equal(d.query, query[plane])
    assert d.query.tolist() == [8.0, 4.0]  # "reaching 8 along liquid and 4 along person"
    np.testing.assert_array_equal(d.keys, keys[:, plane])
    np.testing.assert_array_equal(d.scores, keys @ query)  # every column, not the plane's two
    np.testing.assert_array_equal(d.keys @ d.query, d.scores)  # and the plane gives the same


def test_alt_states_the_keys_the_reach_and_the_weights():
    d = figure.data()
    score = dict(zip(d.words, d.scores.tolist(), strict=True))
    assert score == {"she": 4.0, "drank": 0.0, "milk": 8.0, "from": 0.0, "a": 0.0, "cup": 0.0}
    at_origin = [w for w, k in zip(d.words, d.keys, strict=True) if not k.any()]
    assert at_origin == ["drank", "from", "a", "cup"]  # "sit at the origin"
    assert "drank, from, a and cup" in figure.ALT
    # the dashed line's foot: the query's reach along a unit key is the score
    for word, key in zip(d.words, d.keys, strict=True):
        if key.any():
            assert np.linalg.norm(key) == 1.0 and d.query @ key == score[word]
    exp = {w: math.exp(s / math.sqrt(8)) for w, s in score.items()}
    weights = {w: e / sum(exp.values()) for w, e in exp.items()}
    np.testing.assert_allclose(d.weights, list(weights.values()), rtol=1e-12)
    assert f"{weights['milk']:.2f}" == "0.68" and f"{weights['she']:.2f}" == "0.16"
    assert {f"{weights[w]:.2f}" for w in at_origin} == {"0.04"}
    assert "milk about 0.68, she about 0.16, each other word about 0.04" in figure.ALT
