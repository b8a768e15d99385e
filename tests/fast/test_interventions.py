"""qkv.lab.interventions changes exactly what each edit says, and nothing when it says nothing.

Every edit is checked against a second way of doing the same thing: switching a head off
against zeroing that head's rows of W_O, removing a key's value against the weighted sum
written out, RoPE off against the layer run with every position 0, a batch of variants
against each variant run on its own.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import qkv
from qkv import smollm2
from qkv.lab import interventions

TEXT = "The cat sat on the mat because it was warm"


@pytest.fixture(scope="module")
def trace(model):
    return smollm2.run(TEXT, model)


def streams(model, ids):
    """The residual stream entering each layer, and leaving the last: (31, T, d_model)."""
    x, out = model.embedding[ids], [model.embedding[ids]]
    for layer in model.layers:
        x, _ = smollm2.decoder_layer(x, layer, model.config, np.arange(len(ids)))
        out.append(x)
    return np.stack(out)


def test_an_edit_that_changes_nothing_reproduces_the_forward_pass_exactly(model, trace):
    every_layer = {i: smollm2.Edit() for i in range(model.config.n_layers)}
    x, seen = smollm2.run_layers(model, model.embedding[trace.ids], np.arange(10), edits=every_layer)
    assert np.array_equal(smollm2.output_logits(model, x), trace.logits)
    assert np.array_equal(np.stack([s.weights for s in seen]), trace.weights)
    edited = interventions.run_edited(model, trace.ids, {5: smollm2.Edit()})
    assert edited.logits.shape == (1, 10, model.config.vocab_size)
    assert np.array_equal(edited.logits[0], trace.logits)
    assert np.array_equal(np.stack([s.weights[0] for s in edited.seen]), trace.weights)


def test_an_empty_variant_in_a_batch_is_the_unedited_model(model, trace):
    edited = interventions.run_edited(
        model, trace.ids, interventions.heads_off(model.config, [set(), {(3, 1)}])
    )
    # The batch runs its matrix products over more rows, and a BLAS may block and order the
    # sums differently for that (kernel, cache size and thread count all change it), so the
    # two float32 runs agree to rounding, not bit for bit: 64 rounding units of the largest
    # logit (about 2e-4 here), twenty times below what one head's ablation moves (1e-2, next test).
    tolerance = 64 * np.finfo(np.float32).eps * np.abs(trace.logits).max()
    assert tolerance < 1e-3  # still far finer than any edit's effect
    np.testing.assert_allclose(edited.logits[0], trace.logits, rtol=0, atol=tolerance)


def test_switching_a_head_off_is_zeroing_its_rows_of_w_o(model, trace):
    layer, head = 12, 4
    edited = interventions.run_edited(
        model, trace.ids, interventions.heads_off(model.config, [{(layer, head)}])
    )
    # the same ablation done to the weights: this head's 64 rows of W_O set to zero
    old = model.layers[layer]
    w_o = old.attention.w_o.copy()
    w_o[64 * head : 64 * (head + 1)] = 0.0
    new = dataclasses.replace(old, attention=dataclasses.replace(old.attention, w_o=w_o))
    x = model.embedding[trace.ids]
    for i, weights in enumerate(model.layers):
        x, _ = smollm2.decoder_layer(x, new if i == layer else weights, model.config, np.arange(10))
    np.testing.assert_allclose(edited.logits[0], smollm2.output_logits(model, x), rtol=0, atol=2e-4)
    # layers before it, and every weight of its own layer, are untouched
    for i in range(layer + 1):
        assert np.array_equal(edited.seen[i].weights[0], trace.weights[i])
    assert np.abs(edited.seen[layer + 1].weights[0] - trace.weights[layer + 1]).max() > 1e-4
    assert np.abs(edited.logits[0] - trace.logits).max() > 1e-2


def test_removing_a_keys_value_drops_its_term_and_nothing_else(model, trace):
    """ValueOff in layer 0: each head's output is the weighted sum without the key's term
    (renormalised or not), for the queries after the key; earlier queries keep theirs."""
    v = np.repeat(trace.v[0], 3, axis=0).astype(np.float64)  # (9, T, 64): each head's values
    w = trace.weights[0].astype(np.float64)  # (9, T, T)
    for key in (0, 3):
        for renormalise in (False, True):
            edit = interventions.ValueOff(key, renormalise)
            new_w, heads = edit.attention(trace.weights[0], trace.v[0], w @ v)
            expected_w = w.copy()
            expected_w[:, key + 1 :, key] = 0.0
            if renormalise:
                expected_w[:, key + 1 :] /= expected_w[:, key + 1 :].sum(-1, keepdims=True)
            np.testing.assert_allclose(new_w, expected_w, rtol=1e-6, atol=1e-7)
            for i in range(10):  # query by query, written out
                kept = [j for j in range(i + 1) if not (j == key and i > key)]
                total = sum(expected_w[:, i, j, None] * v[:, j] for j in kept)
                np.testing.assert_allclose(heads[:, i], total, rtol=1e-5, atol=1e-5)
            assert np.array_equal(new_w[:, : key + 1], w[:, : key + 1])  # earlier queries
            if renormalise:
                np.testing.assert_allclose(new_w.sum(-1), 1.0, atol=1e-6)
            else:
                assert np.all(new_w[:, key + 1 :].sum(-1) < 1.0)


def test_value_off_in_every_layer_moves_the_prediction(model, trace):
    edited = interventions.run_edited(model, trace.ids, interventions.value_off(model.config))
    first = [s.weights[0][:, 1:, 0] for s in edited.seen]
    assert all(np.all(w == 0) for w in first)
    kl = interventions.kl_divergence(trace.logits[1:], edited.logits[0, 1:])
    assert kl.min() > 0 and kl.mean() > 0.1


def test_swapping_a_value_changes_that_term_only(model, trace):
    """ValueSwap in layer 0: the key's term w v becomes w v' for the queries after it,
    written out query by query; zeros are ValueOff, the key's own value changes nothing."""
    v = np.repeat(trace.v[0], 3, axis=0).astype(np.float64)  # (9, T, 64)
    w = trace.weights[0].astype(np.float64)  # (9, T, T)
    new_value = np.random.default_rng(0).normal(size=(3, 64))
    for key in (0, 4):
        _, heads = interventions.ValueSwap(key, new_value).attention(trace.weights[0], trace.v[0], w @ v)
        swapped = np.repeat(new_value, 3, axis=0)  # (9, 64): each query head's new value
        for i in range(10):
            total = sum(
                w[:, i, j, None] * (swapped if (j == key and i > key) else v[:, j]) for j in range(i + 1)
            )
            np.testing.assert_allclose(heads[:, i], total, rtol=1e-5, atol=1e-5)
        zeros = interventions.ValueSwap(key, np.zeros((3, 64))).attention(trace.weights[0], trace.v[0], w @ v)
        off = interventions.ValueOff(key).attention(trace.weights[0], trace.v[0], w @ v)
        np.testing.assert_allclose(zeros[1], off[1], rtol=1e-6, atol=1e-6)
        own = interventions.ValueSwap(key, trace.v[0][:, key]).attention(trace.weights[0], trace.v[0], w @ v)
        np.testing.assert_allclose(own[1], w @ v, rtol=1e-6, atol=1e-6)


def test_an_input_patch_changes_only_what_the_named_projection_reads(model, trace):
    """InputPatch into the keys of layer 5: the keys are those of the stream plus delta,
    written out with qkv's parts; the queries and values are those of the stream as run."""
    layer, n = 5, 10
    x = streams(model, trace.ids)[layer]  # the stream entering the layer, as run
    delta = np.random.default_rng(1).normal(size=x.shape).astype(np.float32)
    edited = interventions.run_edited(model, trace.ids, {layer: interventions.InputPatch(delta, "k")})
    seen = edited.seen[layer]
    w = model.layers[layer].attention
    h = smollm2.rms_norm(x + delta, model.layers[layer].attn_norm, model.config.norm_eps)
    k = qkv.rope(qkv.split_heads(h @ w.w_k, 3), np.arange(n), model.config.rope_base)
    np.testing.assert_allclose(seen.k[0], k, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(seen.q[0], trace.q[layer], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(seen.v[0], trace.v[layer], rtol=1e-5, atol=1e-5)
    assert not np.allclose(seen.weights[0], trace.weights[layer], atol=1e-3)  # it did act
    nothing = interventions.run_edited(model, trace.ids, {layer: interventions.InputPatch(0 * delta, "qkv")})
    np.testing.assert_allclose(nothing.logits[0], trace.logits, rtol=0, atol=1e-4)


def layer_by_hand(model, layer, x, replace=None):
    """One decoder layer written with qkv's parts; ``replace`` maps a head to the (64,)
    output it gives at every position instead of its own."""
    lw, n = model.layers[layer], len(x)
    w, eps = lw.attention, model.config.norm_eps
    h = smollm2.rms_norm(x, lw.attn_norm, eps)
    q = qkv.rope(qkv.split_heads(h @ w.w_q, 9), np.arange(n), model.config.rope_base)
    k = qkv.rope(qkv.split_heads(h @ w.w_k, 3), np.arange(n), model.config.rope_base)
    v = qkv.split_heads(h @ w.w_v, 3)
    heads = np.array(qkv.grouped_attention(q, k, v, mask=qkv.causal_mask(n)).output)
    for head, output in (replace or {}).items():
        heads[head] = output
    attended = qkv.merge_heads(heads) @ w.w_o
    x = x + attended
    h = smollm2.rms_norm(x, lw.mlp_norm, eps)
    return x + (smollm2.silu(h @ lw.w_gate) * (h @ lw.w_up)) @ lw.w_down, attended


def test_mean_ablation_gives_the_heads_the_fill_instead_of_zeros(model, trace):
    layer, head = 12, 4
    fill = np.zeros((2, 9, 64), dtype=np.float32)
    fill[1, head] = np.random.default_rng(2).normal(size=64)
    edits = {layer: interventions.HeadsOff([[False] * 9, [h == head for h in range(9)]], fill)}
    edited = interventions.run_edited(model, trace.ids, edits)
    np.testing.assert_allclose(edited.logits[0], trace.logits, rtol=0, atol=1e-4)
    x, _ = layer_by_hand(model, layer, streams(model, trace.ids)[layer], {head: fill[1, head]})
    for later in model.layers[layer + 1 :]:
        x, _ = smollm2.decoder_layer(x, later, model.config, np.arange(10))
    np.testing.assert_allclose(edited.logits[1], smollm2.output_logits(model, x), rtol=0, atol=2e-3)
    assert np.abs(edited.logits[1] - trace.logits).max() > 1e-2


def test_head_outputs_merged_through_w_o_are_what_attention_adds(model, trace):
    """Summed over every head of a layer, head_writes is the attention's whole contribution
    to the stream, and one head's write is its output through its own rows of W_O."""
    layer = 7
    outputs = interventions.head_outputs(trace)  # (30, 9, T, 64)
    written = interventions.head_writes(model, outputs, {(layer, h) for h in range(9)})
    _, attended = layer_by_hand(model, layer, streams(model, trace.ids)[layer])
    np.testing.assert_allclose(written, attended, rtol=1e-3, atol=1e-3)
    one = interventions.head_writes(model, outputs, {(layer, 2)})
    np.testing.assert_allclose(one, outputs[layer, 2] @ model.layers[layer].attention.w_o[128:192], atol=1e-5)


def test_rope_off_in_one_layer_turns_nothing_there_and_keeps_the_other_layers(model, trace):
    layer = 3
    edited = interventions.run_edited(model, trace.ids, {layer: interventions.RopeOff()})
    x = streams(model, trace.ids)[layer]  # the stream entering the layer, as run
    _, plain = smollm2.decoder_layer(x, model.layers[layer], model.config, np.zeros(10, int))
    np.testing.assert_allclose(edited.seen[layer].q[0], plain.q, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(edited.seen[layer].weights[0], plain.weights, atol=1e-6)
    assert np.array_equal(edited.seen[layer - 1].q[0], trace.q[layer - 1])  # below: as run
    assert not np.allclose(edited.seen[layer].q[0], trace.q[layer])  # its own: unturned


def test_a_batch_of_variants_is_each_variant_run_alone(model, trace):
    variants = [{(2, 0)}, set(), {(20, 8), (25, 3)}]
    together = interventions.run_edited(model, trace.ids, interventions.heads_off(model.config, variants))
    for b, variant in enumerate(variants):
        if not variant:
            continue
        alone = interventions.run_edited(model, trace.ids, interventions.heads_off(model.config, [variant]))
        np.testing.assert_allclose(together.logits[b], alone.logits[0], rtol=0, atol=1e-4)
    per_variant = interventions.PerVariant([smollm2.Edit(), interventions.ValueOff(0)])
    both = interventions.run_edited(model, trace.ids, {0: per_variant})
    one = interventions.run_edited(model, trace.ids, {0: interventions.ValueOff(0)})
    np.testing.assert_allclose(both.logits[1], one.logits[0], rtol=0, atol=1e-4)
    np.testing.assert_allclose(both.logits[0], trace.logits, rtol=0, atol=1e-4)


def test_several_texts_of_one_length_run_as_one_batch(model):
    texts = np.stack([model.encode("The cat sat on the mat"), model.encode("A dog ran in the park")])
    assert texts.shape[1] == 6
    edits = interventions.heads_off(model.config, [set(), {(18, 6)}])
    batch = interventions.run_edited(model, texts, edits, rows=[-1])
    assert batch.logits.shape == (2, 2, 1, model.config.vocab_size)  # variants, texts, rows
    for t, ids in enumerate(texts):
        alone = interventions.run_edited(model, ids, edits, rows=[-1])
        np.testing.assert_allclose(batch.logits[:, t], alone.logits, rtol=0, atol=1e-4)


def test_bad_edits_are_refused_with_a_clear_message(model, trace):
    with pytest.raises(ValueError, match="does not exist"):
        interventions.heads_off(model.config, [{(30, 0)}])
    with pytest.raises(ValueError, match="edits is empty"):
        interventions.run_edited(model, trace.ids, {})
    with pytest.raises(ValueError, match="variants"):
        edits = interventions.heads_off(model.config, [{(1, 1)}, set()])
        interventions.run_edited(model, trace.ids, edits, n_variants=3)
    with pytest.raises(ValueError, match="start"):
        smollm2.run_layers(model, model.embedding[trace.ids], np.arange(10), start=5, stop=2)
    with pytest.raises(ValueError, match="name layers"):
        smollm2.run_layers(
            model, model.embedding[trace.ids], np.arange(10), edits={1: smollm2.Edit()}, start=2
        )
    with pytest.raises(ValueError, match="same positions"):
        interventions.PerVariant([interventions.RopeOff(), smollm2.Edit()]).positions(np.arange(4))
    weights = np.zeros((1, 2, 2))
    weights[0, :, 0] = 1.0  # query 2 puts all its weight on key 1
    with pytest.raises(ValueError, match="into must name"):
        interventions.InputPatch(np.zeros(3), "x")
    with pytest.raises(ValueError, match="must broadcast"):
        interventions.InputPatch(np.zeros((4, 5)), "k").inputs(np.zeros((10, 576)))
    with pytest.raises(ValueError, match=r"value is \(3, 8\)"):
        interventions.ValueSwap(0, np.zeros((3, 8))).attention(
            trace.weights[0], trace.v[0], np.zeros((9, 10, 64))
        )
    with pytest.raises(ValueError, match="fill must be"):
        interventions.heads_off(model.config, [{(1, 1)}], fill=np.zeros((30, 9, 8)))
    with pytest.raises(ValueError, match="outputs must be"):
        interventions.head_writes(model, np.zeros((30, 9, 10, 8)), {(1, 1)})
    with pytest.raises(ValueError, match="nothing left"):
        interventions.ValueOff(0, renormalise=True).attention(weights, np.ones((1, 2, 3)), None)


def test_loss_kl_and_log_odds_against_hand_computed_values():
    logits = np.log([[0.5, 0.25, 0.25], [0.1, 0.1, 0.8]])
    np.testing.assert_allclose(interventions.next_token_loss(logits, [0, 2]), [np.log(2), -np.log(0.8)])
    np.testing.assert_allclose(interventions.log_odds(logits, 0, 1), [np.log(2), 0.0], atol=1e-12)
    p, q = np.log([[0.5, 0.5]]), np.log([[0.9, 0.1]])
    np.testing.assert_allclose(
        interventions.kl_divergence(p, q), [0.5 * np.log(0.5 / 0.9) + 0.5 * np.log(0.5 / 0.1)]
    )
    assert interventions.kl_divergence(q, q)[0] == pytest.approx(0.0, abs=1e-12)
