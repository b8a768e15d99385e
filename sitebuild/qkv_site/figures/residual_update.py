"""Where the output goes: attention's output, brought back to the model's width by W_O, is
added to the word's own vector, so it moves that vector instead of replacing it. Drawn for
the hand-built word drank, which comes out of the layer carrying some of milk's "dairy"."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

from qkv import self_attention, toy
from qkv_site.figures._table import Table

WORD = "drank"
PLANE = ("verb", "dairy")  # drank is a verb; what it hands back to itself is mostly dairy
NARROW = True

ALT = (
    "Left, arrows in the plane of two features, verb across and dairy up. Drank's own vector "
    "is an arrow of length 1 along verb. Attention's output for drank, brought back to the "
    "eight features, starts at that arrow's tip and points mostly up, 0.68 along dairy, and "
    "only 0.04 further along verb; their sum, the vector the next layer reads, is drank "
    "still a verb and now also carrying about two thirds of a unit of dairy. Right, all "
    "eight features of drank before and after: verb stays, person, dairy and container "
    "gain, and nothing is taken away."
)
CAPTION = (
    "The residual update on the hand-built toy: the layer adds its output to the word's "
    "vector, x + attention(x) W_O. Here W_O hands each value column back to the feature of "
    "the same name."
)


def output_projection() -> np.ndarray:
    """W_O for the hand-built toy: value column c back to the feature it is named after.
    (D_V, len(FEATURES))"""
    w_o = np.zeros((toy.D_V, len(toy.FEATURES)))
    for c, name in enumerate(toy.VALUE_COLUMNS):
        w_o[c, toy.FEATURES.index(name)] = 1.0
    return w_o


class Update(NamedTuple):
    features: tuple[str, ...]
    plane: tuple[str, str]
    before: np.ndarray  # (8,): the word's row of X
    change: np.ndarray  # (8,): its attention output times W_O
    after: np.ndarray  # (8,): before + change


@cache
def data() -> Update:
    x = toy.feature_embeddings()  # (T, 8)
    out = self_attention(x, toy.hand_built_projections()).output  # (T, D_V)
    i = toy.SENTENCE.index(WORD)
    change = out[i] @ output_projection()
    return Update(toy.FEATURES, PLANE, x[i], change, x[i] + change)


def tables() -> list[Table]:
    d = data()
    return [
        Table(
            f"{WORD}'s vector before and after the layer, feature by feature",
            ("feature", "before (x)", "attention output × W_O", "after (x + output × W_O)"),
            tuple(
                (f, float(b), float(c), float(a))
                for f, b, c, a in zip(d.features, d.before, d.change, d.after, strict=True)
            ),
        )
    ]


def _arrow(ax, start, end, colour, width=2.4, style="-|>", ls="-"):
    ax.annotate(
        "",
        xy=tuple(end),
        xytext=tuple(start),
        arrowprops={"arrowstyle": style, "color": colour, "lw": width, "ls": ls, "shrinkA": 0, "shrinkB": 0},
    )


def build(style, narrow: bool = False) -> Figure:
    d = data()
    if narrow:
        fig = Figure(figsize=(3.8, 6.6), layout="constrained")
        plane, bars = fig.subplots(2, 1)
    else:
        fig = Figure(figsize=(7.6, 3.6), layout="constrained")
        plane, bars = fig.subplots(1, 2, width_ratios=(1.3, 1))
    cols = [d.features.index(name) for name in d.plane]
    before, after = d.before[cols], d.after[cols]
    plane.axhline(0, color=style.grid, lw=1)
    plane.axvline(0, color=style.grid, lw=1)
    _arrow(plane, (0, 0), after, style.muted, width=1.6, ls="--")
    _arrow(plane, (0, 0), before, style.lines[0])
    _arrow(plane, before, after, style.lines[1])
    plane.text(before[0] / 2, -0.08, f"x ({WORD})", ha="center", va="top", color=style.lines[0], fontsize=11)
    plane.text(
        after[0] + 0.06,
        after[1] / 2,
        "+ output W_O",
        ha="left",
        va="center",
        color=style.lines[1],
        fontsize=11,
    )
    plane.text(
        0.0,
        1.0,
        "dashed: the sum,\nwhat the next layer reads",
        ha="left",
        va="top",
        color=style.muted,
        fontsize=10,
    )
    plane.set_xlim(-0.15, 1.9)
    plane.set_ylim(-0.35, 1.05)
    plane.set_aspect("equal")
    plane.set_xlabel(f"feature: {d.plane[0]}")
    plane.set_ylabel(f"feature: {d.plane[1]}")
    plane.set_title("added, not replaced")
    rows = np.arange(len(d.features))
    height = 0.38
    bars.barh(rows - height / 2, d.before, height=height, color=style.lines[0], label="before")
    bars.barh(rows + height / 2, d.after, height=height, color=style.lines[1], label="after")
    bars.set_yticks(rows, d.features)
    bars.set_ylim(len(d.features) - 0.4, -0.6)
    bars.set_xlim(0, 1.25)
    bars.set_xlabel("value of the feature")
    bars.set_title(f"{WORD}, feature by feature")
    bars.legend(loc="lower right")
    return fig
