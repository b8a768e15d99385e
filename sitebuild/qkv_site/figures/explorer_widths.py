"""The explorer's two controls in one picture: one query's weights at three head widths,
with and without the division by √d_k."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

from qkv import toy
from qkv.dot_product import attention
from qkv.projections import project
from qkv_site.figures._table import Table

WORDS = toy.SENTENCE  # the explorer's six tokens (qkv.toy.query_state)
QUERY = "she"  # the query the explorer opens on
WIDTHS = (1, 16, 64)  # the head widths of the chapter's experiments 2, 3 and 4
NARROW = True  # on phones: one width per row

ALT = (
    f"Six small bar charts of the weights the query “{QUERY}” gives the six keys in the "
    "explorer, at head widths dₖ = 1, 16 and 64, with the division by √dₖ and "
    "without it. At dₖ = 1 the two are the same. With the division the largest "
    "weight stays below 0.6 at every width; without it, it grows from 0.28 to 0.97 at "
    "dₖ = 16 and to 1.00 at dₖ = 64: one key takes all the weight."
)
CAPTION = (
    f"What the explorer shows at stage 3 for the query “{QUERY}” (the random toy, "
    "six keys). Each column is one head width, each row one setting of the scale box; "
    "the number above a panel's tallest bar is its largest weight."
)


class Widths(NamedTuple):
    words: tuple[str, ...]
    widths: tuple[int, ...]
    scaled: np.ndarray  # (len(widths), T): weights with the division by √d_k
    unscaled: np.ndarray  # (len(widths), T): weights without it


@cache
def data() -> Widths:
    x = toy.embeddings(WORDS)  # (T, d_model)
    i = WORDS.index(QUERY)
    rows = {True: [], False: []}
    for d_k in WIDTHS:
        q, k, v = project(x, toy.projections(d_k, d_v=toy.D_V))  # (T, d_k), (T, d_k), (T, d_v)
        for scale in (True, False):
            weights, _ = attention(q[i : i + 1], k, v, scale=scale)  # (1, T)
            rows[scale].append(weights[0])
    return Widths(WORDS, WIDTHS, np.array(rows[True]), np.array(rows[False]))


def tables() -> list[Table]:
    d = data()
    return [
        Table(
            f"Weights of the query “{QUERY}”, {setting}",
            ("head width dₖ", *d.words),
            tuple((f"dₖ = {w}", *row.tolist()) for w, row in zip(d.widths, weights, strict=True)),
        )
        for setting, weights in (("divided by √dₖ", d.scaled), ("not divided", d.unscaled))
    ]


def build(style, narrow: bool = False) -> Figure:
    d = data()
    n = len(d.widths)
    if narrow:
        fig = Figure(figsize=(3.8, 7.2), layout="constrained")
        grid = fig.subplots(n, 2, sharey=True)  # (width, setting)
    else:
        fig = Figure(figsize=(6.4, 4.4), layout="constrained")
        grid = fig.subplots(2, n, sharey=True).T  # indexed (width, setting) as well
    x = np.arange(len(d.words))
    settings = (("÷√dₖ", d.scaled, style.scaled), ("no ÷√dₖ", d.unscaled, style.unscaled))
    for col, (label, weights, colour) in enumerate(settings):
        for row, width in enumerate(d.widths):
            ax = grid[row, col]
            w = weights[row]
            ax.bar(x, w, color=colour, width=0.7)
            top = int(np.argmax(w))
            ax.text(top, w[top] + 0.04, f"{w[top]:.2f}", ha="center", va="bottom", fontsize=10)
            ax.set_ylim(0, 1.3)
            ax.set_yticks([0, 1])
            ax.set_title(f"dₖ = {width}, {label}", loc="left", fontsize=10)
            last = row == n - 1 if narrow else col == 1
            if last:
                ax.set_xticks(x, d.words, rotation=60, ha="right", rotation_mode="anchor", fontsize=9)
            else:
                ax.set_xticks(x, [])
            if (col == 0) if narrow else (row == 0):
                ax.set_ylabel("weight")
    return fig
