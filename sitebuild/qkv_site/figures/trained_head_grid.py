"""Every attention map of a trained model (30 layers x 9 heads) on the source's sentence."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.colors import PowerNorm
from matplotlib.figure import Figure

from qkv_site.figures._table import Table
from qkv_site.figures._trained import SENTENCE, trace

BLOCKS = ((0, 15), (15, 30))  # layers drawn side by side: 1-15 and 16-30
GAP = 2  # blank pixels between two maps
NARROW = True  # phones: one column of all 30 layers, taller

ALT = (
    "A grid of 270 small attention maps of SmolLM2-135M on “The cat sat on the mat because "
    "it was warm”, one per layer (rows, 1 to 30) and head (columns, 1 to 9), each a 10 by 10 "
    "lower triangle of weights. In 249 of the 270 maps the left column, the weight on the "
    "first token, is the brightest on average, and it is brighter in layers 16 to 30 than "
    "in layers 1 to 15. Four maps (layer 2 head 3, layer 3 head 2, layer 12 head 2, layer 17 "
    "head 1) are bright just below the diagonal instead: each word looking at the word "
    "before it."
)
CAPTION = (
    "All 30 × 9 attention maps of SmolLM2-135M (weights from Q4_1, run by qkv.smollm2) on "
    "the source's sentence: in each small map, row = query token, column = key token, both in "
    "sentence order; colour on a square-root scale so small weights stay visible."
)


class Grid(NamedTuple):
    pieces: tuple[str, ...]
    weights: np.ndarray  # (layers, heads, T, T)


@cache
def data() -> Grid:
    t = trace()
    return Grid(t.pieces, t.weights.astype(np.float64))


def tables() -> list[Table]:
    # 270 maps of T x T are too many numbers for a page (it must stay under 200 KB): each
    # head's map is summarised by the key that receives the most weight, averaged over the
    # T queries, and that mean weight.
    d = data()
    means = d.weights.mean(axis=2)  # (layers, heads, T)
    rows = tuple((f"{layer}.{head}", d.pieces[int(means[layer - 1, head - 1].argmax())],
                  float(means[layer - 1, head - 1].max()))
                 for layer in range(1, means.shape[0] + 1) for head in range(1, means.shape[1] + 1))
    return [Table("Key with the most weight in each head (mean over queries)",
                  ("layer.head", "key", "mean weight"), rows)]


def mosaic(weights: np.ndarray, layers: range) -> np.ndarray:
    """One image of the maps of ``layers``: a row per layer, a column per head, NaN gaps."""
    n_heads, t = weights.shape[1], weights.shape[-1]
    step = t + GAP
    image = np.full((len(layers) * step - GAP, n_heads * step - GAP), np.nan)
    mask = np.tril(np.ones((t, t), dtype=bool))  # above the diagonal: masked, left blank
    for row, layer in enumerate(layers):
        for head in range(n_heads):
            tile = np.where(mask, weights[layer, head], np.nan)
            image[row * step: row * step + t, head * step: head * step + t] = tile
    return image


def build(style, narrow: bool = False) -> Figure:
    d = data()
    n_layers, n_heads, t = d.weights.shape[0], d.weights.shape[1], d.weights.shape[-1]
    step = t + GAP
    blocks = ((0, n_layers),) if narrow else BLOCKS
    fig = Figure(figsize=(3.8, 9.0) if narrow else (7.0, 6.3), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(blocks)))
    norm = PowerNorm(gamma=0.5, vmin=0.0, vmax=1.0)
    for ax, (first, last) in zip(axes, blocks, strict=True):
        layers = range(first, last)
        image = ax.imshow(mosaic(d.weights, layers), cmap=style.cmap, norm=norm,
                          interpolation="none")
        ax.set_xticks(np.arange(n_heads) * step + (t - 1) / 2, range(1, n_heads + 1))
        ax.set_yticks(np.arange(len(layers)) * step + (t - 1) / 2,
                      [str(layer + 1) for layer in layers])
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.tick_params(length=0, labelsize=9 if narrow else 11)
        for spine in ax.spines.values():
            spine.set_visible(False)
    bar = fig.colorbar(image, ax=axes, location="bottom", shrink=0.8 if narrow else 0.6,
                       aspect=30 if narrow else 40)
    bar.set_ticks([0, 0.05, 0.2, 0.5, 1.0])
    bar.set_label("weight (square-root colour scale)" if narrow else
                  "attention weight (square-root colour scale)")
    bar.outline.set_visible(False)
    fig.suptitle("query = row, key = column" if narrow else
                 f"“{SENTENCE}”: query = row, key = column", fontsize=12)
    return fig
