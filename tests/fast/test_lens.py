"""qkv.lab.lens reads each layer's stream the way the model reads its last one.

The streams are the forward pass's own (the last one gives the model's logits bit for bit);
the lens of the last layer is the model's next-token distribution; each row is divided by
its own RMS, checked against a lens written here that reuses the last layer's instead and
differs by far more than rounding.
"""

from __future__ import annotations

import numpy as np
import pytest
from tiny_model import tiny_model

import qkv
from qkv import smollm2
from qkv.lab import lens

TEXT = "The capital of France is"
EPS32 = np.finfo(np.float32).eps


@pytest.fixture(scope="module")
def trace(model):
    return smollm2.run(TEXT, model)


@pytest.fixture(scope="module")
def seen(model, trace):
    return lens.logit_lens(model, trace)


def test_the_streams_are_the_forward_pass_own(model, trace):
    x = lens.streams(model, trace.ids)
    assert x.shape == (model.config.n_layers + 1, len(trace.ids), model.config.d_model)
    assert np.array_equal(x[0], model.embedding[trace.ids])
    assert np.array_equal(smollm2.output_logits(model, x[-1]), trace.logits)


def test_the_last_layer_lens_is_the_model_next_token_distribution(model, trace, seen):
    probs = qkv.softmax(trace.logits[-1].astype(np.float64))
    want = np.argsort(-probs, kind="stable")[:5]
    assert seen.top_ids[-1].tolist() == want.tolist()
    assert seen.final_id == want[0] and seen.final_ranks[-1] == 1
    # The lens multiplies one row by the embedding, the forward pass all T rows at once: a
    # BLAS may sum in another order, so the logits agree to float32 rounding (64 units of the
    # largest logit), and a probability to twice that, relatively (log p = logit − logsumexp).
    logit_tolerance = 64 * EPS32 * np.abs(trace.logits[-1]).max()
    np.testing.assert_allclose(seen.top_probs[-1], probs[want], rtol=2 * logit_tolerance, atol=0)
    assert seen.final_probs[-1] == seen.top_probs[-1, 0]


def by_hand(model, rows, scales):
    """log-softmax of the final norm's gain times rows / scales, through the embedding."""
    h = (rows / scales[:, None] * model.final_norm).astype(np.float32)  # (L + 1, d_model)
    logits = (h @ model.embedding.T).astype(np.float64)  # (L + 1, vocab)
    top = logits.max(axis=-1, keepdims=True)
    return logits - top - np.log(np.exp(logits - top).sum(axis=-1, keepdims=True))


def test_each_row_is_normalised_by_its_own_rms_not_the_last_layers(model, trace, seen):
    rows = lens.streams(model, trace.ids)[:, -1].astype(np.float64)  # (31, d_model)
    own = np.sqrt(np.mean(rows * rows, axis=-1) + model.config.norm_eps)  # (31,)
    np.testing.assert_allclose(seen.scales, own, rtol=1e-12)
    log_own = by_hand(model, rows, own)[:, seen.final_id]
    log_reused = by_hand(model, rows, np.full_like(own, own[-1]))[:, seen.final_id]
    # the lens agrees with its own-scale reading to float32 rounding of the logits
    tolerance = 2 * 64 * EPS32 * np.abs(trace.logits[-1]).max()
    np.testing.assert_allclose(np.log(seen.final_probs), log_own, rtol=0, atol=tolerance)
    # and the two readings are far apart, so the check above tells them apart: the early
    # streams are much smaller than the last one
    assert own[:-1].min() < 0.1 * own[-1], own.round(2).tolist()
    gap = np.abs(log_own - log_reused)
    assert gap[:-1].max() > 1000 * tolerance, gap.round(3).tolist()
    assert gap[-1] == 0.0  # the last row's own scale is the last layer's


def test_the_capital_of_france_is_paris_at_the_last_layer(model, seen):
    assert model.pieces([seen.final_id]) == (" Paris",)
    n_layers = model.config.n_layers
    assert seen.top_ids.shape == seen.top_probs.shape == (n_layers + 1, 5)
    first = seen.top_from()
    assert 1 <= first <= n_layers and (seen.final_ranks[first:] == 1).all()
    assert seen.final_ranks[first - 1] > 1  # not top one row earlier
    np.testing.assert_array_equal(seen.top_ids[first:, 0], seen.final_id)


def test_position_reads_that_row_and_counts_from_the_end(model, trace):
    at_two = lens.logit_lens(model, trace.ids, position=2, top=3)
    from_end = lens.logit_lens(model, trace.ids, position=2 - len(trace.ids), top=3)
    assert at_two.position == from_end.position == 2
    assert np.array_equal(at_two.top_ids, from_end.top_ids)
    probs = qkv.softmax(trace.logits[2].astype(np.float64))
    assert at_two.top_ids[-1].tolist() == np.argsort(-probs, kind="stable")[:3].tolist()
    with pytest.raises(ValueError, match="position 5 is outside a text of 5 tokens"):
        lens.logit_lens(model, trace.ids, position=5)


def test_on_a_tiny_model_each_row_is_read_as_the_last_one_is():
    model = tiny_model(seed=3, n_layers=3)
    ids = [1, 4, 1, 5, 9]
    seen = lens.logit_lens(model, ids, position=-2, top=10)  # the whole vocabulary, sorted
    x = lens.streams(model, ids)[:, 3]  # (4, d_model)
    for row, streams_row in enumerate(x):
        # the final norm of this row alone: the same function the model's output uses
        probs = qkv.softmax(smollm2.output_logits(model, streams_row[None])[0])
        np.testing.assert_allclose(np.sort(probs)[::-1], seen.top_probs[row], rtol=1e-12)
        assert seen.final_ranks[row] == 1 + (probs > probs[seen.final_id]).sum()
