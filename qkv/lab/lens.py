"""The logit lens: what SmolLM2 would say next if it stopped after each layer.

The residual stream leaving a layer has the shape of the stream leaving the last one, so it
can be read the way the last one is: through the final RMSNorm and the tied unembedding
(nostalgebraist 2020 called this the *logit lens*). Each layer's row is normalised by its
own root-mean-square, recomputed from that row: early layers' streams are much smaller than
the last one's, and dividing them by the last layer's size instead would turn their
probabilities up or down like a temperature (TransformerLens fixed exactly that in its
pull request #1077). The ranking of the tokens does not depend on the scale; the
probabilities do.

- :func:`streams`: the residual stream leaving every layer, from the real forward pass;
- :func:`logit_lens`: at one position, each layer's top tokens and their probabilities, and
  the probability and rank, layer by layer, of the token the whole model ranks first.

Examples
--------
With the model installed (not run here, since the model is optional)::

    from qkv import smollm2
    from qkv.lab import lens
    model = smollm2.load()
    seen = lens.logit_lens(model, "The capital of France is")
    model.pieces([seen.final_id])       # (' Paris',): the whole model's top token
    seen.final_ranks.shape              # (31,): the embeddings, then layers 1 to 30
    seen.top_from()                     # the first layer from which ' Paris' stays on top
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from qkv._checks import position_in
from qkv.dot_product import softmax
from qkv.smollm2 import Model, Trace, check_ids, output_logits, run_layers

__all__ = ["LogitLens", "logit_lens", "streams"]


def _ids(model: Model, text_or_ids) -> np.ndarray:
    """Token ids (T,) of a text (str), a :class:`qkv.smollm2.Trace` or a sequence of ids."""
    if isinstance(text_or_ids, Trace):
        return text_or_ids.ids
    if isinstance(text_or_ids, str):
        return model.encode(text_or_ids)
    return check_ids(text_or_ids, model.config)


def streams(model: Model, ids) -> np.ndarray:
    """The residual stream entering the first layer and leaving every layer.

    The layers run one after another exactly as :func:`qkv.smollm2.forward` runs them (same
    calls, same shapes), so row ``l`` is the stream that layer ``l`` (from 1) hands on in
    the model's own forward pass.

    Parameters
    ----------
    ids : sequence of T ints
        Token ids, as :meth:`qkv.smollm2.Model.encode` gives them.

    Returns
    -------
    ndarray, shape (n_layers + 1, T, d_model)
        Row 0: the token embeddings; row ``l``: the stream leaving layer ``l``. The last row
        is what the final norm and the unembedding read.

    Examples
    --------
    With the model installed (not run here)::

        x = streams(model, model.encode("The cat sat"))
        x.shape                           # (31, 3, 576)
    """
    ids = check_ids(ids, model.config)
    x, positions = model.embedding[ids], np.arange(len(ids))
    out = [x]
    for i in range(model.config.n_layers):
        x, _ = run_layers(model, x, positions, start=i, stop=i + 1)  # (T, d_model)
        out.append(x)
    return np.stack(out)


class LogitLens(NamedTuple):
    """What :func:`logit_lens` returns. Row ``l`` of each array is the stream leaving layer
    ``l`` (row 0: the embeddings), read through the final norm and the unembedding."""

    position: int  # the position read, from 0
    top_ids: np.ndarray  # (n_layers + 1, top): each layer's likeliest tokens, likeliest first
    top_probs: np.ndarray  # (n_layers + 1, top): their probabilities
    final_id: int  # the token the whole model ranks first (the last row's top token)
    final_probs: np.ndarray  # (n_layers + 1,): that token's probability at each layer
    final_ranks: np.ndarray  # (n_layers + 1,): its rank at each layer, 1 = top
    scales: np.ndarray  # (n_layers + 1,): each row's own RMS, sqrt(mean(x²) + eps)

    def top_from(self) -> int:
        """The first row from which :attr:`final_id` is the top token at every later row
        (0: the embeddings already rank it first; ``n_layers``: only the last layer does)."""
        not_top = np.flatnonzero(self.final_ranks != 1)
        return 0 if not_top.size == 0 else int(not_top[-1]) + 1


def logit_lens(model: Model, trace_or_ids, position: int = -1, top: int = 5) -> LogitLens:
    """Read the stream leaving every layer at one position as next-token probabilities.

    Each row of :func:`streams` at ``position`` goes through the final RMSNorm, divided by
    its own root-mean-square (recomputed from that row), times the norm's gain, then through
    the tied embedding: ``softmax(rms_norm(x_l) @ E.T)``. The last row is the model's own
    next-token distribution.

    Parameters
    ----------
    trace_or_ids : Trace, str or sequence of T ints
        A forward pass's :class:`qkv.smollm2.Trace` (its ids are rerun: a trace keeps no
        streams), a text, or token ids.
    position : int, default -1
        The position read, from 0, or negative from the end (-1: the last token, whose
        next token the model predicts).
    top : int, default 5
        How many of each layer's likeliest tokens to keep, 1 to vocab_size.

    Returns
    -------
    LogitLens
        Arrays of n_layers + 1 rows (31 for SmolLM2): the embeddings, then layers 1 to 30.

    Examples
    --------
    With the model installed (not run here)::

        seen = logit_lens(model, "The capital of France is")
        model.pieces(seen.top_ids[-1][:2])  # the whole model's two likeliest next tokens
        seen.final_probs[-1]                # ' Paris': its probability after the last layer
        seen.final_ranks[10]                # its rank among 49,152 tokens after layer 10
    """
    ids = _ids(model, trace_or_ids)
    position = position_in(position, len(ids))
    vocab = model.config.vocab_size
    if isinstance(top, bool | np.bool_) or not isinstance(top, int | np.integer) or not 1 <= top <= vocab:
        raise ValueError(f"top must be an int in 1..{vocab} (vocab_size), got {top!r}")
    rows = streams(model, ids[: position + 1])[:, position]  # (n_layers + 1, d_model)
    # output_logits normalises each row by its own RMS: the lens's scale, row by row
    probs = softmax(output_logits(model, rows).astype(np.float64), axis=-1)  # (n_layers + 1, vocab)
    best = np.argsort(-probs, axis=-1, kind="stable")[:, :top]  # (n_layers + 1, top)
    final_id = int(best[-1, 0])
    final_probs = probs[:, final_id]  # (n_layers + 1,)
    wide = rows.astype(np.float64)
    return LogitLens(
        position=position,
        top_ids=best,
        top_probs=np.take_along_axis(probs, best, axis=-1),
        final_id=final_id,
        final_probs=final_probs,
        final_ranks=1 + (probs > final_probs[:, None]).sum(axis=-1),
        scales=np.sqrt(np.mean(wide * wide, axis=-1) + model.config.norm_eps),
    )
