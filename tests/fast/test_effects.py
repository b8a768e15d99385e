"""qkv.lab.effects: a patch that copies nothing moves nothing (0), one that copies all of
text 2 is text 2 (1), and a head's patch equals the same patch done by hand.

On a real minimal pair of one token count: "The capital of France is" / "... of Italy is",
continuations " Paris" and " Rome". The hand-made patch runs the whole text through
:func:`qkv.lab.interventions.run_edited` with an edit written here (no rerun from a layer, no
cache of the shared beginning), and log-probabilities with a log-softmax of its own.
"""

from __future__ import annotations

import numpy as np
import pytest
from tiny_model import tiny_model

from qkv import smollm2
from qkv.lab import effects, interventions, scoring

TEXT_1, TEXT_2 = "The capital of France is", "The capital of Italy is"
C1, C2 = " Paris", " Rome"
EPS32 = np.finfo(np.float32).eps


@pytest.fixture(scope="module")
def pair(model):
    return effects.MinimalPair.of(model, TEXT_1, TEXT_2, C1, C2)


def rounding(model, pair) -> float:
    """How far two float32 computations of one preference may differ: each of its log-
    probabilities is a logit minus a log-sum-exp, each good to 64 rounding units of the
    largest logit (as in test_interventions), and a preference subtracts two of them."""
    largest = max(np.abs(smollm2.forward(model, run.ids).logits).max() for c in pair.runs for run in c)
    return 2 * 2 * 64 * EPS32 * largest


def test_preferences_are_log_probability_differences_of_the_continuations(model, pair):
    assert len(pair.text_1) == len(pair.text_2) and pair.since == 3  # France / Italy
    p1 = effects.preference(model, TEXT_1, C1, C2)
    assert p1 == pair.preference_1
    assert pair.preference_1 > 0 > pair.preference_2  # each capital after its own country
    # qkv.lab.scoring computes the same by another path (its own batching of the four texts)
    got = scoring.continuation_logprobs(model, [TEXT_1, TEXT_1, TEXT_2, TEXT_2], [C1, C2, C1, C2])
    by_scoring = [got[0] - got[1], got[2] - got[3]]
    np.testing.assert_allclose(
        [pair.preference_1, pair.preference_2], by_scoring, rtol=0, atol=rounding(model, pair)
    )


def test_copying_nothing_moves_nothing_and_copying_all_of_text_2_restores_it(model, pair):
    n = len(pair.text_1)
    nothing = np.zeros((1, n), dtype=bool)
    everything = np.ones((1, n), dtype=bool)
    got = pair.effect(pair.patched_stream([5, 0], np.concatenate([nothing, everything])))
    tolerance = rounding(model, pair) / abs(pair.preference_2 - pair.preference_1)
    np.testing.assert_allclose(got, [0.0, 1.0], rtol=0, atol=tolerance)
    assert tolerance < 1e-3
    no_heads = np.zeros((1, model.config.n_layers, model.config.n_heads), dtype=bool)
    assert pair.effect(pair.patched_heads(no_heads)).tolist() == [0.0]  # text 1's own run


def test_the_stream_grid_restores_text_2_at_the_embedding_of_the_word_that_differs(model, pair):
    grid = pair.stream_effects()
    n = len(pair.text_1)
    assert grid.shape == (model.config.n_layers, n)
    assert (grid[:, : pair.since] == 0).all()  # the same tokens in both texts
    tolerance = rounding(model, pair) / abs(pair.preference_2 - pair.preference_1)
    # the one differing token's embedding is all that separates the texts at layer 0
    assert abs(grid[0, pair.since] - 1.0) <= tolerance
    assert np.abs(grid[0, pair.since + 1 :]).max() <= tolerance  # same tokens, same embeddings


class CopyHead(smollm2.Edit):
    """Replace one head's output at the first ``n`` positions by ``output`` (n, d_head)."""

    def __init__(self, head, output):
        self.head, self.output = head, output

    def attention(self, weights, v, heads):  # heads: (1, n_heads, T, d_head)
        heads = heads.copy()
        heads[..., self.head, : len(self.output), :] = self.output
        return weights, heads


def log_softmax(logits):
    logits = np.asarray(logits, dtype=np.float64)
    top = logits.max(axis=-1, keepdims=True)
    return logits - top - np.log(np.exp(logits - top).sum(axis=-1, keepdims=True))


def test_a_head_patch_is_the_same_patch_done_by_hand(model, pair):
    n = len(pair.text_1)
    grid = pair.head_effects()
    assert grid.shape == (model.config.n_layers, model.config.n_heads)
    for layer, head in [(0, 0), np.unravel_index(np.argmax(np.abs(grid)), grid.shape)]:
        layer, head = int(layer), int(head)
        total = 0.0
        for sign, c in ((1, C1), (-1, C2)):
            c = model.encode(c)
            ids_1 = np.concatenate([pair.text_1, c])
            ids_2 = np.concatenate([pair.text_2, c])
            source = interventions.head_outputs(smollm2.forward(model, ids_2))[layer, head, :n]
            logits = interventions.run_edited(model, ids_1, {layer: CopyHead(head, source)}).logits[0]
            rows = np.arange(n - 1, n - 1 + len(c))
            total += sign * log_softmax(logits[rows])[np.arange(len(c)), c].sum()
        by_hand = (total - pair.preference_1) / (pair.preference_2 - pair.preference_1)
        tolerance = rounding(model, pair) / abs(pair.preference_2 - pair.preference_1)
        assert abs(grid[layer, head] - by_hand) <= tolerance, (layer, head, grid[layer, head], by_hand)


def test_a_pair_that_cannot_be_patched_is_refused(model):
    with pytest.raises(ValueError, match="text_1 has 5 tokens and text_2 6"):
        effects.MinimalPair.of(model, TEXT_1, "The capital of the USA is", C1, C2)
    with pytest.raises(ValueError, match="the same tokens"):
        effects.MinimalPair.of(model, TEXT_1, TEXT_1, C1, C2)
    with pytest.raises(ValueError, match="preference equals text 1's"):
        effects.MinimalPair.of(model, TEXT_1, TEXT_2, C1, C1)


# ---- on a tiny random model (no trained model needed): the continuation is never patched


class Keep(smollm2.Edit):
    """Keeps the heads' outputs of its layer, (n_heads, T, d_head); changes nothing."""

    def attention(self, weights, v, heads):
        self.heads = heads
        return weights, heads


def log_p_by_hand(model, x_final, text, continuation):
    """log P(continuation | text) from the stream leaving the last layer (T, d_model)."""
    rows = np.arange(len(text) - 1, len(text) + len(continuation) - 1)
    logits = smollm2.output_logits(model, x_final[rows])
    return log_softmax(logits)[np.arange(len(continuation)), continuation].sum()


def test_on_a_tiny_model_a_head_patch_copies_the_text_positions_only():
    model = tiny_model(seed=2, n_layers=3)
    text_1, text_2, c1, c2 = [1, 2, 3, 4], [1, 5, 3, 4], [6, 7], [8, 9]  # two-token continuations
    pair = effects.MinimalPair.of(model, text_1, text_2, c1, c2)
    layer, head = 1, 0
    which = np.zeros((1, 3, 2), dtype=bool)
    which[0, layer, head] = True
    got = pair.patched_heads(which)[0]
    by_hand, everywhere = 0.0, 0.0
    for sign, c in ((1, c1), (-1, c2)):
        ids_1, ids_2 = np.array(text_1 + c), np.array(text_2 + c)
        keep = Keep()
        smollm2.run_layers(model, model.embedding[ids_2], np.arange(len(ids_2)), edits={layer: keep})
        source = keep.heads[head]  # (T, d_head): text 2's run
        for copied, n in ((source[: len(text_1)], "text"), (source, "all")):
            x, _ = smollm2.run_layers(
                model, model.embedding[ids_1], np.arange(len(ids_1)), edits={layer: CopyHead(head, copied)}
            )
            value = sign * log_p_by_hand(model, x, text_1, c)
            if n == "text":
                by_hand += value
            else:
                everywhere += value
    assert abs(got - by_hand) < 1e-9
    assert abs(everywhere - by_hand) > 1e-3  # copying the continuation's positions too would differ


def test_on_a_tiny_model_a_stream_patch_is_the_layers_run_with_the_row_replaced():
    model = tiny_model(seed=2, n_layers=3)
    text_1, text_2, c1, c2 = [1, 2, 3, 4], [1, 5, 3, 4], [6, 7], [8, 9]
    pair = effects.MinimalPair.of(model, text_1, text_2, c1, c2)
    grid = pair.stream_effects()
    assert grid.shape == (3, 4) and (grid[:, :1] == 0).all()
    for layer, position in [(0, 1), (1, 1), (2, 3), (1, 2)]:
        total = 0.0
        for sign, c in ((1, c1), (-1, c2)):
            ids_1, ids_2 = np.array(text_1 + c), np.array(text_2 + c)
            positions = np.arange(len(ids_1))
            x_1, _ = smollm2.run_layers(model, model.embedding[ids_1], positions, stop=layer)
            x_2, _ = smollm2.run_layers(model, model.embedding[ids_2], positions, stop=layer)
            x_1 = x_1.copy()
            x_1[position] = x_2[position]  # text 2's stream entering the layer, at one position
            x, _ = smollm2.run_layers(model, x_1, positions, start=layer)
            total += sign * log_p_by_hand(model, x, text_1, c)
        want = (total - pair.preference_1) / (pair.preference_2 - pair.preference_1)
        assert abs(grid[layer, position] - want) < 1e-9, (layer, position)
    # the embedding of the one token that differs is all that separates the texts
    assert abs(grid[0, 1] - 1.0) < 1e-9
