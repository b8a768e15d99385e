"""qkv.lab.attribution splits the logit difference into parts that add up to it.

The sum is checked against a bound on the float32 forward pass's rounding, worked out here
from the sizes of the numbers it adds; every head's share is checked against a second
computation from the trace (its weights times its values, its rows of W_O, the frozen
scale, two rows of the embedding).
"""

from __future__ import annotations

import numpy as np
import pytest
from tiny_model import tiny_model

from qkv import smollm2
from qkv.lab import attribution, interventions, lens, patching

TEXT = "The capital of France is"
U32 = np.finfo(np.float32).eps / 2  # float32's unit roundoff


def gamma(n: int) -> float:
    """The bound on the relative error of an n-term float32 dot product (Higham's γ_n)."""
    return n * U32 / (1 - n * U32)


@pytest.fixture(scope="module")
def case(model):
    ids = model.encode(TEXT)
    a, b = int(model.encode(" Paris")[0]), int(model.encode(" London")[0])
    return ids, a, b, attribution.direct_logit_attribution(model, ids, a, b)


def test_the_parts_add_up_to_the_logit_difference(model, case):
    ids, a, b, dla = case
    config = model.config
    assert dla.heads.shape == (config.n_layers, config.n_heads) and dla.mlps.shape == (config.n_layers,)
    run = patching.record(model, ids)  # the stream entering each layer, each head's output
    u = np.abs(model.final_norm * (model.embedding[a] - model.embedding[b])).astype(np.float64) / dla.scale
    # Each layer adds its heads' outputs through W_O (a 576-term float32 dot product per
    # entry) and adds that to the stream (one more rounding); the parts here take each head's
    # write in float64, so the sum differs from the stream by at most this, entry by entry:
    error = np.zeros(config.d_model)
    for i, layer in enumerate(model.layers):
        heads = np.abs(run.heads[i][:, -1].reshape(-1)).astype(np.float64)  # (n_heads * d_head,)
        written = heads @ np.abs(layer.attention.w_o).astype(np.float64)  # (d_model,)
        entering = np.abs(run.streams[i, -1]).astype(np.float64)
        error += (gamma(config.n_heads * config.d_head) + 2 * U32) * written + U32 * (entering + written)
    bound = error @ u + 1e-9  # and float64's own rounding of ~300 terms, far below 1e-9
    assert abs(dla.total() - dla.logit_difference) <= bound, (dla.total(), dla.logit_difference, bound)
    # the bound is a worst case (every rounding the same way), yet small beside the shares:
    # leaving out any part whose share is above 0.05 would break the sum
    assert bound < 0.05, bound
    # the logit difference is the run's own: the model's logits, rounded in float32
    logits = smollm2.forward(model, ids).logits[-1]
    tolerance = 64 * np.finfo(np.float32).eps * np.abs(logits).max()
    assert abs(dla.logit_difference - (float(logits[a]) - float(logits[b]))) <= 2 * tolerance


def test_every_head_share_is_its_output_through_w_o_read_along_the_answer(model, case):
    ids, a, b, dla = case
    config = model.config
    trace = smollm2.forward(model, ids)
    outputs = interventions.head_outputs(trace)[:, :, -1].astype(np.float64)  # (L, H, d_head): weights @ v
    final = lens.streams(model, ids)[-1, -1].astype(np.float64)  # the forward pass's own
    scale = np.sqrt(np.mean(final**2) + config.norm_eps)
    direction = model.final_norm * (model.embedding[a].astype(np.float64) - model.embedding[b])
    want = np.zeros((config.n_layers, config.n_heads))
    bound = np.zeros_like(want)
    for i, layer in enumerate(model.layers):
        for h in range(config.n_heads):
            rows = layer.attention.w_o[h * config.d_head : (h + 1) * config.d_head].astype(np.float64)
            read = rows @ direction / scale  # (d_head,): what one unit of each output entry adds
            want[i, h] = outputs[i, h] @ read
            # weights @ v is a T-term float32 sum, computed here and inside the layer apart
            weighted = trace.weights[i, h, -1].astype(np.float64) @ np.abs(trace.v[i, config.kv_head(h)])
            bound[i, h] = 2 * gamma(len(ids)) * weighted @ np.abs(read) + 1e-9
    assert np.isclose(dla.scale, scale, rtol=1e-12, atol=0)
    assert (np.abs(dla.heads - want) <= bound).all(), np.abs(dla.heads - want).max()
    assert np.abs(want).max() > 100 * bound.max()  # the shares are far above the bound


def test_the_embedding_share_and_position(model, case):
    ids, a, b, dla = case
    early = attribution.direct_logit_attribution(model, ids, a, b, position=2)
    assert early.position == 2 and dla.position == len(ids) - 1
    logits = smollm2.forward(model, ids[:3]).logits[-1]
    tolerance = 64 * np.finfo(np.float32).eps * np.abs(logits).max()
    assert abs(early.logit_difference - (float(logits[a]) - float(logits[b]))) <= 2 * tolerance
    embedding = model.embedding[ids[2]].astype(np.float64)
    direction = model.final_norm * (model.embedding[a].astype(np.float64) - model.embedding[b])
    assert np.isclose(early.embedding, embedding @ direction / early.scale, rtol=1e-9)


def test_on_a_tiny_float64_model_the_parts_add_up_to_rounding_and_each_layer_is_split_right():
    model = tiny_model(seed=3, n_layers=3)  # float64 weights: rounding near 1e-16
    ids = [1, 4, 1, 5, 9]
    dla = attribution.direct_logit_attribution(model, ids, 2, 7, position=3)
    logits = smollm2.output_logits(model, lens.streams(model, ids)[-1, 3])
    assert abs(dla.logit_difference - (logits[2] - logits[7])) < 1e-12
    assert abs(dla.total() - dla.logit_difference) < 1e-12
    # a layer's heads plus its MLP: what that layer added to the stream, read the same way
    x = lens.streams(model, ids[:4])[:, 3]  # (n_layers + 1, d_model)
    u = model.final_norm * (model.embedding[2] - model.embedding[7]) / dla.scale
    np.testing.assert_allclose(dla.heads.sum(axis=1) + dla.mlps, np.diff(x, axis=0) @ u, rtol=0, atol=1e-12)
    assert abs(dla.embedding - x[0] @ u) < 1e-12
