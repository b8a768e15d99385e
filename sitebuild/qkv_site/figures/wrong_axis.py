"""Softmax over the correct axis and over the wrong one: which sums come out as 1."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

from qkv import toy
from qkv.dot_product import softmax
from qkv.projections import project
from qkv_site.figures._draw import cell_text, heatmap
from qkv_site.figures._table import Table, matrix

NARROW = True  # stacks the two panels on phones

ALT = (
    "Two grids of attention weights on the six toy words, queries as rows and keys as "
    "columns, each with its row sums beside it and its column sums under it. The first, "
    "softmax over the keys, the correct axis: every row sums to 1 and the column sums vary. "
    "The second, softmax over the queries, the wrong axis: every column sums to 1 and the "
    "row sums run from 0.78 to 1.57, so some words take in more than a whole value and "
    "others less."
)
CAPTION = (
    "The toy sentence's scores (dₖ = 8) put through softmax along each row, as attention "
    "does (first), and down each column, the slip of trap 1 (second). Both grids look like "
    "attention; only the first gives every query a total weight of 1."
)


class Axes(NamedTuple):
    words: tuple[str, ...]
    by_key: np.ndarray  # (T, T): softmax over the keys, the last axis (correct)
    by_query: np.ndarray  # (T, T): softmax over the queries, axis 0 (wrong)


@cache
def data() -> Axes:
    q, k, _ = project(toy.embeddings(), toy.projections(toy.D_K, toy.D_V))
    scores = q @ k.T / np.sqrt(toy.D_K)  # (T, T)
    return Axes(toy.SENTENCE, softmax(scores, axis=-1), softmax(scores, axis=0))


def _sum_text(value: float) -> str:
    return f"{value:.2f}"


def _panel(ax, words, weights, title, style, vmax):
    t = len(words)
    mesh = heatmap(ax, weights, words, words, style, vmax=vmax)
    for i in range(t):
        for j in range(t):
            cell_text(ax, mesh, i, j, f"{weights[i, j]:.2f}".removeprefix("0"), style, fontsize=7)
    rows, cols = weights.sum(axis=1), weights.sum(axis=0)
    for i, s in enumerate(rows):  # a column of row sums to the right of the grid
        ax.text(t + 0.1, i, _sum_text(s), ha="center", va="center", fontsize=8, color=_colour(s, style))
    for j, s in enumerate(cols):  # a row of column sums under the grid
        ax.text(j, t + 0.1, _sum_text(s), ha="center", va="center", fontsize=8, color=style.muted)
    ax.axvline(t - 0.5, color=style.faint, linewidth=1)
    ax.axhline(t - 0.5, color=style.faint, linewidth=1)
    ax.set_xlim(-0.5, t + 0.6)
    ax.set_ylim(t + 0.6, -0.5)
    ax.set_xticks([*range(t), t + 0.1], [*words, "row sum"], rotation=45, ha="right", rotation_mode="anchor")
    ax.set_yticks([*range(t), t + 0.1], [*words, "column sum"])
    ax.set_title(title, fontsize=10)
    return mesh


def _colour(total: float, style) -> str:
    """A row sum of 1 (to the two decimals shown) in the text colour, any other in the accent:
    a query's weights must sum to 1; a key's column has no such rule."""
    return style.text if _sum_text(total) == "1.00" else style.accent


def tables() -> list[Table]:
    d = data()
    return [
        matrix(
            "Softmax over the keys (correct): attention weights", r"query \ key", d.words, d.words, d.by_key
        ),
        matrix(
            "Softmax over the queries (wrong): attention weights",
            r"query \ key",
            d.words,
            d.words,
            d.by_query,
        ),
    ]


def build(style, narrow: bool = False) -> Figure:
    d = data()
    vmax = float(max(d.by_key.max(), d.by_query.max()))
    if narrow:
        fig = Figure(figsize=(4.0, 8.6), layout="constrained")
        axes = fig.subplots(2, 1)
    else:
        fig = Figure(figsize=(8.0, 4.6), layout="constrained")
        axes = fig.subplots(1, 2)
    _panel(axes[0], d.words, d.by_key, "correct: softmax over the keys\n(each row sums to 1)", style, vmax)
    _panel(
        axes[1], d.words, d.by_query, "wrong: softmax over the queries\n(each column sums to 1)", style, vmax
    )
    for ax in axes:
        ax.set_xlabel("key")
        ax.set_ylabel("query")
    return fig
