"""The model the explorer runs in the browser gives qkv's numbers: the same token ids, the
same attention weights in every head of every layer, and clear errors for a bad model file.

The worker (docs/assets/explorer/model/worker.js) is started in headless Chromium as the
explorer starts it, and loads the model file that the built site serves. Expected numbers
come from ``qkv.smollm2`` (Python ``tokenizers`` and NumPy), never from the JavaScript.
"""

from __future__ import annotations

import base64
import functools
import http.server
import json
import struct
import threading
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pytest
from qkv_site.smollm2_data import MAX_TOKENS, causal_weights, label
from support import PUBLISHED_PATH, QuietHTTPServer

from qkv import smollm2
from qkv.lab import interventions

WEIGHT_ATOL = 1e-4  # the bar for every attention weight (the model's own, scaled scores)
SCORE_ATOL = 1e-3  # and for the first layer's raw scores q · k

# Texts chosen to be hard for a tokenizer: punctuation, numbers, accents, scripts, emoji
# with joiners, runs of spaces and newlines, code, special tokens written as text.
TOKENIZER_TEXTS = [
    "Hello, world!",
    "The cat sat on the mat.",
    "  leading and trailing spaces  ",
    "a\n\nb\n\n\nc",
    "tabs\tand\t\ttabs",
    "    four spaces, then\n        eight",
    "\n",
    " ",
    "",
    "3.14159 and 1,000,000 and 2026-12-02",
    "1234567890 0.5e-3 -42",
    "café naïve résumé Ångström",
    "Größe, Straße, Œuvre, ﬁne",
    "Ｆｕｌｌｗｉｄｔｈ and half",
    "日本語のテキスト",
    "中文测试：你好，世界！",
    "한국어 문장입니다",
    "Привет, мир! Как дела?",
    "Ελληνικά γράμματα",
    "עברית ומספרים 123",
    "مرحبا بالعالم",
    "emoji 😀😃 and 👍🏽",
    "family 👩\u200d👩\u200d👧\u200d👦 with joiners",
    "flag 🇫🇷 and keycap 1️⃣",
    "def f(x):\n    return x ** 2  # square",
    "if (a && b) { return c[i++]; }",
    '<div class="x">&amp;</div>',
    "SELECT * FROM t WHERE a = 'b';",
    "<|im_start|>user\nhi<|im_end|>",
    "don't won't it's they'll",
    "e.g. i.e. etc... !!!???---",
    "a" * 300,
    "word " * 80,  # more than 64 tokens
]

# Texts the model runs on, each compared weight by weight (the last, 75 tokens, is cut to 64).
RUN_TEXTS = [
    "The capital of France is Paris, and it is lovely.",
    "The trophy did not fit in the suitcase because it was too big.",
    "Привет, мир! Как дела?",
    "def f(x):\n    return x ** 2  # square",
    "日本語 and café 👩\u200d👩\u200d👧 in one line",
    "Alice met Bob in the park. Later that day, Alice met Bob again, and they talked about "
    "the weather, the news, the price of bread, the train that was late, and the cat that "
    "sat on the mat because it was warm and the sun was out all afternoon long. "
    "Then they walked home together, talking about all of it again until the evening came.",
]

# In the page: a worker started as the explorer starts it, and a way to ask it one thing.
START_WORKER = """src => {
  window.__worker = new Worker(src, { type: "module" });
  window.__errors = [];
  window.__worker.onerror = (e) => window.__errors.push(String(e.message));
  window.__ask = (msg, want) => new Promise((resolve) => {
    const w = window.__worker;
    const on = (e) => {
      const m = e.data;
      if (want.includes(m.type) && (m.id === undefined || m.id === msg.id)) {
        w.removeEventListener("message", on);
        resolve(m);
      }
    };
    w.addEventListener("message", on);
    w.postMessage(msg);
  });
}"""

LOAD = """([url, bytes, wasm]) => window.__ask({ type: "load", url, bytes, wasm }, ["loaded", "error"])"""

RUN = """async ([id, text, max]) => {
  const m = await window.__ask({ type: "run", id, text, maxTokens: max }, ["result", "error"]);
  if (m.type !== "result") return m;
  // a typed array's bytes, in base64: as a JSON list of numbers, 2 million of them took
  // Playwright 20 s to carry over, as bytes 1 s
  const list = (a) => {
    const bytes = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
    let text = "";
    for (let i = 0; i < bytes.length; i += 0x8000) {
      text += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
    }
    return { type: a.constructor.name, base64: btoa(text) };
  };
  return { type: m.type, ids: m.ids, total: m.total, labels: m.labels, pieces: m.pieces,
           raw: list(m.raw), scaled: list(m.scaled), weights: m.weights.map(list),
           entropy: m.entropy.map(list), predictions: m.predictions };
}"""

EDIT = """([id, off]) => window.__ask({ type: "edit", id, off }, ["edited", "error"])"""
TYPED = {"Float32Array": "<f4", "Float64Array": "<f8"}  # JavaScript's typed arrays, little-endian here


def unpacked(packed: dict) -> np.ndarray:
    """A typed array that RUN sent as bytes, as NumPy reads it."""
    return np.frombuffer(base64.b64decode(packed["base64"]), dtype=TYPED[packed["type"]])


def serve(folder: Path, extra: Path):
    """Serve the built site below PUBLISHED_PATH, and ``extra``'s files below
    ``PUBLISHED_PATH + "extra/"`` (the bad model files), from 127.0.0.1."""

    class Handler(http.server.SimpleHTTPRequestHandler):
        def translate_path(self, path):
            path = urlparse(path).path
            if path.startswith(PUBLISHED_PATH + "extra/"):
                return str(extra / Path(path).name)
            if not path.startswith(PUBLISHED_PATH):
                return str(folder / "not-below-the-site-path")
            return super().translate_path("/" + path[len(PUBLISHED_PATH) :])

        def log_message(self, *args):
            pass

    server = QuietHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}{PUBLISHED_PATH}"


@pytest.fixture(scope="module")
def extra_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("bad-models")


@pytest.fixture(scope="module")
def model_site(built_site, extra_dir):
    server, url = serve(built_site, extra_dir)
    yield url
    server.shutdown()


@pytest.fixture(scope="module")
def index(built_site) -> dict:
    return json.loads((built_site / "explorer" / "smollm2" / "index.json").read_text(encoding="utf-8"))


def new_worker_page(context, model_site):
    page = context.new_page()
    outside = []
    page.on("request", lambda r: outside.append(r.url) if urlparse(r.url).hostname != "127.0.0.1" else None)
    page.goto(model_site + "explorer/")
    page.evaluate(START_WORKER, model_site + "assets/explorer/model/worker.js")
    page.outside = outside
    return page


@pytest.fixture(scope="module")
def worker_page(context, model_site, index):
    """A page whose worker has loaded the site's model file (once for the module)."""
    page = new_worker_page(context, model_site)
    url = model_site + "explorer/smollm2/" + index["weights"]["file"]
    loaded = page.evaluate(LOAD, [url, index["weights"]["bytes"]])
    assert loaded["type"] == "loaded", loaded
    # the WebAssembly product runs under the explorer page's Content-Security-Policy
    assert loaded["product"] == "wasm-simd", loaded
    yield page
    assert page.outside == [], f"requests left 127.0.0.1: {page.outside}"
    assert page.evaluate("window.__errors") == []
    page.close()


# ---- token ids ------------------------------------------------------------------------------


@pytest.mark.claim("explorer-js-tokenizer")
@pytest.mark.claim("explorer-own-text-numbers")
def test_token_ids_and_labels_equal_pythons(worker_page, model):
    """Every text gives the ids Python's ``tokenizers`` gives, and each token the label the
    built sentences use."""
    wrong = []
    for n, text in enumerate(TOKENIZER_TEXTS):
        got = worker_page.evaluate(
            "([id, text]) => window.__ask({ type: 'tokenize', id, text }, ['tokens', 'error'])", [n + 1, text]
        )
        assert got["type"] == "tokens", got
        ids = model.tokenizer.encode(text, add_special_tokens=False).ids
        pieces = [model.tokenizer.decode([i], skip_special_tokens=False) for i in ids]
        if got["ids"] != ids or got["pieces"] != pieces or got["labels"] != [label(p) for p in pieces]:
            wrong.append((text, got["ids"], ids, got["pieces"], pieces))
    assert wrong == []


# ---- the forward pass -----------------------------------------------------------------------


def causal(t: int):
    return np.tril_indices(t)  # row-major: the order of the flat triangles


@pytest.mark.parametrize("text", RUN_TEXTS, ids=range(1, len(RUN_TEXTS) + 1))
@pytest.mark.claim("explorer-js-mirrors-python")
@pytest.mark.claim("explorer-own-text-numbers")
@pytest.mark.claim("explorer-own-text-on-request")
def test_every_attention_weight_equals_qkvs(worker_page, model, text):
    got = worker_page.evaluate(RUN, [RUN_TEXTS.index(text) + 100, text, MAX_TOKENS])
    assert got["type"] == "result", got
    ids = model.tokenizer.encode(text, add_special_tokens=False).ids
    assert got["ids"] == ids[:MAX_TOKENS] and got["total"] == len(ids)
    if text == RUN_TEXTS[-1]:
        assert len(ids) > MAX_TOKENS  # this one is cut
    trace = smollm2.forward(model, ids[:MAX_TOKENS])
    c, t = trace.config, len(trace.ids)
    rows, cols = causal(t)
    shape = (c.n_layers, c.n_heads, t * (t + 1) // 2)
    weights = unpacked(got["weights"][1]).reshape(shape)  # the model's own (scaled) weights
    raw = unpacked(got["raw"]).reshape(shape)
    assert np.abs(weights - trace.weights[..., rows, cols]).max() <= WEIGHT_ATOL
    assert np.abs(raw[0] - trace.scores[0][..., rows, cols]).max() <= SCORE_ATOL
    # what else the page shows, against a float64 recomputation from qkv's raw scores
    scaled = unpacked(got["scaled"]).reshape(shape)
    np.testing.assert_allclose(scaled, raw / np.sqrt(c.d_head), rtol=1e-15, atol=0)
    exact = trace.scores.astype(np.float64)  # (layers, heads, T, T)
    for s, scores in enumerate((exact, exact / np.sqrt(c.d_head))):
        w = causal_weights(scores)  # qkv's mask and softmax, in float64
        got_w = unpacked(got["weights"][s]).reshape(shape)
        assert np.abs(got_w - w[..., rows, cols]).max() <= (WEIGHT_ATOL if s else 1e-3)
        h = -(w * np.log(np.where(w > 0, w, 1))).sum(axis=-1)  # (layers, heads, T), nats
        got_h = unpacked(got["entropy"][s]).reshape(c.n_layers, c.n_heads, t)
        assert np.abs(got_h - h).max() <= 1e-3
    assert got["labels"] == [label(p) for p in trace.pieces]


def test_an_empty_text_is_refused_with_a_message(worker_page):
    got = worker_page.evaluate(RUN, [999, "", MAX_TOKENS])
    assert got["type"] == "error" and got["kind"] == "input"
    assert "empty" in got["message"]


@pytest.mark.parametrize(
    ("message", "words"),
    [
        ({"type": "run", "id": 990, "text": "No limit given."}, "maxTokens must be a positive whole number"),
        ({"type": "run", "id": 991, "text": "A bad limit.", "maxTokens": 2.5}, "maxTokens must be"),
        ({"type": "edit", "id": 992, "off": [[30, 0]]}, "layers 0..29, heads 0..8"),
        ({"type": "edit", "id": 993, "off": "1.1"}, "off must be a list of [layer, head] pairs"),
    ],
)
def test_a_bad_message_is_bad_input_not_an_internal_error(worker_page, message, words):
    """The worker names what was wrong with the message (kind "input"); "internal" is kept for
    exceptions of its own code, which a message cannot cause."""
    worker_page.evaluate(RUN, [989, "Something to edit.", MAX_TOKENS])
    got = worker_page.evaluate("m => window.__ask(m, ['result', 'edited', 'error'])", message)
    assert got["type"] == "error" and got["kind"] == "input", got
    assert words in got["message"]


# ---- next-token predictions and heads switched off ------------------------------------------

PROB_ATOL = 1e-4  # the bar for every probability and the KL divergence
# Head sets fixed before the first run: the first layer (a rerun of every layer), one head
# of the middle and one late, and three heads spread over the second half, (layer, head) from 0.
HEAD_SETS = [((0, 0),), ((5, 2), (20, 8)), ((13, 8), (14, 3), (29, 0))]


def next_probs(logits_row) -> np.ndarray:
    """Softmax of one row of logits, in float64 (as Trace.next_tokens computes it)."""
    z = logits_row.astype(np.float64)
    p = np.exp(z - z.max())
    return p / p.sum()


def assert_predictions(got: dict, probs: np.ndarray, model) -> None:
    """The worker's top ten are qkv's likeliest ten, with qkv's probabilities to 1e-4."""
    best = np.argsort(-probs, kind="stable")[:10]
    assert got["ids"] == best.tolist()
    assert np.abs(np.array(got["probs"]) - probs[best]).max() <= PROB_ATOL
    assert got["pieces"] == list(model.pieces(best))


@pytest.mark.parametrize("text", RUN_TEXTS[:5], ids=range(1, 6))
@pytest.mark.claim("explorer-lab-predictions")
@pytest.mark.claim("explorer-js-mirrors-python")
def test_next_token_predictions_equal_qkvs(worker_page, model, text):
    got = worker_page.evaluate(RUN, [RUN_TEXTS.index(text) + 200, text, MAX_TOKENS])
    ids = model.tokenizer.encode(text, add_special_tokens=False).ids[:MAX_TOKENS]
    assert_predictions(got["predictions"], next_probs(smollm2.forward(model, ids).logits[-1]), model)


@pytest.mark.claim("explorer-js-mirrors-python")
def test_the_javascript_product_gives_qkvs_predictions_too(context, model_site, index, model):
    """Without WebAssembly (wasm: false, as in a browser without SIMD) the worker keeps its
    JavaScript matrix product, and the predictions are still qkv's."""
    page = new_worker_page(context, model_site)
    try:
        url = model_site + "explorer/smollm2/" + index["weights"]["file"]
        loaded = page.evaluate(LOAD, [url, index["weights"]["bytes"], False])
        assert loaded["type"] == "loaded" and loaded["product"] == "javascript", loaded
        text = RUN_TEXTS[1]
        got = page.evaluate(RUN, [1, text, MAX_TOKENS])
        ids = model.tokenizer.encode(text, add_special_tokens=False).ids
        assert_predictions(got["predictions"], next_probs(smollm2.forward(model, ids).logits[-1]), model)
    finally:
        page.close()


@pytest.mark.parametrize("text", RUN_TEXTS[:5], ids=range(1, 6))
@pytest.mark.claim("explorer-lab-heads-off")
def test_heads_off_equals_qkvs_heads_off(worker_page, model, text):
    """For each head set: the rerun's top ten and its KL divergence from the unedited
    prediction equal qkv.lab.interventions' heads off (run_edited), and it reran from the first
    edited layer."""
    got = worker_page.evaluate(RUN, [RUN_TEXTS.index(text) + 300, text, MAX_TOKENS])
    ids = np.array(got["ids"])
    p = next_probs(smollm2.forward(model, ids).logits[-1])
    for n, heads in enumerate(HEAD_SETS):
        edited = worker_page.evaluate(EDIT, [400 + n, [list(x) for x in heads]])
        assert edited["type"] == "edited", edited
        logits = interventions.run_edited(
            model, ids, interventions.heads_off(model.config, [heads]), rows=[-1]
        )
        q = next_probs(logits.logits[0, -1])
        assert_predictions(edited["predictions"], q, model)
        kl = float((p * (np.log(p) - np.log(q))).sum())
        assert abs(edited["kl"] - kl) <= PROB_ATOL
        assert edited["from_layer"] == min(layer for layer, _ in heads) + 1


# ---- a bad model file gets a clear message --------------------------------------------------


def header_field(data: bytes, name: str) -> int:
    """Where the tensor info of ``name`` starts in the file's header (its name's length)."""
    encoded = name.encode()
    at = data.index(struct.pack("<Q", len(encoded)) + encoded)
    return at


def tensor_info(data: bytes, name: str) -> dict:
    """Offsets of a tensor info's fields: n_dims, dims, type (GGUF v3 layout)."""
    at = header_field(data, name) + 8 + len(name.encode())
    n_dims = struct.unpack_from("<I", data, at)[0]
    return {"n_dims": at, "dims": at + 4, "type": at + 4 + 8 * n_dims}


def corrupt(data: bytes, how: str) -> bytes:
    b = bytearray(data)
    if how == "magic":
        b[0:4] = b"<!DO"  # what an HTML error page starts with
    elif how == "version":
        b[4:8] = struct.pack("<I", 99)
    elif how == "header-cut":
        del b[1000:]
    elif how == "data-cut":
        del b[50_000_000:]
    elif how == "renamed":
        at = header_field(data, "blk.12.attn_q.weight") + 8
        b[at : at + 20] = b"blk.12.attn_x.weight"  # same length: every offset stays valid
    elif how == "shape":
        field = tensor_info(data, "blk.3.attn_k.weight")
        b[field["dims"] + 8 : field["dims"] + 16] = struct.pack("<Q", 160)  # 192 outputs -> 160
    elif how == "type":
        field = tensor_info(data, "blk.5.ffn_up.weight")
        b[field["type"] : field["type"] + 4] = struct.pack("<I", 14)  # Q4_1 -> Q6_K
    elif how == "architecture":
        at = data.index(b"llama", data.index(b"general.architecture"))
        b[at : at + 5] = b"mamba"
    return bytes(b)


BAD_FILES = {  # how the file is damaged -> words the message must contain
    "magic": ["not a GGUF model file", "3c 21 44 4f"],
    "version": ["version 99", "versions 2 and 3"],
    "header-cut": ["cut short", "has 1000 bytes", "load the model again"],
    "data-cut": ["cut short", "needs bytes up to", "load the model again"],
    "renamed": ["no tensor named blk.12.attn_q.weight"],
    "shape": ["blk.3.attn_k.weight", "shape [576, 160]", "needs [576, 192]"],
    "type": ["blk.5.ffn_up.weight", "GGML type 14", "Q4_1"],
    "architecture": ["Expected a llama model", "mamba"],
}


@pytest.mark.parametrize("how", BAD_FILES)
def test_a_bad_model_file_is_refused_with_a_clear_message(context, model_site, extra_dir, how):
    path = extra_dir / f"{how}.gguf"
    path.write_bytes(corrupt(smollm2.gguf_path().read_bytes(), how))
    page = new_worker_page(context, model_site)
    try:
        got = page.evaluate(LOAD, [model_site + f"extra/{how}.gguf", None])
        assert got["type"] == "error" and got["kind"] == "file", got
        for words in BAD_FILES[how]:
            assert words in got["message"], (words, got["message"])
        # and a model that failed to load runs nothing
        refused = page.evaluate("() => window.__ask({ type: 'run', id: 1, text: 'hi' }, ['result', 'error'])")
        assert refused["kind"] == "not-loaded"
    finally:
        page.close()
        path.unlink()


def test_a_file_larger_than_the_site_says_is_refused(context, model_site, index):
    page = new_worker_page(context, model_site)
    try:
        url = model_site + "explorer/smollm2/" + index["weights"]["file"]
        got = page.evaluate(LOAD, [url, index["weights"]["bytes"] - 1000])
        assert got["type"] == "error" and "not the same file" in got["message"]
    finally:
        page.close()


EMBEDDING_ROWS = 4096  # the embedding cut to its first rows: ids from 4,096 on have none


def embedding_cut(data: bytes, rows: int) -> bytes:
    """The model file with ``llama.vocab_size`` and the embedding's number of rows both set to
    ``rows`` (the tensor's first rows stay where they were); the tokenizer keeps all its
    tokens."""
    b = bytearray(data)
    key = b"llama.vocab_size"
    at = data.index(struct.pack("<Q", len(key)) + key) + 8 + len(key)
    assert struct.unpack_from("<II", data, at) == (4, 49152)  # a uint32 (GGUF type 4)
    b[at + 4 : at + 8] = struct.pack("<I", rows)
    field = tensor_info(data, "token_embd.weight")
    assert struct.unpack_from("<QQ", data, field["dims"]) == (576, 49152)
    b[field["dims"] + 8 : field["dims"] + 16] = struct.pack("<Q", rows)
    return bytes(b)


def test_an_exception_of_the_workers_own_code_is_reported_as_internal(context, model_site, extra_dir, model):
    """A file whose embedding has fewer rows than its tokenizer has tokens passes the loader's
    checks (they hold the tensors to the file's own metadata). A text with a token past the
    embedding then makes the forward pass throw: a failure of the worker's code, not of the
    text, so it is reported as kind "internal" and called a bug, not "input"; the same worker
    still runs a text whose tokens all have rows."""
    path = extra_dir / "embedding-cut.gguf"
    path.write_bytes(embedding_cut(smollm2.gguf_path().read_bytes(), EMBEDDING_ROWS))
    page = new_worker_page(context, model_site)
    try:
        loaded = page.evaluate(LOAD, [model_site + "extra/embedding-cut.gguf", None])
        assert loaded["type"] == "loaded", loaded
        past, within = " Paris", "a"
        assert max(model.tokenizer.encode(past, add_special_tokens=False).ids) >= EMBEDDING_ROWS
        assert max(model.tokenizer.encode(within, add_special_tokens=False).ids) < EMBEDDING_ROWS
        got = page.evaluate(RUN, [1, past, MAX_TOKENS])
        assert got["type"] == "error" and got["kind"] == "internal", got
        assert "This is a bug, not a problem with your text" in got["message"]
        assert "out of range" in got["message"]
        assert page.evaluate(RUN, [2, within, MAX_TOKENS])["type"] == "result"
    finally:
        page.close()
        path.unlink()


# ---- a minimal pair -------------------------------------------------------------------------

PAIR = """async ([id, texts, conts, off]) => {
  const m = await window.__ask({ type: "pair", id, texts, conts, off, maxTokens: 64 }, ["paired", "error"]);
  if (m.type !== "paired") return m;
  return Object.assign({}, m, { moved: Array.from(m.moved) });
}"""

# Pairs fixed before the first run: the coreference chapter's kind (one word differs) and
# continuations of one and of several tokens.
PAIRS = [
    (
        (
            "The cat sat on the mat because it was hungry. The",
            "The cat sat on the mat because it was soft. The",
        ),
        (" cat", " mat"),
    ),
    (
        (
            "The trophy did not fit in the suitcase because it was too big. It was the",
            "The trophy did not fit in the suitcase because it was too small. It was the",
        ),
        (" trophy", " suitcase that was small"),
    ),
]


def log_prob(model, text_ids, cont_ids, heads=()) -> float:
    """log P(continuation | text) from qkv: the text's ids then the continuation's, the sum of
    the log-softmax (float64) at the position before each continuation token."""
    ids = np.array([*text_ids, *cont_ids])
    rows = list(range(len(text_ids) - 1, len(ids) - 1))
    if heads:
        edits = interventions.heads_off(model.config, [set(heads)])
        logits = interventions.run_edited(model, ids, edits, rows=rows).logits[0]
    else:
        logits = smollm2.forward(model, ids).logits[rows]
    z = logits.astype(np.float64)
    logp = z - z.max(-1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
    return float(sum(logp[j, c] for j, c in enumerate(cont_ids)))


@pytest.mark.parametrize(("texts", "conts"), PAIRS, ids=["cat-mat", "trophy"])
@pytest.mark.claim("explorer-lab-pair")
def test_a_minimal_pairs_preferences_and_moved_weights_equal_qkvs(worker_page, model, texts, conts):
    heads = ((13, 8), (15, 3))
    got = worker_page.evaluate(PAIR, [700, list(texts), list(conts), [list(h) for h in heads]])
    assert got["type"] == "paired", got
    enc = lambda t: model.tokenizer.encode(t, add_special_tokens=False).ids  # noqa: E731
    tt, cc = [enc(t) for t in texts], [enc(c) for c in conts]
    assert got["conts"] == cc and [s["ids"] for s in got["texts"]] == tt
    for i in range(2):
        want = [log_prob(model, tt[i], c) for c in cc]
        edited = [log_prob(model, tt[i], c, heads) for c in cc]
        assert np.abs(np.array(got["texts"][i]["logp"]) - want).max() <= 1e-3
        assert abs(got["texts"][i]["preference"] - (want[0] - want[1])) <= 1e-3
        assert abs(got["texts"][i]["preference_edited"] - (edited[0] - edited[1])) <= 1e-3
    # the weights' movement, from qkv's weights of the two texts (their own queries)
    t = min(len(x) for x in tt)
    w = [smollm2.forward(model, x).weights.astype(np.float64)[:, :, :t, :t] for x in tt]
    moved = np.abs(w[0] - w[1]).sum(-1) / 2  # (layers, heads, t)
    assert got["T"] == t
    assert np.abs(np.array(got["moved"]).reshape(30, 9, t) - moved).max() <= 1e-4
