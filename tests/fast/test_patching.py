"""qkv.lab.patching copies exactly what it says from the clean run, and nothing else.

Every patch is checked on a tiny random model against a second computation written here:
the whole model run layer by layer on all positions (no cache of the shared prefix), with
the stream or a head's output replaced by hand, and log-probabilities by a log-softmax of
its own. Patching everything at layer 0 is the clean run, patching nothing the corrupt one.
"""

from __future__ import annotations

import numpy as np
import pytest
from tiny_model import tiny_model

import qkv
from qkv import smollm2
from qkv.lab import interventions, patching, prefixes

CLEAN, CORRUPT = [3, 1, 4, 1, 5, 9, 2], [3, 1, 4, 6, 5, 9, 2]  # differ at position 3


@pytest.fixture(scope="module")
def tiny():
    return tiny_model(seed=1, n_layers=3)


def log_softmax(logits) -> np.ndarray:
    logits = np.asarray(logits, dtype=np.float64)
    top = logits.max(axis=-1, keepdims=True)
    return logits - top - np.log(np.exp(logits - top).sum(axis=-1, keepdims=True))


def layer_by_hand(model, i, x, replace=None):
    """Decoder layer i on every position, written with qkv's parts; ``replace`` maps a head
    to the (T, d_head) output it gives instead of its own."""
    lw, n, c = model.layers[i], len(x), model.config
    w = lw.attention
    h = smollm2.rms_norm(x, lw.attn_norm, c.norm_eps)
    q = qkv.rope(qkv.split_heads(h @ w.w_q, c.n_heads), np.arange(n), c.rope_base)
    k = qkv.rope(qkv.split_heads(h @ w.w_k, c.n_kv_heads), np.arange(n), c.rope_base)
    v = qkv.split_heads(h @ w.w_v, c.n_kv_heads)
    heads = np.array(qkv.grouped_attention(q, k, v, mask=qkv.causal_mask(n)).output)
    for head, output in (replace or {}).items():
        heads[head] = output
    x = x + qkv.merge_heads(heads) @ w.w_o
    h = smollm2.rms_norm(x, lw.mlp_norm, c.norm_eps)
    return x + (smollm2.silu(h @ lw.w_gate) * (h @ lw.w_up)) @ lw.w_down, heads


def by_hand(model, ids, swap=None):
    """Every layer on every position; ``swap(i, x) -> (x, replace)`` changes layer i's
    input stream or heads. Returns (streams entering each layer, heads per layer, log P)."""
    x = model.embedding[np.asarray(ids)]
    streams, heads = [], []
    for i in range(model.config.n_layers):
        replace = None
        if swap is not None:
            x, replace = swap(i, x)
        streams.append(x)
        x, h = layer_by_hand(model, i, x, replace)
        heads.append(h)
    return streams, heads, log_softmax(smollm2.output_logits(model, x))


def test_a_record_holds_the_streams_and_heads_of_a_plain_run(tiny):
    model = tiny
    run = patching.record(model, CLEAN)
    streams, heads, logp = by_hand(model, CLEAN)
    np.testing.assert_allclose(run.streams[:-1], streams, atol=1e-10)
    np.testing.assert_allclose(run.heads, heads, atol=1e-10)
    np.testing.assert_allclose(
        patching.log_prob(model, run, [5, 1], [2, 0]), logp[[5, 1], [2, 0]], atol=1e-10
    )


def test_texts_recorded_together_share_their_beginning_and_each_is_its_plain_run(tiny):
    model = tiny
    # the third text shares 6 tokens with CLEAN (a family), CORRUPT only 3 with them, the last none
    texts = [CLEAN, CORRUPT, [3, 1, 4, 1, 5, 9, 7], [2, 7, 1, 8, 2, 8, 1]]
    # grouped as record_batch groups them: a beginning stops before each text's last token
    grouped = prefixes.shared_prefixes(texts, [len(CLEAN) - 1] * len(texts))
    families = sorted((shared, sorted(members)) for shared, members in grouped)
    assert families == [(0, [1]), (0, [3]), (6, [0, 2])]
    for text, run in zip(texts, patching.record_batch(model, texts), strict=True):
        streams, heads, _ = by_hand(model, text)
        _, seen = smollm2.run_layers(model, model.embedding[text], np.arange(len(text)))  # all at once
        np.testing.assert_array_equal(run.ids, text)
        np.testing.assert_allclose(run.streams[:-1], streams, atol=1e-10)
        np.testing.assert_allclose(run.heads, heads, atol=1e-10)
        np.testing.assert_allclose(run.keys, [s.k for s in seen], atol=1e-10)
        np.testing.assert_allclose(run.values, [s.v for s in seen], atol=1e-10)


def test_patching_everything_at_layer_0_is_the_clean_run_and_nothing_the_corrupt(tiny):
    model = tiny
    clean, corrupt = patching.record(model, CLEAN), patching.record(model, CORRUPT)
    _, _, want_clean = by_hand(model, CLEAN)
    _, _, want_corrupt = by_hand(model, CORRUPT)
    rows, nxt = [3, 4, 6], [5, 9, 0]
    where = np.array([[True] * 7, [False] * 7])
    got = patching.patch_stream(model, clean, corrupt, 0, where, rows, nxt)
    np.testing.assert_allclose(got[0], want_clean[rows, nxt], atol=1e-10)
    np.testing.assert_allclose(got[1], want_corrupt[rows, nxt], atol=1e-10)
    assert np.abs(got[0] - got[1]).max() > 1e-3  # the two texts' answers differ


@pytest.mark.parametrize("layer", [1, 2])
def test_one_patched_position_is_the_corrupt_run_with_that_row_replaced_by_hand(tiny, layer):
    model = tiny
    clean, corrupt = patching.record(model, CLEAN), patching.record(model, CORRUPT)
    clean_streams, _, _ = by_hand(model, CLEAN)
    rows, nxt = [4, 5, 6], [1, 2, 3]
    where = np.zeros((3, 7), dtype=bool)
    where[0, 3], where[1, 5], where[2, 0] = True, True, True  # position 0: the same in both
    got = patching.patch_stream(model, clean, corrupt, layer, where, rows, nxt)
    for b, position in enumerate((3, 5, 0)):

        def swap(i, x, position=position):
            if i == layer:
                x = x.copy()
                x[position] = clean_streams[layer][position]
            return x, None

        _, _, want = by_hand(model, CORRUPT, swap)
        np.testing.assert_allclose(got[b], want[rows, nxt], atol=1e-10)
    _, _, corrupt_logp = by_hand(model, CORRUPT)
    np.testing.assert_allclose(got[2], corrupt_logp[rows, nxt], atol=1e-10)
    assert np.abs(got[0] - got[2]).max() > 1e-4


def test_one_patched_head_is_its_output_taken_from_the_clean_run_by_hand(tiny):
    model = tiny
    clean, corrupt = patching.record(model, CLEAN), patching.record(model, CORRUPT)
    _, clean_heads, _ = by_hand(model, CLEAN)
    rows, nxt = [3, 6], [7, 8]
    heads = [(1, 0), (1, 1), (2, 1), (0, 0)]  # one variant each, layers mixed in one batch
    which = np.zeros((4, 3, 2), dtype=bool)
    for b, (layer, head) in enumerate(heads):
        which[b, layer, head] = True
    got = patching.patch_heads(model, clean, corrupt, which, rows, nxt)
    for b, (layer, head) in enumerate(heads):
        _, _, want = by_hand(
            model,
            CORRUPT,
            lambda i, x, layer=layer, head=head: (x, {head: clean_heads[i][head]} if i == layer else None),
        )
        np.testing.assert_allclose(got[b], want[rows, nxt], atol=1e-10)
    _, _, corrupt_logp = by_hand(model, CORRUPT)
    assert np.abs(got - corrupt_logp[rows, nxt]).max(axis=1).min() > 1e-5  # each one moves it
    none = patching.patch_heads(model, clean, corrupt, np.zeros((1, 3, 2), bool), rows, nxt)
    np.testing.assert_allclose(none[0], corrupt_logp[rows, nxt], atol=1e-10)


def test_a_scan_over_layers_in_one_batch_is_each_layer_patched_alone(tiny):
    model = tiny
    clean, corrupt = patching.record(model, CLEAN), patching.record(model, CORRUPT)
    where = np.zeros((3, 7), dtype=bool)
    where[:, 3], where[1, 4:] = True, True
    layers = [2, 0, 1]
    together = patching.patch_stream(model, clean, corrupt, layers, where, [5, 6], [1, 1])
    for b, layer in enumerate(layers):
        alone = patching.patch_stream(model, clean, corrupt, layer, where[b : b + 1], [5, 6], [1, 1])
        np.testing.assert_allclose(together[b], alone[0], atol=1e-10)


def test_a_rerun_with_heads_off_from_position_0_is_run_edited(tiny):
    model = tiny
    run = patching.record(model, CLEAN)
    edits = interventions.heads_off(model.config, [set(), {(1, 0)}, {(1, 1), (2, 0)}])
    x = np.broadcast_to(run.streams[1], (3, 7, 8))
    got = patching.rerun(model, run, 1, x, 0, [2, 6], [4, 4], edits)
    want = log_softmax(interventions.run_edited(model, CLEAN, edits).logits)  # (3, T, vocab)
    np.testing.assert_allclose(got, want[:, [2, 6], 4], atol=1e-10)


def test_a_metric_is_given_the_last_streams_at_the_rows_of_every_variant(tiny):
    # the whole next-token distribution per row, and one number per variant: both shapes,
    # for variants rerun and for variants that copy nothing (the recorded run's streams)
    model = tiny
    clean, corrupt = patching.record(model, CLEAN), patching.record(model, CORRUPT)
    _, clean_heads, _ = by_hand(model, CLEAN)
    _, _, corrupt_logp = by_hand(model, CORRUPT)
    rows, nxt = [4, 6], [2, 5]
    which = np.zeros((2, 3, 2), dtype=bool)
    which[0, 1, 1] = True  # variant 1 copies nothing

    def distribution(m, x, next_ids):  # (n_variants, n_rows, vocab_size)
        return log_softmax(smollm2.output_logits(m, x))

    def difference(m, x, next_ids):  # (n_variants,): row 4's token 2 against row 6's token 5
        logp = log_softmax(smollm2.output_logits(m, x))
        return logp[:, 0, next_ids[0]] - logp[:, 1, next_ids[1]]

    _, _, want = by_hand(model, CORRUPT, lambda i, x: (x, {1: clean_heads[i][1]} if i == 1 else None))
    got = patching.patch_heads(model, clean, corrupt, which, rows, nxt, metric=distribution)
    assert got.shape == (2, 2, model.config.vocab_size)
    np.testing.assert_allclose(got[0], want[rows], atol=1e-10)
    np.testing.assert_allclose(got[1], corrupt_logp[rows], atol=1e-10)
    got = patching.patch_heads(model, clean, corrupt, which, rows, nxt, metric=difference)
    np.testing.assert_allclose(
        got, [want[4, 2] - want[6, 5], corrupt_logp[4, 2] - corrupt_logp[6, 5]], atol=1e-10
    )
    where = np.zeros((1, 7), dtype=bool)
    where[0, 3] = True
    streamed = patching.patch_stream(model, clean, corrupt, 0, where, rows, nxt, metric=difference)
    _, _, clean_logp = by_hand(model, CLEAN)  # position 3 entering layer 0 is the token itself
    np.testing.assert_allclose(streamed, [clean_logp[4, 2] - clean_logp[6, 5]], atol=1e-10)
    x = np.broadcast_to(corrupt.streams[2, 3:], (1, 4, 8))
    again = patching.rerun(model, corrupt, 2, x, 3, rows, nxt, metric=difference)
    np.testing.assert_allclose(again, [corrupt_logp[4, 2] - corrupt_logp[6, 5]], atol=1e-10)


def test_the_default_metric_is_next_token_log_prob(tiny):
    model = tiny
    clean, corrupt = patching.record(model, CLEAN), patching.record(model, CORRUPT)
    where = np.eye(7, dtype=bool)[3:]
    rows, nxt = [3, 5], [4, 0]
    default = patching.patch_stream(model, clean, corrupt, 1, where, rows, nxt)
    named = patching.patch_stream(
        model, clean, corrupt, 1, where, rows, nxt, metric=patching.next_token_log_prob
    )
    np.testing.assert_array_equal(default, named)
    _, _, clean_logp = by_hand(model, CLEAN)
    np.testing.assert_allclose(
        patching.next_token_log_prob(model, clean.streams[-1, rows], nxt), clean_logp[rows, nxt], atol=1e-10
    )


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda m, a, b: patching.patch_stream(m, a, patching.record(m, [3, 1]), 0, [[1] * 7], [6], [0]),
            "as many tokens",
        ),
        (lambda m, a, b: patching.patch_stream(m, a, a, 0, [[1] * 7], [6], [0]), "the same tokens"),
        (
            lambda m, a, b: patching.patch_stream(m, a, b, 0, [[1] * 7], [1], [0]),
            r"must be positions 3\.\.6",
        ),
        (
            lambda m, a, b: patching.patch_stream(m, a, b, 0, [1] * 7, [6], [0]),
            r"where must be \(n_variants, T\)",
        ),
        (
            lambda m, a, b: patching.patch_heads(m, a, b, [[1, 0]], [6], [0]),
            r"which must be \(n_variants, n_layers, n_heads\) = \(n_variants, 3, 2\)",
        ),
        (
            lambda m, a, b: patching.patch_stream(m, a, b, 3, [[1] * 7], [6], [0]),
            r"layer must be in 0\.\.2, got \[3\]",
        ),
        (
            lambda m, a, b: patching.patch_stream(m, a, b, [0, 1], [[1] * 7], [6], [0]),
            r"layer must be one int or one per variant \(1\)",
        ),
        (
            lambda m, a, b: patching.patch_heads(m, a, b, np.ones((1, 3, 2)), [6], [10]),
            r"next_ids \[10\] must be token ids",
        ),
        (
            lambda m, a, b: patching.patch_stream(
                m, a, b, 0, [[1] * 7] * 2, [6], [0], metric=lambda m, x, i: 1.0
            ),
            r"metric must give one entry per variant, an array \(2, \.\.\.\); '<lambda>' gave shape \(\)",
        ),
        (
            lambda m, a, b: patching.patch_heads(m, a, b, np.ones((1, 3, 2)), [6], [0], metric="logit"),
            r"metric must be a function metric\(model, x, next_ids\), got 'logit'",
        ),
    ],
)
def test_bad_patches_are_refused_with_a_clear_message(tiny, call, message):
    model = tiny
    clean, corrupt = patching.record(model, CLEAN), patching.record(model, CORRUPT)
    with pytest.raises(ValueError, match=message):
        call(model, clean, corrupt)
