"""How multi-head attention moves the numbers: split the columns, attend per head, lay the
heads side by side again, project with W_O. Every panel is a real array of the toy layer."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from qkv import toy
from qkv.dot_product import attention
from qkv.multihead import MultiHeadWeights, merge_heads, multi_head_attention, split_heads
from qkv_site.figures._draw import heatmap
from qkv_site.figures._table import Table, matrix

N_HEADS = 4  # on the toy width of 16: heads of 4 columns
SEED = 0
NARROW = True

ALT = (
    f"Multi-head attention on the toy sentence “{' '.join(toy.SENTENCE)}”, top to bottom. "
    f"1: the queries Q = X W_Q, {len(toy.SENTENCE)} rows by {toy.D_MODEL} columns, with "
    f"{N_HEADS} coloured bands of {toy.D_MODEL // N_HEADS} columns, one per head (keys and "
    "values are cut the same way). 2: each head attends on its own band alone: its own "
    "6 by 6 weight map, every row summing to 1, and its own output of 6 rows by "
    f"{toy.D_MODEL // N_HEADS} columns. 3: the {N_HEADS} head outputs laid side by side "
    f"again, 6 by {toy.D_MODEL}, each in its band's colour. 4: that concatenation times W_O "
    f"gives the layer's output, 6 by {toy.D_MODEL}, in which every column mixes all heads."
)
CAPTION = (
    f"Split, attend, concatenate, project: one multi-head layer ({N_HEADS} heads, "
    f"d_model = {toy.D_MODEL}, d_head = {toy.D_MODEL // N_HEADS}, random projections, seed "
    f"{SEED}) on the six toy words. The colours follow each head's columns; no number crosses "
    "from one band to another until W_O."
)


class Flow(NamedTuple):
    words: tuple[str, ...]
    queries: np.ndarray  # (T, d_model): X W_Q, before the split
    weights: np.ndarray  # (heads, T, T)
    per_head: np.ndarray  # (heads, T, d_head)
    concat: np.ndarray  # (T, d_model)
    output: np.ndarray  # (T, d_model): concat @ W_O


@cache
def data() -> Flow:
    w = MultiHeadWeights.random(np.random.default_rng(SEED), toy.D_MODEL, n_heads=N_HEADS)
    x = toy.embeddings()  # (T, d_model)
    q, k, v = (split_heads(x @ m, N_HEADS) for m in (w.w_q, w.w_k, w.w_v))  # (heads, T, d_head)
    weights, per_head = attention(q, k, v)  # (heads, T, T), (heads, T, d_head)
    concat = merge_heads(per_head)  # (T, d_model)
    output = concat @ w.w_o
    assert np.allclose(output, multi_head_attention(x, x, w).output)  # the layer itself
    return Flow(toy.SENTENCE, x @ w.w_q, weights, per_head, concat, output)


def _head_colours(style) -> tuple[str, ...]:
    return style.lines[:N_HEADS]


def _bands(ax, n_rows, d_head, colours):
    """Frame each head's block of columns in its colour."""
    for h, colour in enumerate(colours):
        ax.add_patch(
            Rectangle(
                (h * d_head - 0.5, -0.5),
                d_head,
                n_rows,
                fill=False,
                edgecolor=colour,
                linewidth=2.5,
                clip_on=False,
            )
        )


def _matrix(ax, matrix, rows, title, style, limit, bands=None):
    heatmap(ax, matrix, rows, [""] * matrix.shape[1], style, vmin=-limit, vmax=limit, cmap="PuOr_r")
    ax.set_xticks([])
    ax.set_title(title, loc="left", fontsize=11)
    if bands:
        _bands(ax, matrix.shape[0], *bands)


def tables() -> list[Table]:
    d = data()
    return [
        matrix(f"Head {h + 1}: attention weights", r"query \ key", d.words, d.words, w)
        for h, w in enumerate(d.weights)
    ]


def build(style, narrow: bool = False) -> Figure:
    d = data()
    colours = _head_colours(style)
    d_head = d.per_head.shape[-1]
    limit = float(np.abs(np.concatenate([d.queries, d.concat, d.output])).max())
    t = len(d.words)
    if narrow:
        fig = Figure(figsize=(3.6, 11.4), layout="constrained")
        top, middle, bottom = fig.subfigures(3, 1, height_ratios=(1.3, 4.4, 3.8))
        head_figs = middle.subfigures(2, 2).flat
    else:
        fig = Figure(figsize=(5.6, 7.0), layout="constrained")
        top, middle, bottom = fig.subfigures(3, 1, height_ratios=(1.5, 2.8, 1.6))
        head_figs = middle.subfigures(1, N_HEADS).flat

    ax = top.add_subplot()
    _matrix(
        ax, d.queries, d.words, f"1. Q = X W_Q, split into {N_HEADS} heads", style, limit, (d_head, colours)
    )
    for h, colour in enumerate(colours):  # name each band above it, in its colour
        ax.text(
            h * d_head + (d_head - 1) / 2,
            -0.7,
            f"head {h + 1}",
            color=colour,
            ha="center",
            va="bottom",
            fontsize=10,
            fontweight="bold",
        )
    ax.set_title(ax.get_title(loc="left"), loc="left", fontsize=11, pad=18)

    sizes = "" if narrow else f" ({t} × {t}), then output ({t} × {d_head})"
    middle.suptitle(
        f"2. each head alone: weights{sizes or ', then output'}",
        x=0.02,
        ha="left",
        fontsize=11,
        fontweight="bold",
        color=style.text,
    )
    vmax = float(np.ceil(d.weights.max() * 10) / 10)  # one colour scale for every head
    for h, sub in enumerate(head_figs):
        w_ax, o_ax = sub.subplots(2, 1)
        weights_mesh = heatmap(w_ax, d.weights[h], [""] * t, [""] * t, style, vmax=vmax)
        w_ax.set_yticks([])
        w_ax.set_xticks([])
        w_ax.set_ylabel("query", fontsize=9, labelpad=1)
        w_ax.set_xlabel("key", fontsize=9, labelpad=1)
        o_ax.set_ylabel("query", fontsize=9, labelpad=1)
        w_ax.set_title(f"head {h + 1}", color=colours[h], fontsize=11)
        for spine in w_ax.spines.values():
            spine.set_visible(True)
            spine.set_edgecolor(colours[h])
            spine.set_linewidth(2)
        values_mesh = heatmap(
            o_ax, d.per_head[h], [""] * t, [""] * d_head, style, vmin=-limit, vmax=limit, cmap="PuOr_r"
        )
        o_ax.set_xticks([])
        o_ax.set_yticks([])
        _bands(o_ax, t, d_head, [colours[h]])

    if narrow:
        c_ax, o_ax, w_bar, v_bar = bottom.subplots(4, 1, height_ratios=(1, 1, 0.09, 0.09))
    else:
        (c_ax, o_ax), (w_bar, v_bar) = bottom.subplots(2, 2, height_ratios=(1, 0.09))
    _matrix(c_ax, d.concat, d.words, "3. concatenate", style, limit, (d_head, colours))
    _matrix(o_ax, d.output, d.words if narrow else [""] * t, "4. × W_O = output", style, limit)
    if not narrow:
        o_ax.set_yticks([])
    # one scale for the heads' weights, one for every other panel's entries
    for bar_ax, mesh, label in (
        (w_bar, weights_mesh, "attention weight (step 2, top)"),
        (v_bar, values_mesh, "entry of Q, head outputs, output"),
    ):
        bar = bottom.colorbar(mesh, cax=bar_ax, orientation="horizontal")
        bar.set_label(label, fontsize=10)
        bar.outline.set_visible(False)
    return fig
