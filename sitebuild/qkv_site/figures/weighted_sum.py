"""Step 4 seen adding up: each value row, times its weight, moves the output a little; the
steps end where the output is. One waterfall per output number, for the query she."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

from qkv_site.figures import four_stages
from qkv_site.figures._table import Table

NARROW = True  # one column of panels on phones

ALT = (
    "Four small charts, one for each of the output's four numbers, for the query she. In "
    "each, the six words go down the side; each word's bar starts where the previous one "
    "ended and is as long as its weight times its value's number, pointing right when that "
    "product is positive and left when it is negative. The last bar, from zero, is the "
    "output, and it ends exactly where the six steps end. Drank, with weight 0.45, makes "
    "the longest step in three of the four charts; from, with 0.02, hardly moves any."
)
CAPTION = (
    "The fourth step, v[0] to v[3] of the output one at a time: the output is the sum of "
    "the value rows, each multiplied by its weight. Same numbers as the figure above."
)


class Steps(NamedTuple):
    words: tuple[str, ...]
    weights: np.ndarray  # (T,)
    values: np.ndarray  # (T, d_v)
    contributions: np.ndarray  # (T, d_v): weight_j * value_j
    running: np.ndarray  # (T + 1, d_v): the running sum, from 0 after no word
    output: np.ndarray  # (d_v,): what attention returns


@cache
def data() -> Steps:
    d = four_stages.data()
    contributions = d.weights[:, None] * d.values
    running = np.vstack([np.zeros(d.values.shape[1]), np.cumsum(contributions, axis=0)])
    return Steps(d.words, d.weights, d.values, contributions, running, d.output)


def tables() -> list[Table]:
    d = data()
    columns = tuple(f"weight × v[{c}]" for c in range(d.values.shape[1]))
    steps = tuple(
        (w, float(a), *map(float, row)) for w, a, row in zip(d.words, d.weights, d.contributions, strict=True)
    )
    return [
        Table(
            "Each word's step: its weight times its value row",
            ("word", "weight", *columns),
            (*steps, ("output", float(d.weights.sum()), *map(float, d.output))),
        )
    ]


def build(style, narrow: bool = False) -> Figure:
    d = data()
    n_words, d_v = d.values.shape
    if narrow:
        fig = Figure(figsize=(3.8, 10.4), layout="constrained")
        axes = fig.subplots(d_v, 1, sharex=True)
    else:
        fig = Figure(figsize=(7.6, 5.6), layout="constrained")
        axes = fig.subplots(2, 2, sharex=True).ravel()
    labels = [f"{w} ({a:.2f})" for w, a in zip(d.words, d.weights, strict=True)] + ["output"]
    rows = np.arange(n_words + 1)
    up, down = style.lines[0], style.lines[1]
    for c, ax in enumerate(axes):
        starts, steps = d.running[:-1, c], d.contributions[:, c]
        ax.barh(rows[:-1], steps, left=starts, color=[up if s >= 0 else down for s in steps], height=0.6)
        for r in rows[:-1]:  # a thin line carries each step's end to the next step's start
            ax.plot([d.running[r + 1, c]] * 2, [r + 0.3, r + 0.7], color=style.muted, lw=1)
        ax.barh(rows[-1], d.output[c], color=style.primary, height=0.6)
        ax.axvline(0, color=style.faint, lw=1)
        ax.axvline(d.output[c], color=style.primary, lw=1, ls="--")
        ax.set_yticks(rows, labels if (narrow or c % 2 == 0) else [""] * len(labels))
        ax.set_ylim(rows[-1] + 0.6, -0.6)  # the first word at the top, the output at the bottom
        ax.set_title(f"v[{c}] of the output: {d.output[c]:+.2f}")
        ax.tick_params(axis="y", length=0)
    axes[-1].set_xlabel("running sum of weight × value")
    if not narrow:
        axes[-2].set_xlabel("running sum of weight × value")
    return fig
