"""The one-layer figure of chapter 14: what its ALT text and caption state, checked against
its data(). The steps must add up to qkv.smollm2.decoder_layer itself, and which steps
combine tokens is found here again by changing one token's rows at random and watching
every later token's rows."""

from __future__ import annotations

import numpy as np
from qkv_site.figures import one_layer

from qkv import smollm2, toy


def test_the_steps_are_the_decoder_layer_and_keep_the_inputs_shape():
    d = one_layer.data()
    x = toy.embeddings()
    want, trace = smollm2.decoder_layer(x, d.layer, d.config, positions=range(len(x)))
    np.testing.assert_allclose(d.arrays["output"], want, rtol=0, atol=1e-12)
    np.testing.assert_allclose(d.arrays["weights"], trace.weights, rtol=0, atol=1e-12)
    assert x.shape == d.arrays["output"].shape == (6, 16)  # "the shape of its input, 6 × 16"
    # the caption: two query heads of width 8 share one key/value head
    assert d.arrays["q"].shape == (2, 6, 8)
    assert d.arrays["k"].shape == d.arrays["v"].shape == (1, 6, 8)
    weights = d.arrays["weights"]
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=0, atol=1e-12)
    assert (weights[:, np.triu_indices(6, 1)[0], np.triu_indices(6, 1)[1]] == 0).all()  # causal


def test_only_the_scores_and_the_blend_combine_different_tokens():
    d = one_layer.data()
    functions = one_layer._functions(d.config, d.layer)
    rng = np.random.default_rng(0)
    combining = set()
    for step in d.steps:
        inputs = [d.arrays[n] for n in step.inputs]
        before = functions[step.name](*inputs)
        for j in range(5):  # change token j's rows of every input, at random
            changed = [a.copy() for a in inputs]
            for a in changed:
                a[..., j, :] += rng.normal(size=a[..., j, :].shape)
            after = functions[step.name](*changed)
            for b, a in zip(before, after, strict=True):
                later = (..., slice(j + 1, None), slice(None))  # the rows of tokens after j
                if not np.allclose(b[later], a[later], rtol=0, atol=1e-12):
                    combining.add(step.name)
    assert combining == {"score", "blend"}
    assert {name for name, mixes in d.mixes.items() if mixes} == combining  # what the figure colours
