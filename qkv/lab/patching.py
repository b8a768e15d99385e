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
- :func:`rerun`: a recorded run rerun from one layer on, at its later positions only, with
  a changed stream or with :mod:`qkv.lab.interventions` edits (heads switched off, for a group
  ablation).

What a variant is measured by is the ``metric`` each of them takes: a function
``metric(model, x, next_ids)`` of the stream ``x`` leaving the last layer at the positions
scored, (n_variants, len(rows), d_model), that returns an array with one entry (or one
array) per variant. The default, :func:`next_token_log_prob`, is ``log P(next_ids[r])`` at
each row ``r``, in nats; :func:`qkv.smollm2.output_logits` turns ``x`` into logits for any
other (a logit difference, say).

Positions before the first token where the two texts differ are the same in both runs (a
causal model's early positions never see later ones): they are not rerun, their keys and
values are read from the record, and patching them changes nothing. Layers before the
first one a variant changes are the corrupt run as recorded: a batch of variants patched
at different layers runs each from its own layer on. Only the log-probabilities asked for
are computed (the output matrix is the largest in the model).

Examples
--------
The examples run on ``tiny_model``, a SmolLM2-shaped model of two layers and width 8 with
random weights, which the tests define (``tests/tiny_model.py``) and give to these examples.
Copying the whole clean stream at layer 0 gives the clean run's answer; copying nothing
gives the corrupt run's:

>>> model = tiny_model(seed=0)
>>> clean, corrupt = record(model, [1, 2, 3, 4]), record(model, [1, 5, 3, 4])
>>> where = [[False, True, True, True], [False, False, False, False]]
>>> got = patch_stream(model, clean, corrupt, 0, where, rows=[3], next_ids=[7])
>>> want = [log_prob(model, clean, [3], [7])[0], log_prob(model, corrupt, [3], [7])[0]]
>>> bool(np.allclose(got[:, 0], want, atol=1e-6))
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from qkv.lab.prefixes import PrefixCache, shared_prefixes
from qkv.smollm2 import NO_EDIT, Config, Edit, Model, check_ids, decoder_layer, output_logits

__all__ = [
    "Metric",
    "Recorded",
    "log_prob",
    "next_token_log_prob",
    "patch_heads",
    "patch_stream",
    "record",
    "record_batch",
    "rerun",
]

Metric = Callable[[Model, np.ndarray, np.ndarray], np.ndarray]
"""What a variant is measured by: ``metric(model, x, next_ids)``, ``x`` the stream leaving
the last layer at the rows scored, (n_variants, len(rows), d_model); one entry per variant."""


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
    >>> run = record(tiny_model(seed=0), [1, 2, 3])
    >>> run.streams.shape, run.heads.shape        # 2 layers; 2 heads of width 4
    ((3, 3, 8), (2, 2, 3, 4))
    """
    ids = check_ids(ids, model.config)
    return record_batch(model, ids[None])[0]


def record_batch(model: Model, ids) -> list[Recorded]:
    """:func:`record` for several texts of one length, (n_texts, T), run as one batch.

    Texts that begin alike (one sentence with two nouns, say) share their beginning: it
    runs once, and the rest of each text attends to its keys and values.

    Examples
    --------
    >>> model = tiny_model(seed=0)
    >>> both = record_batch(model, [[1, 2, 3], [1, 5, 3]])
    >>> bool(np.allclose(both[1].streams, record(model, [1, 5, 3]).streams))
    True
    """
    ids = np.asarray(ids)
    if ids.ndim != 2:
        raise ValueError(f"ids must be (n_texts, T), texts of one length, got shape {ids.shape}")
    ids = np.stack([check_ids(text, model.config) for text in ids])
    found: list[Recorded | None] = [None] * len(ids)
    by_length: dict[int, list[list[int]]] = {}
    # a beginning is never a whole text: its last row is kept
    for shared, members in shared_prefixes(list(ids), [ids.shape[1] - 1] * len(ids)):
        by_length.setdefault(shared, []).append(members)
    for shared, families in by_length.items():
        members = [i for family in families for i in family]
        family_of = np.repeat(np.arange(len(families)), [len(family) for family in families])
        caches, before = None, None
        if shared:  # each family's beginning, once: (families, P)
            before = _record_rows(model, ids[[family[0] for family in families], :shared], 0)
            caches = [
                PrefixCache(k[family_of], v[family_of]) for k, v in zip(before[1], before[2], strict=True)
            ]
        after = _record_rows(model, ids[members, shared:], shared, caches)
        streams, keys, values, heads = after
        if before is not None:  # the beginning's rows, each text its family's
            streams = np.concatenate([before[0][:, family_of], streams], axis=2)
            heads = np.concatenate([before[3][:, family_of], heads], axis=3)
        for b, i in enumerate(members):  # keys and values: the caches hold every position
            found[i] = Recorded(ids[i], streams[:, b], keys[:, b], values[:, b], heads[:, b])
    return found


def _record_rows(model: Model, ids, start: int, caches=None):
    """Run token ids (texts, t) at positions ``start ..`` through every layer (attending to
    ``caches``' earlier keys and values, one per layer, if given); keep the streams
    (n_layers + 1, texts, t, d_model), the keys and values (n_layers, texts, n_kv_heads,
    start + t, d_head) and the heads' outputs (n_layers, texts, n_heads, t, d_head)."""
    x, positions = model.embedding[ids], np.arange(start, start + ids.shape[1])
    streams, keys, values, heads = [x], [], [], []
    for i, layer in enumerate(model.layers):
        seen = _Recorder()
        cache = None if caches is None else caches[i]
        x, trace = decoder_layer(x, layer, model.config, positions, cache, edit=seen)
        streams.append(x)
        keys.append(trace.k)  # (texts, n_kv_heads, start + t, d_head)
        values.append(trace.v)
        heads.append(seen.heads)  # (texts, n_heads, t, d_head)
    return tuple(np.stack(a) for a in (streams, keys, values, heads))


def next_token_log_prob(model: Model, x, next_ids) -> np.ndarray:
    """``log P(next_ids[r])`` in nats from the streams leaving the last layer at the rows
    scored: the default metric of :func:`patch_stream`, :func:`patch_heads` and :func:`rerun`.

    Parameters
    ----------
    x : ndarray, shape (..., n_rows, d_model)
        The stream leaving the last layer at each row scored (before the final norm).
    next_ids : sequence of n_rows ints
        The token scored after each row.

    Returns
    -------
    ndarray, shape (..., n_rows), float64
        The logits stay float32 (what the model computes); each row's sum of exponentials is
        added up in float64.

    Examples
    --------
    >>> model = tiny_model(seed=0)
    >>> x = record(model, [1, 2]).streams[-1]              # (T, d_model), leaving layer 2
    >>> float(np.exp(next_token_log_prob(model, x[[1] * 10], range(10))).sum().round(6))
    1.0
    """
    next_ids, x = np.asarray(next_ids), np.asarray(x)
    if x.ndim < 2 or x.shape[-1] != model.config.d_model or next_ids.shape != x.shape[-2:-1]:
        raise ValueError(
            f"x must be (..., n_rows, d_model = {model.config.d_model}) with one next id per "
            f"row: got x {x.shape}, next_ids {next_ids.shape}"
        )
    if (
        not np.issubdtype(next_ids.dtype, np.integer)
        or next_ids.min() < 0
        or next_ids.max() >= model.config.vocab_size
    ):
        raise ValueError(
            f"next_ids {next_ids.tolist()} must be token ids in 0..{model.config.vocab_size - 1}"
        )
    logits = output_logits(model, x)  # (..., n_rows, vocab_size), float32
    top = logits.max(axis=-1, keepdims=True)
    picked = np.take_along_axis(logits, np.broadcast_to(next_ids, logits.shape[:-1])[..., None], axis=-1)
    logits -= top  # in place: the largest becomes 0, so exp cannot overflow
    np.exp(logits, out=logits)
    total = top[..., 0].astype(np.float64) + np.log(logits.sum(axis=-1, dtype=np.float64))
    return picked[..., 0].astype(np.float64) - total


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
    *,
    metric: Metric = next_token_log_prob,
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
        ``{layer: Edit}`` for layers ``layer`` and later (:mod:`qkv.lab.interventions`), acting
        at the rerun positions only.
    metric : callable, optional
        ``metric(model, x, next_ids)`` of the streams leaving the last layer at ``rows``,
        (n_variants, len(rows), d_model); :func:`next_token_log_prob` by default.

    Returns
    -------
    ndarray, shape (n_variants, ...)
        What ``metric`` gives for each variant: by default ``log P(next_ids[r] | text up to
        rows[r])`` in nats, (n_variants, len(rows)).

    Examples
    --------
    Rerunning from layer 1 with the recorded stream gives the recorded answer:

    >>> model = tiny_model(seed=0)
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
    return _run_from(model, run, layer, x, since, rows, next_ids, edits, metric)


def _run_from(model, run, start, x, since, rows, next_ids, edits, metric) -> np.ndarray:
    """Layers ``start`` and later on positions ``since ..`` up to the last row scored (later
    ones cannot change it), every variant from layer ``start``."""
    starts = np.full(len(x), start)

    def edit_at(i, b):  # every variant is in the batch, in order
        return edits.get(i)

    return _run_staggered(model, run, starts, lambda i, b: x[b], since, rows, next_ids, edit_at, metric)


def _measure(metric: Metric, model: Model, x: np.ndarray, next_ids: np.ndarray) -> np.ndarray:
    """``metric`` of the streams x (n_variants, n_rows, d_model), checked to give one entry
    per variant."""
    if not callable(metric):
        raise ValueError(f"metric must be a function metric(model, x, next_ids), got {metric!r}")
    got = np.asarray(metric(model, x, next_ids))
    if got.ndim == 0 or got.shape[0] != len(x):
        raise ValueError(
            f"metric must give one entry per variant, an array ({len(x)}, ...); "
            f"{getattr(metric, '__name__', metric)!r} gave shape {got.shape}"
        )
    return got


def _run_staggered(model, run, starts, enter, since, rows, next_ids, edit_at, metric) -> np.ndarray:
    """Variant ``b`` joins the batch at layer ``starts[b]`` with the stream ``enter(i, b)``
    (b: the indices joining at layer i) and runs on from there; before it, it is the recorded
    run, which needs no computing. ``edit_at(i, b)`` is the Edit of layer i for the variants
    ``b`` in the batch (None: none). Variants that start at ``n_layers`` are the recorded
    run itself. Returns ``metric`` per variant, (n_variants, ...), as :func:`rerun`."""
    n_layers, d_model = model.config.n_layers, model.config.d_model
    end = int(rows.max()) + 1
    positions = np.arange(since, end)
    order = np.argsort(starts, kind="stable")  # the batch is always a prefix of this order
    x = np.zeros((0, end - since, d_model), dtype=run.streams.dtype)
    for i in range(int(starts.min()), n_layers):
        joining = order[starts[order] == i]
        if joining.size:
            x = np.concatenate([x, enter(i, joining)[:, : end - since]])
        cache = None
        if since:
            keys, values = run.keys[i][:, :since], run.values[i][:, :since]  # the recorded run's
            shape = (len(x), *keys.shape)  # the same for every variant
            cache = PrefixCache(np.broadcast_to(keys, shape), np.broadcast_to(values, shape))
        edit = edit_at(i, order[: len(x)])
        x, _ = decoder_layer(x, model.layers[i], model.config, positions, cache, edit or NO_EDIT)
    parts = []  # (the variants, what the metric gave them)
    if len(x):
        parts.append((order[: len(x)], _measure(metric, model, x[:, rows - since], next_ids)))
    if len(x) < len(starts):  # variants that changed nothing: the recorded run's answer
        same = _measure(metric, model, run.streams[-1, rows][None], next_ids)[0]
        parts.append((order[len(x) :], same))
    shape = parts[0][1].shape[1:] if len(x) else parts[0][1].shape
    out = np.empty((len(starts), *shape), dtype=np.result_type(*(got for _, got in parts)))
    for variants, got in parts:
        out[variants] = got
    return out


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
    model: Model,
    clean: Recorded,
    corrupt: Recorded,
    layer,
    where,
    rows,
    next_ids,
    *,
    metric: Metric = next_token_log_prob,
) -> np.ndarray:
    """The corrupt run with the clean run's residual stream copied in, one variant per row
    of ``where``.

    ``where`` is a bool array (n_variants, T): variant ``b`` takes the stream entering
    ``layer`` from the clean run at the positions ``where[b]`` marks. ``layer`` is one
    layer for every variant, or one per variant (n_variants,), so that a scan over layers
    runs as one batch. Returns ``metric`` per variant (:func:`rerun`), by default
    ``log P(next_ids[r] | rows[r])``, (n_variants, len(rows)): only the positions from the
    first token where the texts differ are rerun (``rows`` must be among them).

    Examples
    --------
    Copying the stream at the one position where two texts differ, entering layer 0 (the
    token's embedding), turns the corrupt run into the clean one:

    >>> model = tiny_model(seed=0)
    >>> clean, corrupt = record(model, [1, 2, 3]), record(model, [1, 5, 3])
    >>> got = patch_stream(model, clean, corrupt, 0, [[0, 1, 0]], rows=[2], next_ids=[4])
    >>> bool(np.isclose(got[0, 0], log_prob(model, clean, [2], [4])[0], atol=1e-6))
    True

    Another metric: the logit of token 4 minus that of token 5 after position 2, one number
    per variant:

    >>> def logit_difference(model, x, next_ids):     # x: (n_variants, 2, d_model)
    ...     logits = output_logits(model, x)
    ...     return logits[:, 0, next_ids[0]] - logits[:, 1, next_ids[1]]
    >>> got = patch_stream(model, clean, corrupt, 0, [[0, 1, 0], [0, 0, 0]], rows=[2, 2],
    ...                    next_ids=[4, 5], metric=logit_difference)
    >>> got.shape
    (2,)
    >>> want = output_logits(model, clean.streams[-1, 2])
    >>> bool(np.isclose(got[0], want[4] - want[5], atol=1e-5))
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

    def enter(i, b):  # variants b start at layer i, with the clean stream where they copy it
        return np.where(mine[b], clean.streams[i, since:], corrupt.streams[i, since:])

    return _run_staggered(model, corrupt, layers, enter, since, rows, next_ids, lambda i, b: None, metric)


class _HeadsFrom(Edit):
    """Variant ``b`` replaces the outputs of the heads ``which[b]`` names by ``outputs``."""

    def __init__(self, which, outputs):  # (n_variants, n_heads), (n_heads, T, d_head)
        self.which, self.outputs = which, outputs

    def attention(self, weights, v, heads):  # heads: (n_variants, n_heads, t, d_head)
        outputs = self.outputs[:, : heads.shape[-2]]  # the positions rerun
        return weights, np.where(self.which[:, :, None, None], outputs, heads).astype(heads.dtype)


def patch_heads(
    model: Model,
    clean: Recorded,
    corrupt: Recorded,
    which,
    rows,
    next_ids,
    *,
    metric: Metric = next_token_log_prob,
) -> np.ndarray:
    """The corrupt run with some heads' outputs taken from the clean run.

    ``which`` is a bool array (n_variants, n_layers, n_heads): variant ``b`` copies, at
    every position, the output (before ``W_O``) of the heads ``which[b]`` marks, and the
    layers run on from the first marked one. Returns ``metric`` per variant, by default
    ``log P(next_ids[r] | rows[r])``, (n_variants, len(rows)), as :func:`patch_stream`.

    Examples
    --------
    Copying no head leaves the corrupt run as it was:

    >>> model = tiny_model(seed=0)
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
    marked = which.any(axis=2)  # (n_variants, n_layers)
    # each variant runs from the first layer it changes; one that copies nothing is the corrupt run
    starts = np.where(marked.any(axis=1), marked.argmax(axis=1), config.n_layers)
    outputs = clean.heads[:, :, since:]  # (n_layers, n_heads, T - since, d_head)

    def enter(i, b):
        return np.broadcast_to(corrupt.streams[i, since:], (len(b), n_tokens - since, config.d_model))

    def edit_at(i, b):
        return _HeadsFrom(which[b, i], outputs[i]) if which[b, i].any() else None

    return _run_staggered(model, corrupt, starts, enter, since, rows, next_ids, edit_at, metric)


def log_prob(model: Model, run: Recorded, rows, next_ids) -> np.ndarray:
    """``log P(next_ids[r] | the text up to rows[r])`` in a recorded run, (len(rows),):
    the output matrix, the largest in the model, is read once for all the rows.

    Examples
    --------
    >>> model = tiny_model(seed=0)
    >>> run = record(model, [1, 2])
    >>> total = np.exp(log_prob(model, run, [1] * 10, range(10))).sum()
    >>> round(float(total), 6)                       # a distribution over 10 tokens
    1.0
    """
    rows, next_ids = _check_rows(rows, next_ids, 0, len(run.ids), model.config)
    return next_token_log_prob(model, run.streams[-1, rows], next_ids)
