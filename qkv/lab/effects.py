"""What carries a minimal pair's answer: preferences, and how far a patch moves them.

A minimal pair is two texts that differ in a word or two, and two continuations. Each text
has a *preference* (:func:`preference`):

    log P(continuation 1 | text) − log P(continuation 2 | text)

in nats, each continuation's log-probability summed over its tokens (the text and the
continuation are tokenized apart and joined, as the explorer's pair mode does). Positive:
the model prefers continuation 1.

Patching runs text 1 with part of text 2's run copied in, and the *effect* of a patch
(:func:`patching_effect`) says how far that moves text 1's preference towards text 2's:

    (preference with the patch − text 1's) ÷ (text 2's − text 1's)

0: nothing moved; 1: text 2's preference restored; beyond 0 and 1 a patch overshoots.
:class:`MinimalPair` runs the patches: the stream entering a layer at some of the text's
positions, or some heads' outputs (before ``W_O``) at every position of the text, taken
from text 2's run into text 1's. The continuation's own positions are never patched: they
are computed anew from the patched text. Patching needs the texts to have as many tokens.

Examples
--------
The effect is arithmetic on three preferences:

>>> patching_effect([-1.0, 0.5, 2.0], preference_1=-1.0, preference_2=2.0).tolist()
[0.0, 0.5, 1.0]

With the model installed (not run here, since the model is optional)::

    from qkv import smollm2
    from qkv.lab import effects
    model = smollm2.load()
    pair = effects.MinimalPair.of(model, "The capital of France is", "The capital of Italy is",
                                  " Paris", " Rome")
    pair.preference_1, pair.preference_2   # text 1 prefers ' Paris', text 2 ' Rome'
    pair.stream_effects().shape            # (30, 5): layer entered (from 0) x position
    pair.head_effects().shape              # (30, 9): layer x head, from 0
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from qkv.lab.patching import Recorded, log_prob, patch_stream, record, rerun
from qkv.smollm2 import Edit, Model, check_ids

__all__ = ["MinimalPair", "patching_effect", "preference"]


def _tokens(model: Model, name: str, text) -> np.ndarray:
    """Token ids (T,) of ``text``: a string (tokenized on its own) or a sequence of ids."""
    if isinstance(text, str):
        if not text:
            raise ValueError(f"{name} is empty: give at least one character")
        return model.encode(text)
    try:
        return check_ids(text, model.config)
    except ValueError as error:
        raise ValueError(f"{name}: {error}") from None


def _joined(text: np.ndarray, continuation: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The text's ids then the continuation's, the rows that predict each continuation
    token, and those tokens."""
    rows = np.arange(len(text) - 1, len(text) + len(continuation) - 1)
    return np.concatenate([text, continuation]), rows, continuation


def preference(model: Model, text, continuation_1, continuation_2) -> float:
    """``log P(continuation_1 | text) − log P(continuation_2 | text)`` in nats.

    Parameters
    ----------
    text, continuation_1, continuation_2 : str or sequence of ints
        Strings are tokenized each on its own (:meth:`qkv.smollm2.Model.encode`) and the
        continuation's tokens follow the text's; or give token ids.

    Returns
    -------
    float
        Each continuation's log-probability is the sum over its tokens of
        ``log P(token | text and the continuation's earlier tokens)``. Positive: the model
        prefers continuation 1.

    Examples
    --------
    With the model installed (not run here)::

        preference(model, "The capital of France is", " Paris", " Rome")  # > 0
    """
    text = _tokens(model, "text", text)
    total = []
    for name, continuation in (("continuation_1", continuation_1), ("continuation_2", continuation_2)):
        ids, rows, wanted = _joined(text, _tokens(model, name, continuation))
        total.append(log_prob(model, record(model, ids), rows, wanted).sum())
    return float(total[0] - total[1])


def patching_effect(patched, preference_1, preference_2):
    """How far a patch moves text 1's preference towards text 2's: 0 none, 1 all the way.

    Parameters
    ----------
    patched : float or array_like
        Text 1's preference with the patch, one per variant (any shape).
    preference_1, preference_2 : float
        Text 1's and text 2's preferences without a patch; they must differ.

    Returns
    -------
    ndarray, the shape of ``patched``
        ``(patched − preference_1) / (preference_2 − preference_1)``.

    Examples
    --------
    >>> patching_effect(0.5, preference_1=1.5, preference_2=-0.5).tolist()
    0.5
    >>> patching_effect(0.5, preference_1=1.0, preference_2=1.0)
    Traceback (most recent call last):
    ...
    ValueError: text 2's preference equals text 1's (1.0): a patch has nothing to restore
    """
    patched = np.asarray(patched, dtype=np.float64)
    p1, p2 = (float(np.asarray(p, dtype=np.float64)) for p in (preference_1, preference_2))
    if not np.isfinite([p1, p2]).all() or not np.isfinite(patched).all():
        raise ValueError(f"preferences must be finite numbers, got {p1}, {p2} and patched {patched}")
    if p1 == p2:
        raise ValueError(f"text 2's preference equals text 1's ({p1}): a patch has nothing to restore")
    return (patched - p1) / (p2 - p1)


class _TextHeadsFrom(Edit):
    """Variant ``b`` replaces, at the text's positions only, the outputs of the heads
    ``which[b]`` marks by ``outputs`` (another run's, from the first rerun position)."""

    def __init__(self, which, outputs, n_text: int):  # (n_variants, n_heads), (n_heads, t, d_head)
        self.which, self.outputs, self.n_text = which, outputs, n_text

    def attention(self, weights, v, heads):  # heads: (n_variants, n_heads, t, d_head)
        t = heads.shape[-2]
        text = np.arange(t) < self.n_text  # the rerun positions that belong to the text
        chosen = self.which[:, :, None, None] & text[None, None, :, None]
        return weights, np.where(chosen, self.outputs[:, :t], heads).astype(heads.dtype)


@dataclass(frozen=True, eq=False)
class MinimalPair:
    """Two texts of one token count and two continuations, run for patching.

    Build it with :meth:`of`. ``runs[c]`` holds the recorded runs (text 1, text 2) joined
    with continuation ``c`` (0 or 1), as :func:`qkv.lab.patching.record` keeps them. Layers
    and heads are counted from 0 here; the stream entering layer 0 is the embeddings.

    Examples
    --------
    With the model installed (not run here)::

        pair = MinimalPair.of(model, "The capital of France is", "The capital of Italy is",
                              " Paris", " Rome")
        pair.since                         # 3: the texts differ at ' France' / ' Italy'
        where = np.zeros((2, 5), dtype=bool)
        where[:, 3] = True                 # copy text 2's stream at ' Italy' ...
        pair.effect(pair.patched_stream([0, 29], where))  # ... entering layers 0 and 29
        which = np.zeros((1, 30, 9), dtype=bool)
        which[0, 23, 4] = True             # copy one head's output at every text position
        pair.effect(pair.patched_heads(which))
    """

    model: Model = field(repr=False)
    text_1: np.ndarray  # (T,) token ids
    text_2: np.ndarray  # (T,)
    continuations: tuple[np.ndarray, np.ndarray]  # each (n_c,) token ids
    runs: tuple[tuple[Recorded, Recorded], tuple[Recorded, Recorded]] = field(repr=False)
    since: int  # the first position where the texts differ: patching earlier changes nothing

    @classmethod
    def of(cls, model: Model, text_1, text_2, continuation_1, continuation_2) -> MinimalPair:
        """Tokenize (strings) or check (ids) the pair and record the four runs.

        Raises a ValueError when the texts have different token counts (patching copies
        position by position), are the same tokens, or have equal preferences.
        """
        t1, t2 = _tokens(model, "text_1", text_1), _tokens(model, "text_2", text_2)
        if len(t1) != len(t2):
            raise ValueError(
                f"text_1 has {len(t1)} tokens and text_2 {len(t2)}: patching copies position by "
                "position, so the texts must have as many tokens"
            )
        differ = np.flatnonzero(t1 != t2)
        if differ.size == 0:
            raise ValueError("text_1 and text_2 are the same tokens: there is nothing to patch")
        conts = (
            _tokens(model, "continuation_1", continuation_1),
            _tokens(model, "continuation_2", continuation_2),
        )
        runs = tuple(tuple(record(model, _joined(text, c)[0]) for text in (t1, t2)) for c in conts)
        pair = cls(model, t1, t2, conts, runs, int(differ[0]))
        patching_effect(0.0, pair.preference_1, pair.preference_2)  # equal preferences: ValueError
        return pair

    def _log_p(self, c: int, text: int) -> float:
        _, rows, wanted = _joined(self.text_1, self.continuations[c])
        return float(log_prob(self.model, self.runs[c][text], rows, wanted).sum())

    @cached_property
    def preference_1(self) -> float:
        """Text 1's preference, as :func:`preference` computes it."""
        return self._log_p(0, 0) - self._log_p(1, 0)

    @cached_property
    def preference_2(self) -> float:
        """Text 2's preference."""
        return self._log_p(0, 1) - self._log_p(1, 1)

    def effect(self, patched):
        """:func:`patching_effect` of preferences ``patched`` with this pair's two."""
        return patching_effect(patched, self.preference_1, self.preference_2)

    def patched_stream(self, layer, where) -> np.ndarray:
        """Text 1's preference with text 2's stream copied in, one per row of ``where``.

        ``where`` is a bool array (n_variants, T) over the text's positions: variant ``b``
        takes the stream entering ``layer`` (from 0: layer 0's is the embeddings) from text
        2's run at the positions ``where[b]`` marks. ``layer`` is one int, or one per
        variant (n_variants,). Returns (n_variants,) preferences in nats.
        """
        n_text = len(self.text_1)
        where = np.asarray(where)
        if where.ndim != 2 or where.shape[1] != n_text or where.dtype != bool:
            raise ValueError(
                f"where must be a bool array (n_variants, T) = (n_variants, {n_text}), "
                f"got {where.dtype} of shape {where.shape}"
            )
        totals = []
        for c, continuation in enumerate(self.continuations):
            text_1_run, text_2_run = self.runs[c]
            _, rows, wanted = _joined(self.text_1, continuation)
            full = np.zeros((len(where), n_text + len(continuation)), dtype=bool)
            full[:, :n_text] = where  # the continuation's positions are never copied
            got = patch_stream(self.model, text_2_run, text_1_run, layer, full, rows, wanted)
            totals.append(got.sum(axis=1))  # (n_variants,)
        return totals[0] - totals[1]

    def patched_heads(self, which) -> np.ndarray:
        """Text 1's preference with some heads' outputs taken from text 2's run.

        ``which`` is a bool array (n_variants, n_layers, n_heads): variant ``b`` copies the
        output (before ``W_O``) of the heads ``which[b]`` marks at every position of the
        text, from text 2's run; the layers run on from the first marked one. Returns
        (n_variants,) preferences in nats.
        """
        config = self.model.config
        which = np.asarray(which)
        shape = (config.n_layers, config.n_heads)
        if which.ndim != 3 or which.shape[1:] != shape or which.dtype != bool:
            raise ValueError(
                f"which must be a bool array (n_variants, n_layers, n_heads) = (n_variants, "
                f"{shape[0]}, {shape[1]}), got {which.dtype} of shape {which.shape}"
            )
        marked = which.any(axis=2)  # (n_variants, n_layers)
        starts = np.where(marked.any(axis=1), marked.argmax(axis=1), config.n_layers)
        n_text, since = len(self.text_1), self.since
        out = np.zeros(len(which))
        for c, continuation in enumerate(self.continuations):
            text_1_run, text_2_run = self.runs[c]
            _, rows, wanted = _joined(self.text_1, continuation)
            sign = 1.0 if c == 0 else -1.0
            for start in np.unique(starts):
                group = np.flatnonzero(starts == start)
                if start == config.n_layers:  # nothing copied: text 1's own run
                    out[group] += sign * log_prob(self.model, text_1_run, rows, wanted).sum()
                    continue
                edits = {
                    i: _TextHeadsFrom(which[group, i], text_2_run.heads[i][:, since:], n_text - since)
                    for i in range(start, config.n_layers)
                    if which[group, i].any()
                }
                entering = text_1_run.streams[start, since:]  # (T - since, d_model): text 1's own
                x = np.broadcast_to(entering, (len(group), *entering.shape))
                got = rerun(self.model, text_1_run, int(start), x, since, rows, wanted, edits=edits)
                out[group] += sign * got.sum(axis=1)
        return out

    def stream_effects(self) -> np.ndarray:
        """The effect of copying text 2's stream entering each layer at each text position.

        Returns (n_layers, T): row ``l`` the stream entering layer ``l`` (from 0; row 0 the
        embeddings), column ``p`` the position (from 0). Positions before the first where
        the texts differ hold the same tokens in both texts; their effect is 0.
        """
        config, n_text = self.model.config, len(self.text_1)
        grid = np.zeros((config.n_layers, n_text))
        layers, positions = np.meshgrid(
            np.arange(config.n_layers), np.arange(self.since, n_text), indexing="ij"
        )
        layers, positions = layers.ravel(), positions.ravel()
        where = np.zeros((len(layers), n_text), dtype=bool)
        where[np.arange(len(layers)), positions] = True
        grid[layers, positions] = self.effect(self.patched_stream(layers, where))
        return grid

    def head_effects(self) -> np.ndarray:
        """The effect of copying each head's output from text 2's run, one head at a time:
        (n_layers, n_heads), layer and head from 0."""
        config = self.model.config
        which = np.eye(config.n_layers * config.n_heads, dtype=bool)
        which = which.reshape(-1, config.n_layers, config.n_heads)  # variant l * n_heads + h
        return self.effect(self.patched_heads(which)).reshape(config.n_layers, config.n_heads)
