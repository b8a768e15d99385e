"""Attention as kernel regression: with keys of one norm, softmax(q·k) is the normalised
Gaussian kernel of the distance ‖q − k‖ (Nadaraya 1964, Watson 1964); with keys of differing
norms it is not."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

from qkv.dot_product import attention
from qkv_site.figures._table import Table

N_KEYS, D_K, SEED = 40, 4, 0

ALT = (
    "Two scatter plots of attention weight (log scale) against the distance between a query "
    "and each of 40 keys, with the curve of a Gaussian kernel of that distance, normalised "
    "over the keys. Left, keys all of norm 1: every weight lies on the curve, to within "
    "10⁻¹⁵ relative. Right, keys with norms from 0.5 to 1.5: the weights scatter off the curve, "
    "the longer keys above it, and the nearest key is no longer the one with the most weight."
)
CAPTION = (
    "softmax(q·k) against the Nadaraya-Watson weights exp(−‖q − k‖²/2) / Σ exp(−‖q − k′‖²/2), "
    "for one query of norm 1 and 40 random keys in 4 dimensions, unscaled scores. "
    "Since ‖q − k‖² = ‖q‖² + ‖k‖² − 2 q·k, the two agree when every ‖k‖ is the same."
)


class Panel(NamedTuple):
    norms: np.ndarray  # (N_KEYS,) each key's norm
    distance: np.ndarray  # (N_KEYS,) ‖q - k‖
    attention: np.ndarray  # (N_KEYS,) softmax(q·k)
    kernel: np.ndarray  # (N_KEYS,) normalised exp(-‖q - k‖² / 2)


class Kernel(NamedTuple):
    same_norm: Panel
    mixed_norm: Panel


def _panel(query: np.ndarray, keys: np.ndarray) -> Panel:
    values = np.zeros((len(keys), 1))  # only the weights are drawn
    weights = attention(query[None], keys, values, scale=False).weights[0]
    distance = np.linalg.norm(query - keys, axis=1)
    kernel = np.exp(-(distance**2) / 2)
    return Panel(np.linalg.norm(keys, axis=1), distance, weights, kernel / kernel.sum())


@cache
def data() -> Kernel:
    rng = np.random.default_rng(SEED)
    query = rng.normal(size=D_K)
    query /= np.linalg.norm(query)  # (D_K,), norm 1
    directions = rng.normal(size=(N_KEYS, D_K))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)  # (N_KEYS, D_K)
    norms = rng.uniform(0.5, 1.5, size=N_KEYS)
    return Kernel(_panel(query, directions), _panel(query, directions * norms[:, None]))


def tables() -> list[Table]:
    d = data()
    columns = ("key", "norm", "distance to the query", "attention weight", "kernel weight")
    return [
        Table(
            title,
            columns,
            tuple((i + 1, *row) for i, row in enumerate(np.column_stack(p).tolist())),
        )
        for title, p in (("Keys of norm 1", d.same_norm), ("Keys of norm 0.5 to 1.5", d.mixed_norm))
    ]


def build(style) -> Figure:
    d = data()
    fig = Figure(figsize=(6.4, 3.6), layout="constrained")
    left, right = fig.subplots(1, 2, sharey=True)
    panels = ((left, d.same_norm, "keys of norm 1"), (right, d.mixed_norm, "norms 0.5 to 1.5"))
    for ax, panel, title in panels:
        order = np.argsort(panel.distance)
        ax.plot(panel.distance[order], panel.kernel[order], color=style.muted, label="Gaussian kernel")
        ax.scatter(panel.distance, panel.attention, color=style.primary, s=18, zorder=3, label="softmax(q·k)")
        ax.set_yscale("log")
        ax.set_title(title, fontsize=11)
        ax.set_xlabel("distance ‖q − k‖")
        ax.grid(True)
    left.set_ylabel("weight (log scale)")
    left.legend(loc="lower left", fontsize=9)
    return fig
