"""The four stages for one query: raw scores, scaled scores, softmax weights, blended output."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

from qkv import toy
from qkv.dot_product import attention, scale_factor, softmax
from qkv.projections import project
from qkv_site.figures._draw import heatmap
from qkv_site.figures._table import Table, matrix

WORDS = toy.SENTENCE  # the chapter's six tokens (snippets/step_by_step.py)
QUERY = "she"  # the row of the chapter's table whose scores spread most
D_K, D_V = toy.D_K, toy.D_V  # the site's one toy configuration
NARROW = True  # stacks the four panels on phones

ALT = (
    f"Four panels following the query “{QUERY}” through attention over the keys "
    f"{', '.join(WORDS)} with dₖ = {D_K}. 1: raw dot products, spread over about eight units. "
    f"2: the same scores divided by √{D_K} ≈ 2.83, now within about three units. 3: softmax "
    "turns them into weights between 0 and 1 that add up to 1. 4: the output is the weighted "
    f"blend of the six value vectors, each {D_V} numbers wide, component by component."
)
CAPTION = (
    f"One row of attention for “{QUERY}” (six tokens of the random toy, dₖ = {D_K}, "
    f"d_v = {D_V}). Stages 1 and 2 share an axis, so the division by √dₖ is visible as a "
    "shrink. Stage 4 shows the six value vectors as they are, each row labelled with the "
    "weight it gets, and below them the output: the sum of the rows times their weights."
)


class Stages(NamedTuple):
    words: tuple[str, ...]
    raw: np.ndarray  # (T,) q · k_j
    scaled: np.ndarray  # (T,) q · k_j / √d_k
    weights: np.ndarray  # (T,) softmax of scaled
    values: np.ndarray  # (T, d_v)
    output: np.ndarray  # (d_v,) weights @ values


@cache
def data() -> Stages:
    q, k, v = project(toy.embeddings(WORDS), toy.projections(D_K, D_V))
    i = WORDS.index(QUERY)
    raw = k @ q[i]  # (T,): the query against every key
    scaled = raw * scale_factor(True, D_K)
    weights = softmax(scaled)
    output = attention(q, k, v).output[i]
    return Stages(WORDS, raw, scaled, weights, v, output)


def tables() -> list[Table]:
    d = data()
    stages = tuple(zip(d.words, d.raw.tolist(), d.scaled.tolist(), d.weights.tolist(), strict=True))
    value_columns = tuple(f"v[{i}]" for i in range(d.values.shape[1]))
    return [
        Table(
            f"The query “{QUERY}” against every key, stage by stage",
            ("key", "raw score q·k", "scaled score", "softmax weight"),
            stages,
        ),
        matrix(
            "Value vectors, and the output: the weighted sum of the values",
            "row",
            [*d.words, "output"],
            value_columns,
            [*d.values, d.output],
        ),
    ]


def build(style, narrow: bool = False) -> Figure:
    d = data()
    if narrow:
        fig = Figure(figsize=(3.6, 9.6), layout="constrained")
        axes = fig.subplots(4, 1).reshape(2, 2)
    else:
        fig = Figure(figsize=(5.6, 5.6), layout="constrained")
        axes = fig.subplots(2, 2)
    x = np.arange(len(d.words))
    top = 1.15 * float(np.abs(d.raw).max())
    panels = (
        (axes[0, 0], d.raw, "1. raw scores $q\\cdot k$", "score", "{:.1f}", style.unscaled),
        (axes[0, 1], d.scaled, "2. scaled $q\\cdot k/\\sqrt{d_k}$", "score", "{:.1f}", style.scaled),
        (axes[1, 0], d.weights, "3. softmax weights", "weight", "{:.2f}", style.primary),
    )
    for ax, y, title, ylabel, fmt, colour in panels:
        bars = ax.bar(x, y, color=colour, width=0.7)
        ax.bar_label(bars, [fmt.format(v) for v in y], padding=2, fontsize=10, color=style.text)
        ax.axhline(0, color=style.faint, linewidth=1)
        ax.set_xticks(x, d.words, rotation=45, ha="right", rotation_mode="anchor")
        ax.set_title(title, loc="left")
        ax.set_ylabel(ylabel)
    for ax in (axes[0, 0], axes[0, 1]):
        ax.set_ylim(min(0, -top), top)
    axes[1, 0].set_ylim(0, 1.15)

    ax = axes[1, 1]
    rows = np.vstack([d.values, d.output])  # (T + 1, d_v)
    limit = float(np.abs(rows).max())
    labels = [f"{w} ×{p:.2f}" for w, p in zip(d.words, d.weights, strict=True)] + ["= output"]
    columns = [str(c + 1) for c in range(D_V)]
    mesh = heatmap(ax, rows, labels, columns, style, vmin=-limit, vmax=limit, cmap="PuOr_r")
    bar = fig.colorbar(mesh, ax=ax, shrink=0.9, pad=0.02)
    bar.set_label("value", fontsize=10)
    bar.outline.set_visible(False)
    ax.set_xticks(range(D_V), columns, rotation=0, ha="center")
    ax.axhline(len(d.words) - 0.5, color=style.background, linewidth=3)
    ax.set_title("4. blend of values", loc="left")
    ax.set_xlabel("component")
    ax.set_aspect("auto")
    return fig
