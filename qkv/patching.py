"""Activation patching: copy part of one run into another and see how far the output follows.

Two texts that differ in one token, a *clean* one and a *corrupt* one, give the model two
answers. Run the corrupt text, but at one layer copy in what the clean run had there (the
residual stream at some positions, or one head's output), and let the later layers run on:
the further the answer moves back towards the clean one, the more of the difference that
part carried (Meng et al. 2022 call it causal tracing; Wang et al. 2022 patch heads).

- :func:`record`: one run kept whole: the stream entering every layer, the keys and values,
  each head's output (:func:`record_batch`: several texts of one length at once).
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
>>> want = [log_prob(model, clean, [3], [7])[0], log_prob(model, corrupt, [3], [7])[0]]
>>> bool(np.allclose(got[:, 0], want, atol=1e-6))
True
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from qkv.multihead import MultiHeadWeights
from qkv.smollm2 import NO_EDIT, Config, Edit, Layer, Model, check_ids, decoder_layer, output_logits

__all__ = ["Recorded", "log_prob", "patch_heads", "patch_stream", "record", "record_batch", "rerun"]


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
    return record_batch(model, ids[None])[0]


def record_batch(model: Model, ids) -> list[Recorded]:
    """:func:`record` for several texts of one length, (n_texts, T), run as one batch.

    Examples
    --------
    >>> model = _tiny(seed=0)
    >>> both = record_batch(model, [[1, 2, 3], [1, 5, 3]])
    >>> bool(np.allclose(both[1].streams, record(model, [1, 5, 3]).streams))
    True
    """
    ids = np.asarray(ids)
    if ids.ndim != 2:
        raise ValueError(f"ids must be (n_texts, T), texts of one length, got shape {ids.shape}")
    ids = np.stack([check_ids(text, model.config) for text in ids])
    x, positions = model.embedding[ids], np.arange(ids.shape[1])  # (n_texts, T, d_model)
    streams, keys, values, heads = [x], [], [], []
    for layer in model.layers:
        seen = _Recorder()
        x, trace = decoder_layer(x, layer, model.config, positions, edit=seen)
        streams.append(x)
        keys.append(trace.k)  # (n_texts, n_kv_heads, T, d_head)
        values.append(trace.v)
        heads.append(seen.heads)  # (n_texts, n_heads, T, d_head)
    streams, keys, values, heads = (np.stack(a, axis=1) for a in (streams, keys, values, heads))
    return [Recorded(*parts) for parts in zip(ids, streams, keys, values, heads, strict=True)]


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
            f"rows {rows.tolist()} must be positions {since}..{n_tokens - 1} (from the first "
            "position rerun: the earlier ones are the same in every variant)"
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
    >>> bool(np.isclose(got[0, 0], log_prob(model, run, [3], [7])[0], atol=1e-6))
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
    return _run_from(model, run, layer, x, since, rows, next_ids, edits)


def _run_from(model, run, start, x, since, rows, next_ids, edits, before=None) -> np.ndarray:
    """Layers ``start`` and later on positions ``since ..`` up to the last row scored (later
    ones cannot change it); ``before(i, x)``, if given, changes the stream entering layer
    ``i``."""
    end = int(rows.max()) + 1
    x, positions = x[:, : end - since], np.arange(since, end)
    for i in range(start, model.config.n_layers):
        if before is not None:
            x = before(i, x)
        cache = None
        if since:
            cache = _Cache(run.keys[i][:, :since], run.values[i][:, :since], len(x))
        x, _ = decoder_layer(x, model.layers[i], model.config, positions, cache, edits.get(i, NO_EDIT))
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
    model: Model, clean: Recorded, corrupt: Recorded, layer, where, rows, next_ids
) -> np.ndarray:
    """The corrupt run with the clean run's residual stream copied in, one variant per row
    of ``where``.

    ``where`` is a bool array (n_variants, T): variant ``b`` takes the stream entering
    ``layer`` from the clean run at the positions ``where[b]`` marks. ``layer`` is one
    layer for every variant, or one per variant (n_variants,), so that a scan over layers
    runs as one batch. Returns ``log P(next_ids[r] | rows[r])`` per variant,
    (n_variants, len(rows)): only the positions from the first token where the texts
    differ are rerun (``rows`` must be among them).

    Examples
    --------
    Copying the stream at the one position where two texts differ, entering layer 0 (the
    token's embedding), turns the corrupt run into the clean one:

    >>> model = _tiny(seed=0)
    >>> clean, corrupt = record(model, [1, 2, 3]), record(model, [1, 5, 3])
    >>> got = patch_stream(model, clean, corrupt, 0, [[0, 1, 0]], rows=[2], next_ids=[4])
    >>> bool(np.isclose(got[0, 0], log_prob(model, clean, [2], [4])[0], atol=1e-6))
    True
    """
    since = _first_difference(clean, corrupt)
    n_layers, n_tokens = model.config.n_layers, len(clean.ids)
    where = np.asarray(where, dtype=bool)
    if where.ndim != 2 or where.shape[1] != n_tokens:
        raise ValueError(f"where must be (n_variants, T) = (n_variants, {n_tokens}), got shape {where.shape}")
    layers = np.asarray(layer)
    if layers.ndim > 1 or (layers.ndim == 1 and len(layers) != len(where)):
        raise ValueError(f"layer must be one int or one per variant ({len(where)}), got shape {layers.shape}")
    layers = np.broadcast_to(layers, (len(where),))
    if not np.issubdtype(layers.dtype, np.integer) or layers.min() < 0 or layers.max() >= n_layers:
        raise ValueError(f"layer must be in 0..{n_layers - 1}, got {layers.tolist()}")
    rows, next_ids = _check_rows(rows, next_ids, since, n_tokens, model.config)
    mine = where[:, since:, None]  # (n_variants, T - since, 1): positions before are equal
    start = int(layers.min())

    def copy_in(i, x):  # the variants patched at layer i take the clean stream there
        t = x.shape[1]  # the positions rerun
        here = mine[:, :t] & (layers == i)[:, None, None]
        return np.where(here, clean.streams[i, since : since + t], x).astype(x.dtype) if here.any() else x

    x = np.broadcast_to(corrupt.streams[start, since:], (len(where), n_tokens - since, model.config.d_model))
    return _run_from(model, corrupt, start, x, since, rows, next_ids, {}, copy_in)


class _HeadsFrom(Edit):
    """Variant ``b`` replaces the outputs of the heads ``which[b]`` names by ``outputs``."""

    def __init__(self, which, outputs):  # (n_variants, n_heads), (n_heads, T, d_head)
        self.which, self.outputs = which, outputs

    def attention(self, weights, v, heads):  # heads: (n_variants, n_heads, t, d_head)
        outputs = self.outputs[:, : heads.shape[-2]]  # the positions rerun
        return weights, np.where(self.which[:, :, None, None], outputs, heads).astype(heads.dtype)


def patch_heads(model: Model, clean: Recorded, corrupt: Recorded, which, rows, next_ids) -> np.ndarray:
    """The corrupt run with some heads' outputs taken from the clean run.

    ``which`` is a bool array (n_variants, n_layers, n_heads): variant ``b`` copies, at
    every position, the output (before ``W_O``) of the heads ``which[b]`` marks, and the
    layers run on from the first marked one. Returns ``log P(next_ids[r] | rows[r])`` per
    variant, (n_variants, len(rows)), as :func:`patch_stream`.

    Examples
    --------
    Copying no head leaves the corrupt run as it was:

    >>> model = _tiny(seed=0)
    >>> clean, corrupt = record(model, [1, 2, 3]), record(model, [1, 5, 3])
    >>> which = np.zeros((2, 2, 2), dtype=bool)   # (variants, layers, heads)
    >>> which[1, 1, 0] = True                     # variant 1: layer 1, head 0
    >>> got = patch_heads(model, clean, corrupt, which, rows=[2], next_ids=[4])
    >>> bool(np.isclose(got[0, 0], log_prob(model, corrupt, [2], [4])[0], atol=1e-6))
    True
    """
    since = _first_difference(clean, corrupt)
    config, n_tokens = model.config, len(clean.ids)
    which = np.asarray(which, dtype=bool)
    if which.ndim != 3 or which.shape[1:] != (config.n_layers, config.n_heads):
        raise ValueError(
            f"which must be (n_variants, n_layers, n_heads) = (n_variants, {config.n_layers}, "
            f"{config.n_heads}), got shape {which.shape}"
        )
    rows, next_ids = _check_rows(rows, next_ids, since, n_tokens, config)
    touched = np.flatnonzero(which.any(axis=(0, 2)))
    if touched.size == 0:  # nothing copied: every variant is the corrupt run
        x = corrupt.streams[-1, rows][None]
        return np.broadcast_to(_log_softmax_at(model, x, next_ids), (len(which), len(rows))).copy()
    edits = {int(i): _HeadsFrom(which[:, i], clean.heads[i][:, since:]) for i in touched}
    start = int(touched[0])
    x = np.broadcast_to(corrupt.streams[start, since:], (len(which), n_tokens - since, config.d_model))
    return _run_from(model, corrupt, start, x, since, rows, next_ids, edits)


def log_prob(model: Model, run: Recorded, rows, next_ids) -> np.ndarray:
    """``log P(next_ids[r] | the text up to rows[r])`` in a recorded run, (len(rows),):
    the output matrix, the largest in the model, is read once for all the rows.

    Examples
    --------
    >>> model = _tiny(seed=0)
    >>> run = record(model, [1, 2])
    >>> total = np.exp(log_prob(model, run, [1] * 10, range(10))).sum()
    >>> round(float(total), 6)                       # a distribution over 10 tokens
    1.0
    """
    rows, next_ids = _check_rows(rows, next_ids, 0, len(run.ids), model.config)
    return _log_softmax_at(model, run.streams[-1, rows], next_ids)


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
