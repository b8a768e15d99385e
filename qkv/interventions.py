"""Experiments on SmolLM2-135M-Instruct: change one thing in the forward pass, measure what moves.

A weight says where a head reads; it does not say that the model's answer needs what the
head reads. That shows only when the part is taken out and the prediction moves. Each edit
here is a :class:`qkv.smollm2.Edit` that :func:`qkv.smollm2.decoder_layer` applies in one
layer, and changes one thing:

- :class:`HeadsOff`: the output of some query heads is set to zero before ``W_O``, so they
  add nothing to the residual stream (an ablation);
- :class:`KeyOff`: every head stops taking one token's value (the first token's, say);
  the other weights stay as they are, or (``renormalise=True``) are scaled up to sum to 1
  again, so the weight that token had goes to the other tokens instead;
- :class:`RopeOff`: RoPE turns nothing in this layer (every position is 0), the other
  layers keep theirs.

:func:`run_edited` runs token ids with edits in some layers. The layers before the first
edited one are computed once; from there on, a batch of variants (one set of heads switched
off per variant, say) runs together, one matrix product per layer for all of them.

Examples
--------
With the model installed (not run here, since the model is optional)::

    from qkv import interventions, smollm2
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
from qkv.smollm2 import Config, Edit, LayerTrace, Model, check_ids, output_logits, run_layers

__all__ = [
    "Edited",
    "HeadsOff",
    "KeyOff",
    "PerVariant",
    "RopeOff",
    "heads_off",
    "key_off",
    "kl_divergence",
    "log_odds",
    "next_token_loss",
    "run_edited",
]


def _group_values(v, n_heads: int) -> np.ndarray:
    """Each query head's copy of its group's values: (..., n_kv_heads, Tk, d) -> (..., n_heads, Tk, d)."""
    return np.repeat(v, n_heads // v.shape[-3], axis=-3)


# --8<-- [start:heads_off]
class HeadsOff(Edit):
    """Switch heads off in one layer: their output becomes zero before ``W_O``.

    ``off`` is a bool array (n_variants, n_heads): row ``b`` names the heads that variant
    ``b`` of the batch switches off. The weights are left as they are: only what the heads
    write into the residual stream changes.
    """

    def __init__(self, off):
        self.off = np.asarray(off, dtype=bool)
        if self.off.ndim != 2:
            raise ValueError(f"off must be (n_variants, n_heads), got shape {self.off.shape}")

    def attention(self, weights, v, heads):  # heads: (n_variants, [texts,] n_heads, T, d)
        n_variants, n_heads = self.off.shape
        texts = (1,) * (heads.ndim - 4)  # a batch of texts, if any, shares the variant's row
        off = self.off.reshape(n_variants, *texts, n_heads, 1, 1)  # T and d broadcast
        return weights, np.where(off, 0.0, heads).astype(heads.dtype)


# --8<-- [end:heads_off]


def heads_off(config: Config, variants: Sequence[Iterable[tuple[int, int]]]) -> dict[int, HeadsOff]:
    """Edits that switch off, in variant ``b``, the heads ``variants[b]`` names.

    Heads are ``(layer, head)`` pairs counted from 0. A variant may be empty (the unedited
    model, for comparison in the same batch). Returns ``{layer: HeadsOff}`` for every layer
    that some variant touches, as :func:`run_edited` takes it.

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
    return {layer: HeadsOff(mask) for layer, mask in sorted(off.items())}


# --8<-- [start:key_off]
class KeyOff(Edit):
    """Take one key's value out of every head's weighted sum, for the queries after it.

    Without renormalising, its term ``w v`` is simply dropped: the other weights stay as
    they are and sum to less than 1. With ``renormalise=True`` they are divided by their
    sum, so the weight that key had is shared out over the other keys in proportion. The
    key's own query and those before it are left as they are (query 1 sees only key 1).
    """

    def __init__(self, key: int = 0, renormalise: bool = False):
        if key < 0:
            raise ValueError(f"key must be a position from 0, got {key}")
        self.key, self.renormalise = key, renormalise

    def attention(self, weights, v, heads):
        w = weights.copy()  # (..., n_heads, T, Tk)
        after = slice(self.key + 1, None)  # the queries after the key
        w[..., after, self.key] = 0.0
        if self.renormalise:
            left = w[..., after, :].sum(axis=-1, keepdims=True)
            if (left <= 0).any():
                raise ValueError(
                    f"a query put all its weight on key {self.key}: there is nothing left to renormalise"
                )
            w[..., after, :] /= left
        return w, w @ _group_values(v, w.shape[-3])  # (..., n_heads, T, d_head)


# --8<-- [end:key_off]


def key_off(
    config: Config, key: int = 0, renormalise: bool = False, layers: Iterable[int] | None = None
) -> dict[int, KeyOff]:
    """:class:`KeyOff` of ``key`` in each of ``layers`` (all of them by default)."""
    layers = range(config.n_layers) if layers is None else layers
    edit = KeyOff(key, renormalise)
    return {layer: edit for layer in _check_layers(config, layers)}


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
