"""Tying W_Q = W_K: the score matrix becomes symmetric, so one direction of a pair is lost."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

from qkv import toy
from qkv.dot_product import scale_factor
from qkv.projections import Projections, project
from qkv_site.figures._draw import cell_text, heatmap, outline
from qkv_site.figures._table import Table, matrix

D_K = 8  # as in the chapter's snippet (snippets/tie_query_key.py)
PAIR = ("milk", "from")  # the pair the chapter discusses
NARROW = True  # stacks the two panels on phones

ALT = (
    "Two heatmaps of the scaled scores q·k/√dₖ between the six words of "
    f"“{' '.join(toy.SENTENCE)}”, rows are queries and columns keys. Left, with separate "
    f"W_Q and W_K, the score of “{PAIR[0]}” asking “{PAIR[1]}” differs clearly from "
    f"“{PAIR[1]}” asking “{PAIR[0]}”. Right, with W_Q = W_K, the matrix is a mirror image "
    "of itself across the diagonal and the two scores are equal."
)
CAPTION = (
    f"Scaled scores of the toy sentence (dₖ = {D_K}), before softmax. Tying the query and "
    "key projections makes score(i, j) = score(j, i) for every pair; the boxed cells are "
    f"“{PAIR[0]}” and “{PAIR[1]}” in both directions. Softmax then normalises each row "
    "separately, so even tied weights are not symmetric: the scores are."
)


class Scores(NamedTuple):
    words: tuple[str, ...]
    separate: np.ndarray  # (T, T) scaled scores with W_Q != W_K
    tied: np.ndarray  # (T, T) scaled scores with W_Q = W_K


def _scores(x, p: Projections) -> np.ndarray:
    q, k, _ = project(x, p)
    return q @ k.T * scale_factor(True, p.d_k)  # (T, T): query i against key j


@cache
def data() -> Scores:
    x, p = toy.embeddings(), toy.projections(D_K)
    tied = Projections(w_q=p.w_k, w_k=p.w_k, w_v=p.w_v)
    return Scores(toy.SENTENCE, _scores(x, p), _scores(x, tied))


def tables() -> list[Table]:
    d = data()
    return [
        matrix("Scaled scores, separate W_Q and W_K", r"query \ key", d.words, d.words, d.separate),
        matrix("Scaled scores, tied W_Q = W_K", r"query \ key", d.words, d.words, d.tied),
    ]


def build(style, narrow: bool = False) -> Figure:
    d = data()
    if narrow:
        fig = Figure(figsize=(3.6, 7.0), layout="constrained")
        left, right = fig.subplots(2, 1)
    else:
        fig = Figure(figsize=(5.6, 4.1), layout="constrained")
        left, right = fig.subplots(1, 2, sharey=True)
    limit = float(np.abs([d.separate, d.tied]).max())
    i, j = (d.words.index(w) for w in PAIR)
    for ax, scores, title in (
        (left, d.separate, "separate $W_Q$, $W_K$"),
        (right, d.tied, "tied: $W_Q = W_K$"),
    ):
        image = heatmap(ax, scores, d.words, d.words, style, vmin=-limit, vmax=limit, cmap="PuOr_r")
        for a, b in ((i, j), (j, i)):
            outline(ax, a, b, style.text)
            cell_text(ax, image, a, b, f"{scores[a, b]:.2f}", style, fontsize=9.5)
        ax.set_title(title)
        ax.set_xlabel("key")
    left.set_ylabel("query")
    if narrow:
        right.set_ylabel("query")
    bar = fig.colorbar(image, ax=[left, right], orientation="horizontal", shrink=0.7, aspect=30)
    bar.set_label(r"scaled score $q\cdot k/\sqrt{d_k}$")
    bar.outline.set_visible(False)
    return fig
