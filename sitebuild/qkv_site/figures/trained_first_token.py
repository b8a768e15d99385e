"""Attention sinks in a trained model: the share of weight on the first token, by layer."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

from qkv_site.figures._trained import trace

ALT = (
    "Bar chart of the share of attention weight that lands on the first token, ‘The’, in "
    "each of SmolLM2-135M's 30 layers (mean over 9 heads and over queries 2 to 10 of “The "
    "cat sat on the mat because it was warm”). It is below a third in layers 1, 2, 11 and "
    "12, above a half in every layer from 13 on, and reaches 0.90 in layers 21 and 25."
)
CAPTION = (
    "The first token as an attention sink. Query 1 is left out: it can only see itself. "
    "The dashed line marks the even share if every query spread its weight over all the "
    "tokens it can see."
)


class Sink(NamedTuple):
    share: np.ndarray  # (layers,): mean weight on token 1, queries 2..T
    even: float  # the same mean for uniform weights over the visible tokens


@cache
def data() -> Sink:
    w = trace().weights.astype(np.float64)
    t = w.shape[-1]
    even = float(np.mean([1 / (i + 1) for i in range(1, t)]))
    return Sink(w[:, :, 1:, 0].mean(axis=(1, 2)), even)


def build(style) -> Figure:
    d = data()
    layers = np.arange(1, len(d.share) + 1)
    fig = Figure(figsize=(6.4, 3.6), layout="constrained")
    ax = fig.add_subplot()
    ax.bar(layers, d.share, color=style.scaled, width=0.75)
    ax.axhline(d.even, color=style.muted, linestyle="--", linewidth=1.2,
               label="if weights were spread evenly")
    ax.legend(loc="upper left")
    ax.set_xticks([1, 5, 10, 15, 20, 25, 30])
    ax.set_xlim(0.3, len(layers) + 0.7)
    ax.set_ylim(0, 1)
    ax.set_xlabel("layer")
    ax.set_ylabel("weight on the first token")
    ax.grid(True, axis="y")
    ax.set_axisbelow(True)
    return fig
