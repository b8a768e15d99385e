"""Soft lookup against hard: attention weighs every entry; an argmax returns the best one."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from qkv.dot_product import attention
from qkv_site.figures._table import Table

# The chapter's example (snippets/soft_lookup.py; a test keeps the two equal): a palette
# whose keys say how (warm, bright) each colour is and whose values are its RGB colour.
NAMES = ("red", "orange", "blue", "white")
KEYS = np.array([[1.0, 0.2], [0.8, 0.8], [-1.0, 0.0], [0.0, 1.0]])
VALUES = np.array([[1.0, 0.0, 0.0], [1.0, 0.5, 0.0], [0.0, 0.0, 1.0], [1.0, 1.0, 1.0]])
QUERY = np.array([[1.0, 0.0]])  # "something warm"

ALT = (
    "Two bar charts over the four entries of a colour palette, red, orange, blue and white, "
    "for the query “something warm”. Top, attention: every entry gets a positive weight, "
    "most of it red and orange and least of it blue, the weights add up to 1, and the "
    "answer is a blend of the four colours that no entry holds. Bottom, hard attention, an "
    "argmax: weight 1 on the best match, red, exactly 0 on the others, and the answer is red "
    "itself."
)
CAPTION = (
    "The palette lookup of this chapter, drawn. Soft: qkv.attention's weights and the colour "
    "they blend. Hard: all weight on the best-matching key, as an argmax gives it (a "
    "dictionary would give nothing: no key equals the query). The swatch on the right is "
    "each lookup's answer."
)


class Lookup(NamedTuple):
    names: tuple[str, ...]
    soft: np.ndarray  # (n,) attention weights of the query
    soft_answer: np.ndarray  # (3,) the blended RGB colour
    hard: np.ndarray  # (n,) one-hot on the best-matching key
    hard_answer: np.ndarray  # (3,) that key's value


@cache
def data() -> Lookup:
    weights, answer = attention(QUERY, KEYS, VALUES)
    hard = np.zeros(len(NAMES))
    hard[int(weights[0].argmax())] = 1.0
    return Lookup(NAMES, weights[0], answer[0], hard, hard @ VALUES)


def _swatch(ax, rgb, style):
    ax.add_patch(Rectangle((0, 0), 1, 1, facecolor=tuple(rgb), edgecolor=style.muted))
    ax.set_xlim(-0.05, 1.05)
    ax.set_ylim(-0.05, 1.05)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title("answer", fontsize=11)
    ax.text(
        0.5,
        -0.12,
        "RGB\n" + ", ".join(f"{c:.2f}" for c in rgb),
        ha="center",
        va="top",
        fontsize=10,
        color=style.text,
        transform=ax.transAxes,
    )


def tables() -> list[Table]:
    d = data()
    weights = tuple(zip(d.names, d.soft.tolist(), d.hard.tolist(), strict=True))
    answers = (("soft (blend)", *d.soft_answer.tolist()), ("hard (best key)", *d.hard_answer.tolist()))
    return [
        Table("Weight of each entry", ("entry", "soft lookup", "hard lookup"), weights),
        Table("Answer colour (red, green, blue)", ("lookup", "red", "green", "blue"), answers),
    ]


def build(style) -> Figure:
    d = data()
    fig = Figure(figsize=(5.0, 4.8), layout="constrained")
    grid = fig.add_gridspec(2, 2, width_ratios=(4, 1))
    x = np.arange(len(d.names))
    best = int(d.hard.argmax())
    soft_ax = fig.add_subplot(grid[0, 0])
    hard_ax = fig.add_subplot(grid[1, 0], sharex=soft_ax, sharey=soft_ax)
    for row, ax, weights, answer, title, labels in (
        (0, soft_ax, d.soft, d.soft_answer, "Soft: attention", [f"{w:.2f}" for w in d.soft]),
        (1, hard_ax, d.hard, d.hard_answer, "Hard: argmax, the best key", [f"{w:g}" for w in d.hard]),
    ):
        # Each bar is painted in its entry's own colour (the value it hands over), so
        # "red" is red; the outline keeps white visible and marks the best match.
        bars = ax.bar(
            x,
            weights,
            color=[tuple(v) for v in VALUES],
            width=0.7,
            edgecolor=style.text,
            linewidth=[2.0 if i == best else 0.6 for i in x],
        )
        ax.bar_label(bars, labels, padding=2, fontsize=11, color=style.text)
        ax.set_title(title, loc="left")
        ax.set_ylabel("weight")
        ax.set_ylim(0, 1.2)
        ax.set_yticks([0, 0.5, 1])
        _swatch(fig.add_subplot(grid[row, 1]), answer, style)
    soft_ax.tick_params(labelbottom=False)
    hard_ax.set_xticks(x, d.names)
    hard_ax.set_xlabel("entry (key) of the palette")
    return fig
