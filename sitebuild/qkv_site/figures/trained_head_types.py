"""Four kinds of head in a trained model, each scored in all 30 x 9 heads over many texts."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

from qkv_site.figures._table import Table, matrix
from qkv_site.figures._trained import THRESHOLD, repeated, texts

TITLES = {  # kind -> what its target is, as the panels and tables name it
    "first": "first token",
    "previous": "previous token",
    "duplicate": "earlier copy of itself",
    "induction": "token after an earlier copy",
}
PANELS = {
    "first": "first token",
    "previous": "previous token",
    "duplicate": "earlier copy",
    "induction": "after a copy",
}  # short, for the titles
NARROW = True  # phones: the four grids two by two

ALT = (
    "Four grids of SmolLM2-135M-Instruct's 30 layers (rows) by 9 heads (columns), each cell "
    "the mean weight a head puts on one kind of target: the first token and the previous "
    "token over ten ordinary texts, an earlier copy of the current token and the token that "
    "followed that copy over four texts of 12 random tokens written twice. A head spreading "
    "its weight evenly would score 0.19, 0.19, 0.06 and 0.06. 195 heads put more than half "
    "their weight on the first token, all of them from layer 3 on; 4 on the previous token "
    "(layer 2 head 3, layer 3 head 2, layer 12 head 2, layer 17 head 1); 4 on an earlier "
    "copy (the most, layer 15 head 4, 0.77); and 5 on the token after an earlier copy, all "
    "in layers 18 and 19 (the most, layer 19 head 7, 0.88)."
)
CAPTION = (
    "What kind of head each head is, scored over many texts (heads above 0.5 marked with a "
    "dot). The even-spread baseline of each score is in its panel's title."
)


class HeadTypes(NamedTuple):
    kinds: tuple[str, ...]
    scores: np.ndarray  # (kinds, layers, heads): mean weight on the kind's targets
    baselines: np.ndarray  # (kinds,): the same for a head that spreads its weight evenly
    threshold: float


@cache
def data() -> HeadTypes:
    from qkv.lab import head_scores

    scores, baselines = [], []
    for kind in head_scores.KINDS:
        runs = repeated() if kind in ("duplicate", "induction") else texts()
        aims = [head_scores.targets(kind, run.ids) for run in runs]
        scores.append(
            np.mean([head_scores.score(run.weights, a) for run, a in zip(runs, aims, strict=True)], axis=0)
        )
        baselines.append(np.mean([head_scores.baseline(a) for a in aims]))
    return HeadTypes(head_scores.KINDS, np.stack(scores), np.array(baselines), THRESHOLD)


def tables() -> list[Table]:
    d = data()
    layers = range(1, d.scores.shape[1] + 1)
    heads = [f"head {h}" for h in range(1, d.scores.shape[2] + 1)]
    # three decimals: 1,080 numbers, and the page must stay under 200 KB
    return [
        matrix(
            f"Mean weight on the {TITLES[kind]} (even spread: {base:.2f})",
            "layer",
            layers,
            heads,
            scores.round(3),
        )
        for kind, scores, base in zip(d.kinds, d.scores, d.baselines, strict=True)
    ]


def build(style, narrow: bool = False) -> Figure:
    d = data()
    n_layers, n_heads = d.scores.shape[1:]
    fig = Figure(figsize=(3.9, 9.4) if narrow else (7.0, 6.4), layout="constrained")
    axes = fig.subplots(2, 2, sharey=True) if narrow else fig.subplots(1, 4, sharey=True)
    for ax, kind, scores, base in zip(axes.ravel(), d.kinds, d.scores, d.baselines, strict=True):
        image = ax.imshow(scores, cmap=style.cmap, vmin=0.0, vmax=1.0, interpolation="none", aspect="equal")
        ax.set_title(f"{PANELS[kind]}\n(even: {base:.2f})", fontsize=9 if narrow else 10)
        rows, cols = np.nonzero(scores > d.threshold)
        colours = [
            style.text_on(image.cmap(image.norm(scores[r, c]))) for r, c in zip(rows, cols, strict=True)
        ]
        ax.scatter(cols, rows, s=4, c=colours, linewidths=0)
        ax.set_xticks(range(0, n_heads, 2), range(1, n_heads + 1, 2), fontsize=8)
        ax.set_xlabel("head", fontsize=9)
        ax.tick_params(length=0)
        for spine in ax.spines.values():
            spine.set_visible(False)
    for ax in np.atleast_2d(axes)[:, 0]:
        ax.set_yticks(range(0, n_layers, 2), [str(i + 1) for i in range(0, n_layers, 2)], fontsize=8)
        ax.set_ylabel("layer")
    bar = fig.colorbar(
        image, ax=axes, location="bottom", shrink=0.8 if narrow else 0.6, aspect=30 if narrow else 40
    )
    bar.set_label("mean weight on the target (dot: above 0.5)")
    bar.outline.set_visible(False)
    return fig
