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
# positions of a French decoder read the six-word English sentence.
DECODER = ("elle", "a", "bu")
DECODER_SEED = 7
D_K = toy.D_K  # the site's one toy head; the weights do not depend on d_v

ALT = (
    f"Heatmap of cross-attention weights with {len(DECODER)} rows, one per French decoder "
    f"word ({', '.join(DECODER)}) asking, and {len(toy.SENTENCE)} columns, one per word of "
    f"“{' '.join(toy.SENTENCE)}” being read: a {len(DECODER)} by {len(toy.SENTENCE)} "
    "rectangle, not a square. Beside each row its sum is printed, and every row sums to 1."
)
CAPTION = (
    "Queries from the decoder, keys and values from the English sentence (dₖ = "
    f"{D_K}). The weight matrix is Tq × Tk; each query still spreads exactly 1 over the "
    "positions it reads."
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
    return Cross(DECODER, toy.SENTENCE, weights, weights.sum(axis=-1))


def tables() -> list[Table]:
    d = data()
    return [
        matrix(
            "Cross-attention weights: one row per decoder query, one column per encoder key",
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
    ax.set_xlabel(f"key: English word (Tk = {len(d.key_words)})")
    ax.set_title(f"query: French word (Tq = {len(d.query_words)})", loc="left", fontweight="normal")
    return fig
