"""Where "it" looks, in each of a trained model's 270 heads: weight on "The", "cat", "mat"."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

from qkv_site.figures._trained import label, trace

KEYS = ("The", " cat", " mat")  # the first token and the two nouns
QUERY = " it"

ALT = (
    "Three heat maps, one each for the keys ‘The’, ‘cat’ and ‘mat’, of the weight the query "
    "‘it’ gives that key in every head of SmolLM2-135M (30 layers as rows, 9 heads as "
    "columns). The ‘The’ map is the brightest, more so from layer 13 on (0.62 on average "
    "there, 0.27 in layers 1 to 12): the first token takes the largest weight in 149 of the "
    "270 heads. The ‘cat’ and ‘mat’ maps are dark almost everywhere; ‘cat’ has one bright "
    "cell (layer 14, head 9, 0.80; no other head gives it more than 0.49), and no head gives "
    "‘mat’ more than 0.28."
)
CAPTION = (
    "Row 8 of every attention map (the query ‘it’ in “The cat sat on the mat because it was "
    "warm”), read at three keys. The source's story, that ‘it’ looks for a noun and finds "
    "‘mat’, is not what this model's attention does."
)


class ItRow(NamedTuple):
    keys: tuple[str, ...]
    weights: np.ndarray  # (len(KEYS), layers, heads): weight from QUERY on each key


@cache
def data() -> ItRow:
    t = trace()
    it = t.pieces.index(QUERY)
    columns = [t.pieces.index(k) for k in KEYS]
    return ItRow(KEYS, np.stack([t.weights[:, :, it, j] for j in columns]).astype(np.float64))


def build(style) -> Figure:
    d = data()
    n_layers, n_heads = d.weights.shape[1:]
    fig = Figure(figsize=(6.4, 8.2), layout="constrained")
    axes = fig.subplots(1, len(d.keys), sharey=True)
    for ax, key, w in zip(axes, d.keys, d.weights, strict=True):
        image = ax.imshow(w, cmap=style.cmap, vmin=0.0, vmax=1.0, interpolation="none",
                          aspect="equal")
        ax.set_title(f"on {label(key)}")
        ax.set_xticks(range(n_heads), range(1, n_heads + 1), fontsize=9)
        ax.set_xlabel("head")
        ax.tick_params(length=0)
        for spine in ax.spines.values():
            spine.set_visible(False)
        if key != KEYS[0]:  # the nouns: write their largest weight in its cell
            top = np.unravel_index(np.argmax(w), w.shape)
            ax.text(top[1], top[0], f"{w[top]:.2f}".removeprefix("0"), ha="center",
                    va="center", fontsize=7, color=style.text_on(image.cmap(image.norm(w[top]))))
    axes[0].set_yticks(range(n_layers), [str(i + 1) if i % 2 == 0 else "" for i in
                                         range(n_layers)], fontsize=9)
    axes[0].set_ylabel("layer")
    bar = fig.colorbar(image, ax=axes, location="bottom", shrink=0.7, aspect=40)
    bar.set_label(f"weight from {label(QUERY)} (the nouns' largest written in)")
    bar.outline.set_visible(False)
    return fig
