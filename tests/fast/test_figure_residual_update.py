"""The residual-update figure of chapter 5: the layer adds drank's attention output, brought
back to the features by W_O, to drank's own row of X; what its ALT text says of the change
holds, checked with drank's weights worked out by hand."""

from __future__ import annotations

import math

import numpy as np
from qkv_site.figures import residual_update as figure

from qkv import toy


def test_the_change_is_the_weighted_values_handed_back_to_their_features():
    d = figure.data()
    # drank's scores by hand: 8 for milk (liquid), 4 for she (person), 0 for the rest
    scores = {"she": 4.0, "drank": 0.0, "milk": 8.0, "from": 0.0, "a": 0.0, "cup": 0.0}
    exp = {w: math.exp(s / math.sqrt(toy.D_K)) for w, s in scores.items()}
    weight = {w: e / sum(exp.values()) for w, e in exp.items()}
    # each value column carries one feature: she hands over person, drank verb, milk dairy,
    # cup container; from and a hand over nothing
    want = dict.fromkeys(toy.FEATURES, 0.0)
    for word, feature in (("she", "person"), ("drank", "verb"), ("milk", "dairy"), ("cup", "container")):
        want[feature] += weight[word]
    np.testing.assert_allclose(d.change, list(want.values()), rtol=1e-12)
    before = dict.fromkeys(toy.FEATURES, 0.0) | {"verb": 1.0}
    np.testing.assert_array_equal(d.before, list(before.values()))
    np.testing.assert_array_equal(d.after, d.before + d.change)  # added, not replaced


def test_alt_states_how_far_drank_moves_and_that_nothing_is_taken_away():
    d = figure.data()
    change = dict(zip(d.features, d.change, strict=True))
    assert f"{change['dairy']:.2f}" == "0.68" and f"{change['verb']:.2f}" == "0.04"
    assert "0.68 along dairy" in figure.ALT and "only 0.04 further along verb" in figure.ALT
    assert abs(change["dairy"] - 2 / 3) < 0.02  # "about two thirds of a unit of dairy"
    gained = [f for f, c in change.items() if c > 0 and f != "verb"]
    assert gained == ["person", "container", "dairy"]  # "person, dairy and container gain"
    assert (d.change >= 0).all()  # "nothing is taken away"
    np.testing.assert_array_equal(d.before[d.before > 0], [1.0])  # "length 1 along verb"
