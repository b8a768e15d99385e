"""Wide scores: one query's weights over six keys, narrow head and wide, divided or not."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

from qkv.dot_product import attention
from qkv_site.figures._table import Table

WIDTHS = (4, 256)  # a narrow head and a wide one
N_KEYS = 6
SEED = 0

ALT = (
    "Four bar charts of the softmax weights that one random query gives six random keys, in "
    "a head 4 wide and a head 256 wide, with and without dividing the scores by √dₖ. "
    "Without the division the wide head puts more than 0.99 of the weight on one key; "
    "divided by √dₖ, no key gets more than 0.4 in either head, and neither does any key of "
    "the narrow head undivided."
)
CAPTION = (
    f"One draw (seed {SEED}) of a query and {N_KEYS} keys per width, with independent "
    "unit-variance components, as at initialisation. The deep dive counts how often a "
    "query lands on one key over many draws."
)


class Weights(NamedTuple):
    widths: tuple[int, ...]
    unscaled: np.ndarray  # (widths, keys): softmax(q·k)
    scaled: np.ndarray  # (widths, keys): softmax(q·k / √d_k)


@cache
def data() -> Weights:
    rng = np.random.default_rng(SEED)
    unscaled, scaled = [], []
    for d_k in WIDTHS:
        q = rng.standard_normal((1, d_k))  # one query
        k = rng.standard_normal((N_KEYS, d_k))  # six keys
        v = np.zeros((N_KEYS, 1))  # the values play no part in the weights
        unscaled.append(attention(q, k, v, scale=False).weights[0])
        scaled.append(attention(q, k, v, scale=True).weights[0])
    return Weights(WIDTHS, np.array(unscaled), np.array(scaled))


def tables() -> list[Table]:
    d = data()
    columns = ("head width, division", *(f"key {i + 1}" for i in range(N_KEYS)))
    rows = tuple(
        (f"dₖ = {d_k}, {name}", *weights[i].tolist())
        for i, d_k in enumerate(d.widths)
        for name, weights in (("q·k", d.unscaled), ("q·k / √dₖ", d.scaled))
    )
    return [Table("Weight of each key, for one query", columns, rows)]


def build(style) -> Figure:
    d = data()
    fig = Figure(figsize=(5.0, 4.4), layout="constrained")
    axes = fig.subplots(len(d.widths), 2, sharex=True, sharey=True)
    x = np.arange(1, N_KEYS + 1)
    for i, d_k in enumerate(d.widths):
        for j, (weights, colour, label) in enumerate(
            (
                (d.unscaled[i], style.unscaled, r"$q\cdot k$"),
                (d.scaled[i], style.scaled, r"$q\cdot k\,/\sqrt{d_k}$"),
            )
        ):
            ax = axes[i, j]
            bars = ax.bar(x, weights, color=colour, width=0.7)
            ax.bar_label(bars, [f"{w:.2f}" for w in weights], padding=2, fontsize=9, color=style.text)
            ax.set_title(f"$d_k$ = {d_k}, {label}", fontsize=11)
            ax.set_ylim(0, 1.25)
            ax.set_yticks([0, 0.5, 1])
            ax.set_xticks(x)
        axes[i, 0].set_ylabel("weight")
    for ax in axes[-1]:
        ax.set_xlabel("key")
    return fig
