"""Multi-head attention: each head weighs the sentence its own way, for the cost of one head."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

from qkv import toy
from qkv.cost import attention_flops
from qkv.multihead import MultiHeadWeights, multi_head_attention
from qkv_site.figures._draw import heatmap
from qkv_site.figures._table import Table, matrix

N_HEADS = 4  # heads drawn: of d_head = 16 / 4 = 4 on the toy embeddings
SEED = 0
COST_T = 1024  # tokens for the cost comparison
COST_SPLITS = ((8, 64), (1, 512))  # (heads, d_head): the original Transformer's base model
NARROW = True

ALT = (
    f"Top: {N_HEADS} heatmaps of attention weights, one per head, on the toy sentence "
    f"“{' '.join(toy.SENTENCE)}”; in every row the heads disagree about which word gets "
    "the largest weight. "
    f"Bottom: two bars of the same length for the work of attention over {COST_T:,} tokens, "
    "one split into 8 equal segments for 8 heads of 64 dimensions and one whole for a single "
    "head of 512: both cost the same number of operations."
)
CAPTION = (
    f"{N_HEADS} heads with random projections (d_model = {toy.D_MODEL}, seed {SEED}) attend "
    "differently to the same six words. Splitting 512 dimensions into 8 heads of 64 costs "
    f"exactly the flops of one head of 512 (scores and blend, T = {COST_T:,})."
)


class Heads(NamedTuple):
    words: tuple[str, ...]
    weights: np.ndarray  # (heads, T, T)
    flops: dict  # (n_heads, d_head) -> flops of Q Kᵀ and weights @ V over all heads


@cache
def data() -> Heads:
    w = MultiHeadWeights.random(np.random.default_rng(SEED), toy.D_MODEL, n_heads=N_HEADS)
    x = toy.embeddings()
    weights = multi_head_attention(x, x, w).weights
    flops = {(h, d): attention_flops(COST_T, COST_T, d, d, n_heads=h) for h, d in COST_SPLITS}
    return Heads(toy.SENTENCE, weights, flops)


def tables() -> list[Table]:
    d = data()
    heads = [
        matrix(f"Head {h + 1}: attention weights", r"query \ key", d.words, d.words, w)
        for h, w in enumerate(d.weights)
    ]
    cost = Table(
        f"Floating-point operations of Q Kᵀ and weights · V over all heads, T = {COST_T:,}",
        ("heads", "d_head", "FLOPs"),
        tuple((h, dh, f) for (h, dh), f in d.flops.items()),
    )
    return [*heads, cost]


def build(style, narrow: bool = False) -> Figure:
    d = data()
    fig = Figure(figsize=(3.6, 6.4) if narrow else (5.6, 6.2), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=(3.6, 1) if narrow else (3.2, 1))
    axes = top.subplots(2, 2, sharex=True, sharey=True)
    vmax = float(np.ceil(d.weights.max() * 10) / 10)  # one colour scale for all heads
    for h, ax in enumerate(axes.flat):
        image = heatmap(ax, d.weights[h], d.words, d.words, style, vmax=vmax)
        ax.set_title(f"head {h + 1}", fontsize=11)
        if narrow:
            ax.tick_params(axis="x", labelrotation=90)
    for ax in axes[0]:
        ax.tick_params(labelbottom=False)
    bar = top.colorbar(
        image, ax=axes, orientation="horizontal" if narrow else "vertical", shrink=0.7, aspect=25
    )
    bar.set_label("weight")
    bar.outline.set_visible(False)

    ax = bottom.add_subplot()
    for row, (heads, d_head) in enumerate(COST_SPLITS):
        per_head = d.flops[(heads, d_head)] / heads / 1e9
        colour = style.primary if heads > 1 else style.accent
        for h in range(heads):  # one segment per head
            ax.barh(
                row,
                per_head,
                left=h * per_head,
                color=colour,
                edgecolor=style.background,
                linewidth=1.5,
                height=0.6,
            )
    ax.set_yticks(range(len(COST_SPLITS)), [f"{h} × {d}" for h, d in COST_SPLITS])
    ax.invert_yaxis()
    ax.set_xlabel(f"GFLOP, T = {COST_T:,} tokens")
    ax.set_ylabel("heads × d")
    return fig
