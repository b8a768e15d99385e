"""Attention sinks in a trained model: the weight on the first token, by layer, over ten texts."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

from qkv_site.figures._table import Table
from qkv_site.figures._trained import texts

ALT = (
    "Bar chart of the mean weight that lands on the first token in each of "
    "SmolLM2-135M-Instruct's 30 layers (mean over 9 heads, over queries 2 to T, and over ten "
    "texts with nine different first words), against 0.19, what heads spreading their "
    "weight evenly would give. Layers 1, 2 and 12 stay below that even share; every layer "
    "from 3 on except 11 and 12 is above 0.3, and from layer 13 on every layer is above 0.45, "
    "up to 0.89 in layer 25."
)
CAPTION = (
    "The first token as an attention sink, whichever word it is. Query 1 is left out: it "
    "can only see itself. The dashed line is the mean weight the first token would get if "
    "every query spread its weight evenly over the tokens it can see."
)


class Sink(NamedTuple):
    share: np.ndarray  # (layers,): mean weight on token 1, queries 2..T, over the texts
    even: float  # the same mean for uniform weights over the visible tokens


@cache
def data() -> Sink:
    from qkv import head_scores

    runs = texts()
    aims = [head_scores.targets("first", run.ids) for run in runs]
    per_head = np.mean([head_scores.score(run.weights, a) for run, a in
                        zip(runs, aims, strict=True)], axis=0)  # (layers, heads)
    return Sink(per_head.mean(axis=1), float(np.mean([head_scores.baseline(a) for a in aims])))


def tables() -> list[Table]:
    d = data()
    rows = tuple((layer, share) for layer, share in enumerate(d.share.tolist(), start=1))
    return [Table(f"Mean weight on the first token, queries 2 to T, ten texts (even spread: "
                  f"{d.even:.2f})", ("layer", "weight"), rows)]


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
