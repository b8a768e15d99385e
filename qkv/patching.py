"""Activation patching: copy part of one run into another and see how far the output follows.

Two texts that differ in one token, a *clean* one and a *corrupt* one, give the model two
answers. Run the corrupt text, but at one layer copy in what the clean run had there (the
residual stream at some positions, or one head's output), and let the later layers run on:
the further the answer moves back towards the clean one, the more of the difference that
part carried (Meng et al. 2022 call it causal tracing; Wang et al. 2022 patch heads).

- :func:`record`: one run kept whole: the stream entering every layer, the keys and values,
  each head's output.
- :func:`patch_stream`: a batch of variants, each copying the clean stream at some positions
  of one layer into the corrupt run.
- :func:`patch_heads`: a batch of variants, each copying some heads' outputs of one layer.
- :func:`rerun`: what both use: a recorded run rerun from one layer on, at its later
  positions only, with a changed stream or with :mod:`qkv.interventions` edits (heads
  switched off, for a group ablation).

Positions before the first token where the two texts differ are the same in both runs (a
causal model's early positions never see later ones): they are not rerun, their keys and
values are read from the record, and patching them changes nothing. Only the
log-probabilities asked for are computed (the output matrix is the largest in the model).

Examples
--------
A tiny random model of two layers (``_tiny``, for examples and tests). Copying the whole
clean stream at layer 0 gives the clean run's answer; copying nothing gives the corrupt
run's:

>>> model = _tiny(seed=0)
>>> clean, corrupt = record(model, [1, 2, 3, 4]), record(model, [1, 5, 3, 4])
>>> where = [[False, True, True, True], [False, False, False, False]]
>>> got = patch_stream(model, clean, corrupt, 0, where, rows=[3], next_ids=[7])
>>> want = [log_prob(model, clean, 3, 7), log_prob(model, corrupt, 3, 7)]
>>> bool(np.allclose(got[:, 0], want, atol=1e-6))
True
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from qkv.multihead import MultiHeadWeights
from qkv.smollm2 import NO_EDIT, Config, Edit, Layer, Model, check_ids, decoder_layer, output_logits

__all__ = ["Recorded", "log_prob", "patch_heads", "patch_stream", "record", "rerun"]


class Recorded(NamedTuple):
    """One run of the model, kept for patching: what :func:`record` returns."""

    ids: np.ndarray  # (T,) token ids
    streams: np.ndarray  # (n_layers + 1, T, d_model): entering each layer, then leaving the last
    keys: np.ndarray  # (n_layers, n_kv_heads, T, d_head), after RoPE
    values: np.ndarray  # (n_layers, n_kv_heads, T, d_head)
    heads: np.ndarray  # (n_layers, n_heads, T, d_head): what each head passes to W_O


class _Recorder(Edit):
    """Keeps the heads' outputs of the layer it is given to, and changes nothing."""

    def attention(self, weights, v, heads):
        self.heads = heads
        return weights, heads


def record(model: Model, ids) -> Recorded:
    """Run token ids (T,) through the model and keep every layer's input stream, keys,
    values and head outputs.

    Examples
    --------
    >>> run = record(_tiny(seed=0), [1, 2, 3])
    >>> run.streams.shape, run.heads.shape        # 2 layers; 2 heads of width 4
    ((3, 3, 8), (2, 2, 3, 4))
    """
    ids = check_ids(ids, model.config)
    x, positions = model.embedding[ids], np.arange(len(ids))
    streams, keys, values, heads = [x], [], [], []
    for layer in model.layers:
        seen = _Recorder()
        x, trace = decoder_layer(x, layer, model.config, positions, edit=seen)
        streams.append(x)
        keys.append(trace.k)
        values.append(trace.v)
        heads.append(seen.heads)
    return Recorded(ids, np.stack(streams), np.stack(keys), np.stack(values), np.stack(heads))


class _Cache:
    """One layer's keys and values for a batch of variants: the recorded ones of the
    positions not rerun, then the rerun positions' own, appended by the layer."""

    def __init__(self, keys, values, n_variants: int):  # keys: (n_kv_heads, P, d_head)
        self.keys = np.broadcast_to(keys, (n_variants, *keys.shape))
        self.values = np.broadcast_to(values, (n_variants, *values.shape))

    def append(self, k, v):  # (n_variants, n_kv_heads, t, d_head)
        self.keys = np.concatenate([self.keys, k], axis=-2)
        self.values = np.concatenate([self.values, v], axis=-2)


def _log_softmax_at(model: Model, x, next_ids) -> np.ndarray:
    """log P(next_ids[r]) from streams x (..., n_rows, d_model): (..., n_rows), float64."""
    logits = output_logits(model, x).astype(np.float64)  # (..., n_rows, vocab_size)
    top = logits.max(axis=-1, keepdims=True)
    total = top[..., 0] + np.log(np.exp(logits - top).sum(axis=-1))
    picked = np.take_along_axis(logits, np.broadcast_to(next_ids, logits.shape[:-1])[..., None], axis=-1)
    return picked[..., 0] - total


def _check_rows(rows, next_ids, since: int, n_tokens: int, config: Config):
    rows, next_ids = np.asarray(rows).reshape(-1), np.asarray(next_ids).reshape(-1)
    if rows.size == 0 or rows.shape != next_ids.shape or not np.issubdtype(rows.dtype, np.integer):
        raise ValueError(
            f"give one next token per row, as ints: rows {rows.shape}, next_ids {next_ids.shape}"
        )
    if rows.min() < since or rows.max() >= n_tokens:
        raise ValueError(
            f"rows {rows.tolist()} must be positions rerun, {since}..{n_tokens - 1}: the earlier "
            "ones are the same in every variant"
        )
    if (
        not np.issubdtype(next_ids.dtype, np.integer)
        or next_ids.min() < 0
        or next_ids.max() >= config.vocab_size
    ):
        raise ValueError(f"next_ids {next_ids.tolist()} must be token ids in 0..{config.vocab_size - 1}")
    return rows, next_ids


def rerun(
    model: Model,
    run: Recorded,
    layer: int,
    x,
    since: int,
    rows,
    next_ids,
    edits: dict[int, Edit] | None = None,
) -> np.ndarray:
    """Rerun a recorded run from ``layer`` on, at positions ``since`` and later, for a batch.

    Parameters
    ----------
    run : Recorded
        The run whose earlier positions (``0 .. since - 1``) keep their keys and values.
    layer : int
        The first layer rerun (from 0).
    x : ndarray, shape (n_variants, T - since, d_model)
        The stream entering ``layer`` at positions ``since ..`` for each variant (the
        recorded one, ``run.streams[layer, since:]``, changed or not).
    rows, next_ids : sequences of ints, one next token per row
        Positions (``since`` or later) and the token scored after each.
    edits : dict, optional
        ``{layer: Edit}`` for layers ``layer`` and later (:mod:`qkv.interventions`), acting
        at the rerun positions only.

    Returns
    -------
    ndarray, shape (n_variants, len(rows))
        ``log P(next_ids[r] | text up to rows[r])`` in nats, per variant.

    Examples
    --------
    Rerunning from layer 1 with the recorded stream gives the recorded answer:

    >>> model = _tiny(seed=0)
    >>> run = record(model, [1, 2, 3, 4])
    >>> got = rerun(model, run, 1, run.streams[1, 2:][None], since=2, rows=[3], next_ids=[7])
    >>> bool(np.isclose(got[0, 0], log_prob(model, run, 3, 7), atol=1e-6))
    True
    """
    config, n_tokens = model.config, len(run.ids)
    if not 0 <= layer < config.n_layers:
        raise ValueError(f"layer must be in 0..{config.n_layers - 1}, got {layer}")
    if not 0 <= since < n_tokens:
        raise ValueError(f"since must be a position in 0..{n_tokens - 1}, got {since}")
    x = np.asarray(x)
    if x.ndim != 3 or x.shape[1:] != (n_tokens - since, config.d_model):
        raise ValueError(
            f"x must be (n_variants, T - since, d_model) = (n_variants, {n_tokens - since}, "
            f"{config.d_model}), got shape {x.shape}"
        )
    rows, next_ids = _check_rows(rows, next_ids, since, n_tokens, config)
    edits = {} if edits is None else edits
    if any(not layer <= i < config.n_layers for i in edits):
        raise ValueError(
            f"edits name layers {sorted(edits)}; layers {layer}..{config.n_layers - 1} are rerun"
        )
    positions = np.arange(since, n_tokens)
    for i in range(layer, config.n_layers):
        cache = None
        if since:
            cache = _Cache(run.keys[i][:, :since], run.values[i][:, :since], len(x))
        x, _ = decoder_layer(x, model.layers[i], config, positions, cache, edits.get(i, NO_EDIT))
    return _log_softmax_at(model, x[:, rows - since], next_ids)


def _first_difference(clean: Recorded, corrupt: Recorded) -> int:
    if clean.ids.shape != corrupt.ids.shape:
        raise ValueError(
            f"clean and corrupt must have as many tokens, to patch position by position: "
            f"got {len(clean.ids)} and {len(corrupt.ids)}"
        )
    differ = np.flatnonzero(clean.ids != corrupt.ids)
    if differ.size == 0:
        raise ValueError("clean and corrupt are the same tokens: there is nothing to patch")
    return int(differ[0])


def patch_stream(
    model: Model, clean: Recorded, corrupt: Recorded, layer: int, where, rows, next_ids
) -> np.ndarray:
    """The corrupt run with the clean run's residual stream copied in, one variant per row
    of ``where``.

    ``where`` is a bool array (n_variants, T): variant ``b`` takes the stream entering
    ``layer`` from the clean run at the positions ``where[b]`` marks. Returns
    ``log P(next_ids[r] | rows[r])`` per variant, (n_variants, len(rows)): only the
    positions from the first token where the texts differ are rerun (``rows`` must be
    among them).

    Examples
    --------
    Copying the stream at the one position where two texts differ, entering layer 0 (the
    token's embedding), turns the corrupt run into the clean one:

    >>> model = _tiny(seed=0)
    >>> clean, corrupt = record(model, [1, 2, 3]), record(model, [1, 5, 3])
    >>> got = patch_stream(model, clean, corrupt, 0, [[0, 1, 0]], rows=[2], next_ids=[4])
    >>> bool(np.isclose(got[0, 0], log_prob(model, clean, 2, 4), atol=1e-6))
    True
    """
    since = _first_difference(clean, corrupt)
    if not 0 <= layer < model.config.n_layers:
        raise ValueError(f"layer must be in 0..{model.config.n_layers - 1}, got {layer}")
    where = np.asarray(where, dtype=bool)
    if where.ndim != 2 or where.shape[1] != len(clean.ids):
        raise ValueError(
            f"where must be (n_variants, T) = (n_variants, {len(clean.ids)}), got shape {where.shape}"
        )
    mine = where[:, since:, None]  # (n_variants, T - since, 1): positions before are equal
    x = np.where(mine, clean.streams[layer, since:], corrupt.streams[layer, since:])
    return rerun(model, corrupt, layer, x.astype(corrupt.streams.dtype), since, rows, next_ids)


class _HeadsFrom(Edit):
    """Variant ``b`` replaces the outputs of the heads ``which[b]`` names by ``outputs``."""

    def __init__(self, which, outputs):  # (n_variants, n_heads), (n_heads, T, d_head)
        self.which, self.outputs = which, outputs

    def attention(self, weights, v, heads):  # heads: (n_variants, n_heads, T, d_head)
        return weights, np.where(self.which[:, :, None, None], self.outputs, heads).astype(heads.dtype)


def patch_heads(
    model: Model, clean: Recorded, corrupt: Recorded, layer: int, which, rows, next_ids
) -> np.ndarray:
    """The corrupt run with some heads' outputs of ``layer`` taken from the clean run.

    ``which`` is a bool array (n_variants, n_heads): variant ``b`` copies, at every position,
    the output of the heads ``which[b]`` marks (before ``W_O``); the rest of the layer and
    the later layers run on. Returns ``log P(next_ids[r] | rows[r])`` per variant,
    (n_variants, len(rows)), as :func:`patch_stream`.

    Examples
    --------
    Copying every head of layer 1 is copying what attention added there; copying none
    leaves the corrupt run as it was:

    >>> model = _tiny(seed=0)
    >>> clean, corrupt = record(model, [1, 2, 3]), record(model, [1, 5, 3])
    >>> got = patch_heads(model, clean, corrupt, 1, [[False, False]], rows=[2], next_ids=[4])
    >>> bool(np.isclose(got[0, 0], log_prob(model, corrupt, 2, 4), atol=1e-6))
    True
    """
    since = _first_difference(clean, corrupt)
    config = model.config
    if not 0 <= layer < config.n_layers:
        raise ValueError(f"layer must be in 0..{config.n_layers - 1}, got {layer}")
    which = np.asarray(which, dtype=bool)
    if which.ndim != 2 or which.shape[1] != config.n_heads:
        raise ValueError(
            f"which must be (n_variants, n_heads) = (n_variants, {config.n_heads}), got shape {which.shape}"
        )
    edit = _HeadsFrom(which, clean.heads[layer][:, since:])
    x = np.broadcast_to(corrupt.streams[layer, since:], (len(which), len(clean.ids) - since, config.d_model))
    return rerun(model, corrupt, layer, x, since, rows, next_ids, {layer: edit})


def log_prob(model: Model, run: Recorded, row: int, next_id: int) -> float:
    """``log P(next_id | the text up to row)`` in a recorded run, from its last stream.

    Examples
    --------
    >>> model = _tiny(seed=0)
    >>> run = record(model, [1, 2])
    >>> total = sum(np.exp(log_prob(model, run, 1, t)) for t in range(10))
    >>> round(float(total), 6)                       # a distribution over 10 tokens
    1.0
    """
    if not 0 <= row < len(run.ids):
        raise ValueError(f"row must be a position in 0..{len(run.ids) - 1}, got {row}")
    if not 0 <= next_id < model.config.vocab_size:
        raise ValueError(f"next_id must be a token id in 0..{model.config.vocab_size - 1}, got {next_id}")
    return float(_log_softmax_at(model, run.streams[-1, [row]], np.array([next_id]))[0])


def _tiny(seed: int = 0, n_layers: int = 2) -> Model:
    """A SmolLM2-shaped model small enough for examples and tests: width 8, two query heads
    of width 4 sharing one key/value head, an MLP of width 16, 10 tokens; random weights."""
    rng = np.random.default_rng(seed)
    config = Config(n_layers, 8, 2, 1, 4, 16, vocab_size=10, rope_base=1e4, norm_eps=1e-5, context_length=32)

    def w(*shape):
        return rng.normal(size=shape) / np.sqrt(shape[0])

    layers = tuple(
        Layer(
            attn_norm=1 + rng.random(8),
            attention=MultiHeadWeights(w(8, 8), w(8, 4), w(8, 4), w(8, 8), n_heads=2, n_kv_heads=1),
            mlp_norm=1 + rng.random(8),
            w_gate=w(8, 16),
            w_up=w(8, 16),
            w_down=w(16, 8),
        )
        for _ in range(n_layers)
    )
    return Model(config, rng.normal(size=(10, 8)), layers, 1 + rng.random(8), tokenizer=None)
