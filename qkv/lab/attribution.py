"""Direct logit attribution: how much each head and each MLP writes, straight to the answer.

The residual stream leaving the last layer is a sum: the token's embedding, plus what every
head of every layer wrote through ``W_O``, plus what every layer's MLP wrote. The final
RMSNorm divides the row by its root-mean-square and multiplies by a gain; with that divisor
*frozen* at its value in this run (the last layer's RMS of this row), the norm is linear,
and so is the unembedding. So the logit difference ``logit(a) − logit(b)`` splits exactly
into one share per part of the sum (Elhage et al. 2021, *direct* effects): a part's share is

    part · (gain ⊙ (E[a] − E[b])) / rms

with ``E`` the tied embedding. The shares add up to the logit difference. A share is
direct only: a head that changes what later layers do is not credited for that here (an
intervention measures it: :mod:`qkv.lab.interventions`, :mod:`qkv.lab.patching`).

Examples
--------
With the model installed (not run here, since the model is optional)::

    from qkv import smollm2
    from qkv.lab import attribution
    model = smollm2.load()
    ids = model.encode("The capital of France is")
    paris, london = model.encode(" Paris")[0], model.encode(" London")[0]
    dla = attribution.direct_logit_attribution(model, ids, paris, london)
    dla.heads.shape, dla.mlps.shape   # (30, 9), (30,)
    dla.total() - dla.logit_difference  # 0, up to float rounding
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from qkv._checks import position_in
from qkv.multihead import merge_heads
from qkv.smollm2 import Edit, Model, check_ids, decoder_layer, linear

__all__ = ["Attribution", "direct_logit_attribution"]


class _Keep(Edit):
    """Keeps the heads' outputs (n_heads, T, d_head) of the layer it is given to; changes nothing."""

    def attention(self, weights, v, heads):
        self.heads = heads
        return weights, heads


class Attribution(NamedTuple):
    """What :func:`direct_logit_attribution` returns, in logit units (nats of log-odds)."""

    heads: np.ndarray  # (n_layers, n_heads): each head's direct share, layer and head from 0
    mlps: np.ndarray  # (n_layers,): each layer's MLP's direct share
    embedding: float  # the token embedding's share (the stream entering layer 1)
    logit_difference: float  # logit(a) − logit(b) of the run, from the stream leaving the last layer
    scale: float  # the frozen divisor: the last layer's RMS of this row, sqrt(mean(x²) + eps)
    position: int  # the position read, from 0
    token_a: int
    token_b: int

    def total(self) -> float:
        """The embedding's share plus every head's and every MLP's: the logit difference,
        up to the rounding of the float32 forward pass."""
        return float(self.embedding + self.heads.sum() + self.mlps.sum())


def _token(name: str, token, vocab: int) -> int:
    if (
        isinstance(token, bool | np.bool_)
        or not isinstance(token, int | np.integer)
        or not 0 <= token < vocab
    ):
        raise ValueError(f"{name} must be a token id in 0..{vocab - 1}, got {token!r}")
    return int(token)


def direct_logit_attribution(
    model: Model, ids, token_a: int, token_b: int, position: int = -1
) -> Attribution:
    """Each head's, each MLP's and the embedding's direct share of ``logit(a) − logit(b)``.

    The model runs once on ``ids``; every layer's heads' outputs (before ``W_O``) are kept,
    and each MLP's output is what the layer's MLP added to the stream. At ``position``, with
    ``x`` the stream leaving the last layer, ``rms = sqrt(mean(x²) + eps)`` (frozen) and
    ``u = gain ⊙ (E[a] − E[b])`` (``gain`` the final norm's, ``E`` the tied embedding):

    - head ``h`` of layer ``l``: ``(o_lh @ W_O[l][64 h : 64 (h + 1)]) · u / rms``, with
      ``o_lh`` its output (64 numbers) at ``position``;
    - MLP of layer ``l``: ``m_l · u / rms``;
    - the embedding: ``E[ids[position]] · u / rms``.

    They add up to ``x · u / rms``, the logit difference, computed here in float64: the
    float32 forward pass rounds each layer's sum of heads, so :meth:`Attribution.total`
    matches it to that rounding (a bound is tested), not bit for bit.

    Parameters
    ----------
    ids : sequence of T ints
        Token ids (:meth:`qkv.smollm2.Model.encode`).
    token_a, token_b : int
        Token ids whose logits are compared (the first tokens of two answers, say).
    position : int, default -1
        The position read, from 0 or negative from the end (-1: the last token).

    Returns
    -------
    Attribution
        ``heads`` (n_layers, n_heads), ``mlps`` (n_layers,), ``embedding``, the run's
        ``logit_difference`` and the frozen ``scale``.

    Examples
    --------
    With the model installed (not run here)::

        dla = direct_logit_attribution(model, model.encode("The capital of France is"),
                                       paris, london)
        layer, head = np.unravel_index(np.argmax(dla.heads), dla.heads.shape)
        # the head (from 0) whose output, by itself, most favours ' Paris' over ' London'
    """
    config = model.config
    ids = check_ids(ids, config)
    n_tokens = len(ids)
    position = position_in(position, n_tokens)
    token_a = _token("token_a", token_a, config.vocab_size)
    token_b = _token("token_b", token_b, config.vocab_size)
    ids = ids[: position + 1]  # later tokens cannot change this position (causal mask)

    x, positions = model.embedding[ids], np.arange(len(ids))  # (T, d_model)
    outputs, mlps = [], []
    for layer in model.layers:
        kept = _Keep()
        after, _ = decoder_layer(x, layer, config, positions, edit=kept)
        # the stream after attention, as decoder_layer adds it: (T, d_model)
        middle = x + linear(merge_heads(kept.heads), layer.attention.w_o)
        outputs.append(kept.heads[:, position].astype(np.float64))  # (n_heads, d_head)
        mlps.append(after[position].astype(np.float64) - middle[position])  # (d_model,)
        x = after
    final = x[position].astype(np.float64)  # (d_model,): what the final norm reads
    scale = float(np.sqrt(np.mean(final * final) + config.norm_eps))  # frozen
    rows = model.embedding[[token_a, token_b]].astype(np.float64)  # (2, d_model)
    u = model.final_norm.astype(np.float64) * (rows[0] - rows[1]) / scale  # (d_model,)
    # a head's share: its output through its 64 rows of W_O, read along u; W_O @ u first
    read = np.stack([layer.attention.w_o.astype(np.float64) @ u for layer in model.layers])
    read = read.reshape(config.n_layers, config.n_heads, config.d_head)  # one row per head
    heads = np.einsum("lhd,lhd->lh", np.stack(outputs), read)  # (n_layers, n_heads)
    return Attribution(
        heads=heads,
        mlps=np.stack(mlps) @ u,  # (n_layers,)
        embedding=float(model.embedding[ids[position]].astype(np.float64) @ u),
        logit_difference=float(final @ u),
        scale=scale,
        position=position,
        token_a=token_a,
        token_b=token_b,
    )
