"""Cross-attention: queries from one sequence, keys and values from another; rows sum to 1."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

from qkv import toy
from qkv.projections import cross_attention
from qkv_site.figures._draw import cell_text, heatmap
from qkv_site.figures._table import Table, matrix

# The chapter's example (snippets/three_kinds.py; a test keeps the two equal): three
# positions of a decoder read the toy sentence. Every vector and matrix is random, so the
# rows and columns are labelled by position (t for target, s for source), never by words
# of a sentence and its translation: random weights labelled so would read as an alignment.
DECODER = ("t1", "t2", "t3")
SOURCE = tuple(f"s{i + 1}" for i in range(len(toy.SENTENCE)))
DECODER_SEED = 7
D_K = toy.D_K  # the site's one toy head; the weights do not depend on d_v

ALT = (
    f"Heatmap of cross-attention weights with {len(DECODER)} rows, one per position of the "
    f"asking (target) sequence, {DECODER[0]} to {DECODER[-1]}, and {len(SOURCE)} columns, "
    f"one per position of the sequence being read (source), {SOURCE[0]} to {SOURCE[-1]}: a "
    f"{len(DECODER)} by {len(SOURCE)} rectangle, not a square. Every vector and matrix "
    "behind it is random, so the weights are noise, not an alignment. Beside each row its "
    "sum is printed, and every row sums to 1."
)
CAPTION = (
    f"Queries from a decoder (target positions {DECODER[0]}–{DECODER[-1]}), keys and values "
    f"from the toy sentence (source positions {SOURCE[0]}–{SOURCE[-1]}), dₖ = {D_K}, all "
    "random: the weights mean nothing. The matrix is Tq × Tk, and each query still spreads "
    "exactly 1 over the positions it reads."
)


class Cross(NamedTuple):
    query_words: tuple[str, ...]
    key_words: tuple[str, ...]
    weights: np.ndarray  # (Tq, Tk)
    row_sums: np.ndarray  # (Tq,)


@cache
def data() -> Cross:
    decoder = toy.embeddings(DECODER, seed=DECODER_SEED)
    weights = cross_attention(decoder, toy.embeddings(), toy.projections(D_K)).weights
    return Cross(DECODER, SOURCE, weights, weights.sum(axis=-1))


def tables() -> list[Table]:
    d = data()
    return [
        matrix(
            "Cross-attention weights (random): one row per target position, one column per source position",
            r"query \ key",
            d.query_words,
            d.key_words,
            d.weights,
        )
    ]


def build(style) -> Figure:
    d = data()
    fig = Figure(figsize=(5.0, 3.2), layout="constrained")  # every cell carries its number
    ax = fig.add_subplot()
    image = heatmap(ax, d.weights, d.query_words, d.key_words, style)
    for i, j in np.ndindex(d.weights.shape):
        cell_text(ax, image, i, j, f"{d.weights[i, j]:.2f}", style, fontsize=10)
    right = len(d.key_words) - 0.5
    ax.text(right + 0.3, -0.75, "row sum", ha="left", va="center", color=style.muted, fontsize=10)
    image.axes.tick_params(axis="y", labelsize=12)
    for i, total in enumerate(d.row_sums):
        ax.text(right + 0.3, i, f"{total:.2f}", ha="left", va="center", color=style.text, fontsize=11)
    ax.set_xlim(-0.5, right + 1.5)
    ax.set_ylim(len(d.query_words) - 0.5, -1.2)  # room above the rows for the header
    ax.set_xlabel(f"key: source position (Tk = {len(d.key_words)})")
    ax.set_title(f"query: target position (Tq = {len(d.query_words)})", loc="left", fontweight="normal")
    return fig
