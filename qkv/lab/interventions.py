"""Experiments on SmolLM2-135M-Instruct: change one thing in the forward pass, measure what moves.

A weight says where a head reads; it does not say that the model's answer needs what the
head reads. That shows only when the part is taken out and the prediction moves. Each edit
here is a :class:`qkv.smollm2.Edit` that :func:`qkv.smollm2.decoder_layer` applies in one
layer, and changes one thing:

- :class:`HeadsOff`: the output of some query heads is set to zero before ``W_O``, so they
  add nothing to the residual stream (zero ablation), or to a fixed vector such as their
  mean output over many texts (mean ablation);
- :class:`ValueOff`: every head stops taking one token's value (the first token's, say);
  the other weights stay as they are, or (``renormalise=True``) are scaled up to sum to 1
  again, so the weight that token had goes to the other tokens instead;
- :class:`ValueSwap`: every head takes another vector in place of one token's value (the
  value another word had there, say), with the weights left as they are;
- :class:`InputPatch`: something is added to the residual stream that only the keys (or
  only the queries, or only the values) of this layer read: take the output of earlier
  heads out of the keys alone, say, to see whether the keys are where it is used;
- :class:`RopeOff`: RoPE turns nothing in this layer (every position is 0), the other
  layers keep theirs.

:func:`run_edited` runs token ids with edits in some layers. The layers before the first
edited one are computed once; from there on, a batch of variants (one set of heads switched
off per variant, say) runs together, one matrix product per layer for all of them.
:func:`head_outputs` and :func:`head_writes` give what heads write, for the edits to take
out; :func:`copy_scores` measures how much each head's output raises the logit of the
tokens it reads.

Examples
--------
With the model installed (not run here, since the model is optional)::

    from qkv import smollm2
    from qkv.lab import interventions
    model = smollm2.load()
    ids = model.encode("The cat sat on the mat because it was warm")
    edits = interventions.heads_off(model.config, [{(13, 8)}])  # layer 14, head 9 (from 0)
    edited = interventions.run_edited(model, ids, edits)
    edited.logits.shape                               # (1, 10, 49152): one variant
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np

from qkv.dot_product import softmax
from qkv.smollm2 import Config, Edit, LayerTrace, Model, Trace, check_ids, output_logits, run_layers

__all__ = [
    "Edited",
    "HeadsOff",
    "InputPatch",
    "PerVariant",
    "RopeOff",
    "ValueOff",
    "ValueSwap",
    "copy_scores",
    "head_outputs",
    "head_writes",
    "heads_off",
    "kl_divergence",
    "log_odds",
    "next_token_loss",
    "run_edited",
    "value_off",
]


def _group_values(v, n_heads: int) -> np.ndarray:
    """Each query head's copy of its group's values: (..., n_kv_heads, Tk, d) -> (..., n_heads, Tk, d)."""
    return np.repeat(v, n_heads // v.shape[-3], axis=-3)


# --8<-- [start:heads_off]
class HeadsOff(Edit):
    """Switch heads off in one layer: their output becomes zero before ``W_O``.

    ``off`` is a bool array (n_variants, n_heads): row ``b`` names the heads that variant
    ``b`` of the batch switches off. ``fill`` (n_variants, n_heads, d_head), if given, is
    what each switched-off head outputs instead of zeros, per variant: its mean output over
    many texts, for a mean ablation. The weights are left as they are: only what the heads
    write into the residual stream changes.
    """

    def __init__(self, off, fill=None):
        self.off = np.asarray(off, dtype=bool)
        if self.off.ndim != 2:
            raise ValueError(f"off must be (n_variants, n_heads), got shape {self.off.shape}")
        self.fill = None if fill is None else np.asarray(fill)
        if self.fill is not None and (self.fill.ndim != 3 or self.fill.shape[:2] != self.off.shape):
            raise ValueError(
                f"fill must be (n_variants, n_heads, d_head) with (n_variants, n_heads) = "
                f"{self.off.shape}, got shape {self.fill.shape}"
            )

    def attention(self, weights, v, heads):  # heads: (n_variants, [texts,] n_heads, T, d)
        n_variants, n_heads = self.off.shape
        texts = (1,) * (heads.ndim - 4)  # a batch of texts, if any, shares the variant's row
        off = self.off.reshape(n_variants, *texts, n_heads, 1, 1)  # T and d broadcast
        fill = 0.0
        if self.fill is not None:  # (n_variants, [1,] n_heads, 1, d_head)
            fill = self.fill.reshape(n_variants, *texts, n_heads, 1, self.fill.shape[-1])
        return weights, np.where(off, fill, heads).astype(heads.dtype)


# --8<-- [end:heads_off]


def heads_off(
    config: Config, variants: Sequence[Iterable[tuple[int, int]]], fill=None
) -> dict[int, HeadsOff]:
    """Edits that switch off, in variant ``b``, the heads ``variants[b]`` names.

    Heads are ``(layer, head)`` pairs counted from 0. A variant may be empty (the unedited
    model, for comparison in the same batch). ``fill``, if given, is what a switched-off
    head outputs instead of zeros: (n_layers, n_heads, d_head) for every variant (a mean
    ablation, with each head's mean output from :func:`head_outputs`), or
    (n_variants, n_layers, n_heads, d_head), one per variant (zeros in some, means in
    others, in one batch). Returns ``{layer: HeadsOff}`` for every layer that some variant
    touches, as :func:`run_edited` takes it.

    Examples
    --------
    >>> from qkv.smollm2 import Config
    >>> c = Config(4, 8, 2, 1, 4, 16, vocab_size=10, rope_base=1e4, norm_eps=1e-5,
    ...            context_length=32)
    >>> edits = heads_off(c, [{(1, 0)}, set(), {(1, 1), (3, 0)}])
    >>> sorted(edits), edits[1].off.tolist()
    ([1, 3], [[True, False], [False, False], [False, True]])
    """
    variants = [set(v) for v in variants]
    if not variants:
        raise ValueError("give at least one variant (a set of heads, possibly empty)")
    if fill is not None:
        fill, shape = (np.asarray(fill), (config.n_layers, config.n_heads, config.d_head))
        if fill.shape not in (shape, (len(variants), *shape)):
            raise ValueError(
                f"fill must be (n_layers, n_heads, d_head) = {shape} or one such per variant, "
                f"{(len(variants), *shape)}; got shape {fill.shape}"
            )
        fill = np.broadcast_to(fill, (len(variants), *shape))
    off = {}
    for b, chosen in enumerate(variants):
        for layer, head in chosen:
            if not (0 <= layer < config.n_layers and 0 <= head < config.n_heads):
                raise ValueError(
                    f"head ({layer}, {head}) does not exist: layers are "
                    f"0..{config.n_layers - 1}, heads 0..{config.n_heads - 1}"
                )
            off.setdefault(layer, np.zeros((len(variants), config.n_heads), dtype=bool))
            off[layer][b, head] = True
    return {
        layer: HeadsOff(mask, None if fill is None else fill[:, layer]) for layer, mask in sorted(off.items())
    }


# --8<-- [start:value_off]
class ValueOff(Edit):
    """Take one token's value out of every head's weighted sum, for the queries after it.

    Without renormalising, its term ``w v`` is simply dropped: the other weights stay as
    they are and sum to less than 1. With ``renormalise=True`` they are divided by their
    sum, so the weight that token had is shared out over the other tokens in proportion.
    The token's own query and those before it are left as they are (query 1 sees only
    token 1). Its key stays: every weight is what the model computed.
    """

    def __init__(self, key: int = 0, renormalise: bool = False):
        if key < 0:
            raise ValueError(f"key must be a position from 0, got {key}")
        self.key, self.renormalise = key, renormalise

    def attention(self, weights, v, heads):
        w = weights.copy()  # (..., n_heads, T, Tk)
        after = slice(self.key + 1, None)  # the queries after the token
        w[..., after, self.key] = 0.0
        if self.renormalise:
            left = w[..., after, :].sum(axis=-1, keepdims=True)
            if (left <= 0).any():
                raise ValueError(
                    f"a query put all its weight on key {self.key}: there is nothing left to renormalise"
                )
            w[..., after, :] /= left
        return w, w @ _group_values(v, w.shape[-3])  # (..., n_heads, T, d_head)


# --8<-- [end:value_off]


def value_off(
    config: Config, key: int = 0, renormalise: bool = False, layers: Iterable[int] | None = None
) -> dict[int, ValueOff]:
    """:class:`ValueOff` of ``key`` in each of ``layers`` (all of them by default)."""
    layers = range(config.n_layers) if layers is None else layers
    edit = ValueOff(key, renormalise)
    return {layer: edit for layer in _check_layers(config, layers)}


# --8<-- [start:value_swap]
class ValueSwap(Edit):
    """Every head takes ``value`` in place of one token's value, for the queries after it.

    ``value`` is (n_kv_heads, d_head): one vector per key/value head, such as the value
    another text's first token has in this layer. The weights stay as the model computed
    them, so only what the token hands on changes; a ``value`` of zeros is
    :class:`ValueOff` without renormalising.

    Examples
    --------
    One head, two tokens; query 2 puts 0.75 on token 1, whose value (1, 0) becomes (0, 4):

    >>> weights = np.array([[[1.0, 0.0], [0.75, 0.25]]])      # (heads, T, T)
    >>> v = np.array([[[1.0, 0.0], [0.0, 1.0]]])              # (kv heads, T, d_head)
    >>> _, heads = ValueSwap(0, [[0.0, 4.0]]).attention(weights, v, weights @ v)
    >>> heads[0].tolist()                                     # query 1 keeps its own
    [[1.0, 0.0], [0.0, 3.25]]
    """

    def __init__(self, key, value):
        if key < 0:
            raise ValueError(f"key must be a position from 0, got {key}")
        self.key, self.value = key, np.asarray(value)
        if self.value.ndim != 2:
            raise ValueError(f"value must be (n_kv_heads, d_head), got shape {self.value.shape}")

    def attention(self, weights, v, heads):
        if v.shape[-3] != self.value.shape[0] or v.shape[-1] != self.value.shape[1]:
            raise ValueError(
                f"value is {self.value.shape}; this layer's values are (n_kv_heads, d_head) = "
                f"{(v.shape[-3], v.shape[-1])}"
            )
        swapped = v.copy()  # (..., n_kv_heads, Tk, d_head)
        swapped[..., self.key, :] = self.value
        new = weights @ _group_values(swapped, weights.shape[-3])  # (..., n_heads, T, d_head)
        before = np.arange(heads.shape[-2]) <= self.key  # the token's own query and earlier
        return weights, np.where(before[:, None], heads, new).astype(heads.dtype)


# --8<-- [end:value_swap]


# --8<-- [start:input_patch]
class InputPatch(Edit):
    """Add ``delta`` to the residual stream that only some of this layer's projections read.

    ``into`` names them: ``"k"`` for the keys alone, ``"q"``, ``"v"``, or several
    (``"qk"``). The others read the stream as it is. With ``delta`` minus what earlier
    heads wrote there, the keys of this layer are computed as if those heads had written
    nothing, while everything else still gets their output: whether a later head uses an
    earlier head's output through its keys (K-composition, Elhage et al. 2021).
    ``delta`` is (..., T, d_model), as the stream ``x``.

    Examples
    --------
    >>> x = np.ones((2, 3))                                  # (T, d_model)
    >>> x_q, x_k, x_v = InputPatch(-x, "k").inputs(x)
    >>> x_q.tolist(), x_k.tolist()
    ([[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    """

    def __init__(self, delta, into: str = "k"):
        if not into or set(into) - set("qkv"):
            raise ValueError(f"into must name some of 'q', 'k', 'v' (such as 'k' or 'qv'), got {into!r}")
        self.delta, self.into = np.asarray(delta), into

    def inputs(self, x):
        try:
            patched = (x + self.delta).astype(np.result_type(x))
        except ValueError:
            raise ValueError(f"delta {self.delta.shape} must broadcast to the stream {np.shape(x)}") from None
        return tuple(patched if part in self.into else x for part in "qkv")


# --8<-- [end:input_patch]


class PerVariant(Edit):
    """A different edit for each variant of the batch: ``edits[b]`` acts on variant ``b``
    (the first axis), so several experiments run as one batch. They must agree on where
    RoPE turns (:class:`RopeOff` cannot be mixed with the others)."""

    def __init__(self, edits: Sequence[Edit]):
        self.edits = list(edits)
        if not self.edits:
            raise ValueError("give at least one edit")

    def positions(self, positions):
        turned = [np.asarray(e.positions(positions)) for e in self.edits]
        if any(not np.array_equal(turned[0], t) for t in turned[1:]):
            raise ValueError("the edits of one batch must turn RoPE at the same positions")
        return turned[0]

    def inputs(self, x):
        if len(x) != len(self.edits):
            raise ValueError(f"{len(self.edits)} edits for a batch of {len(x)} variants")
        done = [e.inputs(x_b) for e, x_b in zip(self.edits, x, strict=True)]
        return tuple(np.stack([d[part] for d in done]) for part in range(3))

    def attention(self, weights, v, heads):
        if len(weights) != len(self.edits):
            raise ValueError(f"{len(self.edits)} edits for a batch of {len(weights)} variants")
        done = [e.attention(w, v_b, h) for e, w, v_b, h in zip(self.edits, weights, v, heads, strict=True)]
        return np.stack([w for w, _ in done]), np.stack([h for _, h in done])


class RopeOff(Edit):
    """RoPE turns nothing in this layer: queries and keys are used as projected, at position
    0 each. The positions of the other layers, the causal mask and the values are kept."""

    def positions(self, positions):
        return np.zeros(len(positions), dtype=np.int64)


def _check_layers(config: Config, layers: Iterable[int]) -> list[int]:
    layers = sorted(set(int(layer) for layer in layers))
    if not layers or layers[0] < 0 or layers[-1] >= config.n_layers:
        raise ValueError(f"layers must be a non-empty set of 0..{config.n_layers - 1}, got {layers}")
    return layers


class Edited(NamedTuple):
    """What :func:`run_edited` returns."""

    logits: np.ndarray  # (n_variants, [n_texts,] len(rows), vocab_size): next-token scores
    seen: list[LayerTrace]  # every layer's q, k, v, weights, each with the variant axis first


def run_edited(model: Model, ids, edits: dict[int, Edit], n_variants: int | None = None, rows=None) -> Edited:
    """Run the model on ``ids`` with ``edits`` (``{layer from 0: Edit}``) in a batch of variants.

    ``ids`` is one text (T,) or several of one length (n_texts, T). The layers before the
    first edited one run once, unedited; their output is copied to every variant and the
    other layers run on the whole batch, (n_variants, [n_texts,] T, d_model), one matrix
    product per weight matrix for all of it. ``n_variants`` defaults to the number of
    variants the edits hold (1 for edits that hold none). ``rows`` picks the positions
    whose logits are returned (all by default): the output matrix is the largest in the
    model, so an experiment that reads a few positions asks for those.
    """
    config = model.config
    ids = np.asarray(ids)
    texts = ids[None] if ids.ndim == 1 else ids
    if texts.ndim != 2:
        raise ValueError(f"ids must be (T,) or (n_texts, T), got shape {ids.shape}")
    for text in texts:
        check_ids(text, config)
    if not edits:
        raise ValueError("edits is empty: run smollm2.forward for the unedited model")
    if min(edits) < 0 or max(edits) >= config.n_layers:
        raise ValueError(f"edits name layers {sorted(edits)}; layers are 0..{config.n_layers - 1}")
    sizes = {_variants(e) for e in edits.values()} - {None}
    if n_variants is None:
        n_variants = sizes.pop() if len(sizes) == 1 else 1
    if sizes - {n_variants}:
        raise ValueError(f"the edits hold {sorted(sizes)} variants; n_variants is {n_variants}")
    start, positions = min(edits), np.arange(ids.shape[-1])
    x, before = run_layers(model, model.embedding[ids], positions, stop=start)  # once
    x = np.broadcast_to(x, (n_variants, *x.shape))  # (n_variants, [n_texts,] T, d_model)
    x, after = run_layers(model, x, positions, edits=edits, start=start)
    rows = slice(None) if rows is None else rows
    shared = [LayerTrace(*(np.broadcast_to(a, (n_variants, *a.shape)) for a in s)) for s in before]
    return Edited(output_logits(model, x[..., rows, :]), shared + after)


def _variants(edit: Edit) -> int | None:
    """How many variants an edit holds (None: it acts on any batch alike)."""
    if isinstance(edit, HeadsOff):
        return len(edit.off)
    if isinstance(edit, PerVariant):
        return len(edit.edits)
    return None


def head_outputs(trace: Trace) -> np.ndarray:
    """What every head passes to ``W_O`` in a run: its weighted sum of values, per position.

    Returns (n_layers, n_heads, T, d_head), from the trace's weights and values: the
    ``heads`` that :func:`qkv.smollm2.decoder_layer` merges. Averaged over the positions of
    many texts, it is the ``fill`` of a mean ablation (:func:`heads_off`).
    """
    v = _group_values(trace.v, trace.config.n_heads)  # (n_layers, n_heads, T, d_head)
    return trace.weights @ v


def head_writes(model: Model, outputs, heads: Iterable[tuple[int, int]]) -> np.ndarray:
    """What the heads ``heads`` (``(layer, head)`` from 0) add to the residual stream, summed.

    ``outputs`` is :func:`head_outputs`' (n_layers, n_heads, ..., T, d_head); each head's
    output goes through its own ``d_head`` rows of its layer's ``W_O``. Returns
    (..., T, d_model): the part of the stream that those heads wrote, which an
    :class:`InputPatch` of minus it takes out of a later layer's keys.
    """
    config, outputs = model.config, np.asarray(outputs)
    if outputs.shape[:2] != (config.n_layers, config.n_heads) or outputs.shape[-1] != config.d_head:
        raise ValueError(
            f"outputs must be (n_layers, n_heads, ..., T, d_head) = "
            f"({config.n_layers}, {config.n_heads}, ..., T, {config.d_head}), got shape {outputs.shape}"
        )
    heads = sorted(set(heads))
    if not heads:
        raise ValueError("give at least one (layer, head)")
    total = np.zeros((*outputs.shape[2:-1], config.d_model), dtype=np.float64)
    for layer, head in heads:
        if not (0 <= layer < config.n_layers and 0 <= head < config.n_heads):
            raise ValueError(f"head ({layer}, {head}) does not exist")
        rows = model.layers[layer].attention.w_o[head * config.d_head : (head + 1) * config.d_head]
        total += outputs[layer, head] @ rows  # (..., T, d_head) @ (d_head, d_model)
    return total


# --8<-- [start:copy_scores]
def copy_scores(model: Model, trace: Trace, rows) -> np.ndarray:
    """How much each head's output raises the logit of the tokens it reads: (n_layers, n_heads).

    The direct effect of a head (Elhage et al. 2021): what it writes through ``W_O`` at
    query ``i``, taken straight to the logits through the final RMSNorm, whose division by
    the stream's size is frozen at its value in this run (the norm is then linear), and the
    tied embedding. For each key ``j`` the head reads, the effect on the logit of the token
    at ``j``, minus the mean effect over the whole vocabulary, is weighted by the head's
    weight on ``j``; the score is the mean of that sum over the queries ``rows``. Positive:
    the head raises what it attends to above an average token, as a copying head does
    (Olsson et al. 2022); it is in units of logits.
    """
    config = model.config
    rows = np.arange(len(trace.ids))[rows]  # the queries scored
    x, _ = run_layers(model, model.embedding[trace.ids], np.arange(len(trace.ids)))
    x = x.astype(np.float64)  # (T, d_model): the stream the final norm reads
    size = np.sqrt(np.mean(x * x, axis=-1) + config.norm_eps)  # (T,): frozen
    # each token's embedding against the vocabulary's mean: (T, d_model)
    target = (model.embedding[trace.ids] - model.embedding.mean(axis=0)) * model.final_norm
    v = _group_values(trace.v, config.n_heads).astype(np.float64)  # (L, H, T, d_head)
    w_o = np.stack([layer.attention.w_o for layer in model.layers])  # (L, H * d_head, d_model)
    w_o = w_o.reshape(config.n_layers, config.n_heads, config.d_head, config.d_model)
    read = w_o @ target.T  # (L, H, d_head, T): a head's output read off token j's logit
    per_key = np.einsum("lhjd,lhdj->lhj", v, read)  # (L, H, T): key j's value, written
    weights = trace.weights[:, :, rows].astype(np.float64)  # (L, H, rows, T)
    effect = (weights @ per_key[..., None])[..., 0] / size[rows]  # (L, H, rows)
    return effect.mean(axis=-1)


# --8<-- [end:copy_scores]


def kl_divergence(p_logits, q_logits) -> np.ndarray:
    """KL(p ‖ q) in nats between the next-token distributions of two sets of logits, per row
    (the two broadcast: one unedited run against a batch of edited ones, say).

    Examples
    --------
    >>> same = np.array([[1.0, 2.0, 3.0]])
    >>> kl_divergence(same, same).tolist()
    [0.0]
    >>> p, q = [[0.0, 0.0]], [[0.0, np.log(3.0)]]  # (1/2, 1/2) and (1/4, 3/4)
    >>> round(float(kl_divergence(p, q)[0]), 4), round(float(np.log(2) + np.log(2 / 3)) / 2, 4)
    (0.1438, 0.1438)
    """
    p_logits = np.asarray(p_logits, dtype=np.float64)
    q_logits = np.asarray(q_logits, dtype=np.float64)
    try:
        np.broadcast_shapes(p_logits.shape, q_logits.shape)
    except ValueError:
        raise ValueError(
            f"logits must broadcast to one shape, got {p_logits.shape} and {q_logits.shape}"
        ) from None
    log_p = p_logits - _logsumexp(p_logits)
    log_q = q_logits - _logsumexp(q_logits)
    return np.sum(softmax(p_logits, axis=-1) * (log_p - log_q), axis=-1)


def next_token_loss(logits, next_ids) -> np.ndarray:
    """``−log P(next token)`` in nats for rows of ``logits`` (..., vocab_size) and the token
    ids that did come next (shaped like the rows, or broadcasting to them): how surprised
    the model is, per position.

    Examples
    --------
    >>> next_token_loss(np.log([[0.5, 0.25, 0.25]]), [1]).round(4).tolist()
    [1.3863]
    """
    logits = np.asarray(logits, dtype=np.float64)
    next_ids = np.asarray(next_ids)
    try:
        picked = np.broadcast_to(next_ids, logits.shape[:-1])[..., None]  # (..., 1)
    except ValueError:
        raise ValueError(
            f"give one next token per row: logits {logits.shape}, next_ids {next_ids.shape}"
        ) from None
    log_p = logits - _logsumexp(logits)  # (..., vocab_size)
    return -np.take_along_axis(log_p, picked, axis=-1)[..., 0]


def log_odds(logits, a: int, b: int) -> np.ndarray:
    """``log P(a) − log P(b)`` for token ids ``a`` and ``b`` from rows of logits: how much
    more the model expects ``a`` than ``b`` next (positive: ``a``).

    Examples
    --------
    >>> log_odds(np.log([[0.6, 0.3, 0.1]]), 0, 1).round(4).tolist()
    [0.6931]
    """
    logits = np.asarray(logits, dtype=np.float64)
    return logits[..., a] - logits[..., b]


def _logsumexp(x: np.ndarray) -> np.ndarray:
    top = x.max(axis=-1, keepdims=True)
    return top + np.log(np.exp(x - top).sum(axis=-1, keepdims=True))
