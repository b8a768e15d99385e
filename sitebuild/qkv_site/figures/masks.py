"""Masks: a causal mask and a padding mask, and the exact zeros they put in the weights."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from qkv import toy
from qkv.masks import causal_mask, padding_mask
from qkv.projections import self_attention
from qkv_site.figures._draw import cell_text, heatmap
from qkv_site.figures._table import Table, matrix

D_K = toy.D_K  # the site's one toy head; the weights do not depend on d_v
REAL = 4  # the padded sequence: four real words, then padding up to six positions
PAD = "<pad>"
PAD_SEED = 1  # padding holds arbitrary numbers, as in the chapter's snippets/three_kinds.py
NARROW = True  # stacks the two panels on phones

ALT = (
    f"Two heatmaps of attention weights on the six-position toy sentence, rows are queries and "
    "columns keys. Left, a causal mask: every cell above the diagonal, where a word would "
    f"look at a later word, holds exactly 0. Right, a padding mask on a sequence of {REAL} "
    f"words and {6 - REAL} padding positions: the two padding columns hold exactly 0 for "
    "every query. Each row still adds up to 1."
)
CAPTION = (
    f"Weights of the toy sentence (dₖ = {D_K}) under a causal mask and under a padding mask. "
    "Hatched cells are masked: their score was set to −∞, so softmax gave them a weight of "
    "exactly 0, and the row's weight went to the allowed keys."
)


class Masked(NamedTuple):
    words: tuple[str, ...]
    padded_words: tuple[str, ...]
    causal_mask: np.ndarray  # (T, T) bool, True where a query may attend
    causal: np.ndarray  # (T, T) weights
    padding_mask: np.ndarray  # (T, T) bool
    padding: np.ndarray  # (T, T) weights


@cache
def data() -> Masked:
    x, p = toy.embeddings(), toy.projections(D_K)
    t = len(toy.SENTENCE)
    causal = causal_mask(t)
    padded = x.copy()
    padded[REAL:] = np.random.default_rng(PAD_SEED).normal(size=(t - REAL, x.shape[1]))
    pad = np.broadcast_to(padding_mask([REAL], t)[0], (t, t))  # (T, T): same for every query
    return Masked(
        toy.SENTENCE,
        (*toy.SENTENCE[:REAL], *[PAD] * (t - REAL)),
        causal,
        self_attention(x, p, mask=causal).weights,
        pad,
        self_attention(padded, p, mask=pad).weights,
    )


def _panel(ax, words, mask, weights, title, style):
    image = heatmap(ax, np.where(mask, weights, np.nan), words, words, style)
    image.cmap.set_bad(style.background)
    rows, cols = np.nonzero(~mask)
    for i, j in zip(rows, cols, strict=True):
        ax.add_patch(_hatched(i, j, style))
        ax.text(j, i, f"{weights[i, j]:g}", ha="center", va="center", color=style.text, fontsize=11)
    for i, j in zip(*np.nonzero(mask), strict=True):
        w = weights[i, j]  # ".72" fits a cell; only an exact 1 is written "1"
        cell_text(ax, image, i, j, "1" if w == 1.0 else f"{w:.2f}".removeprefix("0"), style, fontsize=9)
    ax.set_title(title)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    return image


def _hatched(i, j, style):
    return Rectangle(
        (j - 0.5, i - 0.5), 1, 1, facecolor=style.background, hatch="///", edgecolor=style.faint, linewidth=0
    )


def tables() -> list[Table]:
    d = data()
    return [
        matrix("Causal mask: attention weights (0 where masked)", r"query \ key", d.words, d.words, d.causal),
        matrix(
            "Padding mask: attention weights (0 on padding keys)",
            r"query \ key",
            d.padded_words,
            d.padded_words,
            d.padding,
        ),
    ]


def build(style, narrow: bool = False) -> Figure:
    d = data()
    if narrow:
        fig = Figure(figsize=(3.6, 7.4), layout="constrained")
        axes = fig.subplots(2, 1)
    else:
        fig = Figure(figsize=(6.4, 4.9), layout="constrained")
        axes = fig.subplots(1, 2)
    image = _panel(axes[0], d.words, d.causal_mask, d.causal, "causal mask", style)
    _panel(axes[1], d.padded_words, d.padding_mask, d.padding, "padding mask", style)
    if not narrow:
        axes[1].set_ylabel("")
    bar = fig.colorbar(image, ax=list(axes), orientation="horizontal", shrink=0.8, aspect=30)
    bar.set_label("attention weight")
    bar.outline.set_visible(False)
    fig.legend(
        handles=[
            Patch(
                facecolor=style.background,
                hatch="///",
                edgecolor=style.faint,
                label="masked: weight exactly 0",
            )
        ],
        loc="outside lower center",
    )
    return fig
