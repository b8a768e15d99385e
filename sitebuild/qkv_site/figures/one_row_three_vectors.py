"""One row of X times W_Q, W_K and W_V: the hand-built word milk becomes a query, a key
and a value that share no feature."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

from qkv import toy
from qkv.projections import project
from qkv_site.figures._draw import cell_text, heatmap
from qkv_site.figures._table import Table

WORD = "milk"

ALT = (
    "Four rows of cells. The top row is the hand-built word milk, one row of X with a 1 "
    "under liquid and under dairy. Times W_Q it becomes a query whose only non-zero entry "
    "is under verb, times W_K a key whose only non-zero entry is under liquid, and times W_V "
    "a value, four numbers wide, whose only non-zero entry is under dairy: one row in, "
    "three different vectors out."
)
CAPTION = (
    "One word's row of X, multiplied by the three hand-built matrices of this chapter's "
    "toy. The query says what milk looks for, the key what it can be found by, the value "
    "what it hands over; the value's four columns are features of its own choosing."
)


class Row(NamedTuple):
    label: str  # what the row is: "X (milk)", "query", "key", "value"
    says: str  # what the row says about the word
    columns: tuple[str, ...]  # the feature each entry stands for
    values: np.ndarray  # (n,)


@cache
def data() -> tuple[Row, ...]:
    """Milk's row of the hand-built X and its query, key and value, computed by qkv.project."""
    x = toy.feature_embeddings()  # (T, 8)
    q, k, v = project(x, toy.hand_built_projections())  # (T, 8), (T, 8), (T, 4)
    i = toy.SENTENCE.index(WORD)
    return (
        Row(f"X ({WORD})", "its features", toy.FEATURES, x[i]),
        Row("query", "what it looks for", toy.FEATURES, q[i]),
        Row("key", "what it is found by", toy.FEATURES, k[i]),
        Row("value", "what it hands over", toy.VALUE_COLUMNS, v[i]),
    )


def tables() -> list[Table]:
    return [
        Table(
            f"{row.label}: one entry per feature",
            ("feature", "entry"),
            tuple(zip(row.columns, row.values.tolist(), strict=True)),
        )
        for row in data()
    ]


def build(style) -> Figure:
    rows = data()
    fig = Figure(figsize=(5.6, 7.6), layout="constrained")
    axes = fig.subplots(len(rows), 1, gridspec_kw={"hspace": 0.1})
    steps = ("", r"$\times\, W_Q$", r"$\times\, W_K$", r"$\times\, W_V$")
    for ax, row, step in zip(axes, rows, steps, strict=True):
        top = max(1.0, float(row.values.max()))
        mesh = heatmap(ax, row.values[None, :], [""], row.columns, style, vmin=0.0, vmax=top)
        ax.set_yticks([])
        for j, value in enumerate(row.values):
            cell_text(ax, mesh, 0, j, f"{value:g}", style, fontsize=11)
        ax.set_xlim(-0.5, len(toy.FEATURES) - 0.5)  # every row on the same grid of cells
        title = f"{row.label}: {row.says}" if not step else f"{step}  →  {row.label}: {row.says}"
        ax.set_title(title, loc="left", fontsize=12)
    return fig
