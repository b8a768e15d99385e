"""Queries and keys as arrows in one space: the hand-built word drank's query and the keys
of its sentence, where a score is how far the query reaches along a key."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

from qkv import toy
from qkv.dot_product import softmax
from qkv.projections import project
from qkv_site.figures._table import Table

QUERY = "drank"
PLANE = ("liquid", "person")  # the two key columns drank's query has entries in
NARROW = True  # stacks the two panels on phones

ALT = (
    "Left, arrows in the plane of two key features, liquid across and person up. Drank's "
    "query is a long arrow reaching 8 along liquid and 4 along person; milk's key is a short "
    "arrow along liquid, she's along person; the keys of drank, from, a and cup have nothing "
    "in this plane, so they sit at the origin. Dashed lines drop from the query's tip onto "
    "each key's direction: the score is how far the query reaches along the key, 8 for milk, "
    "4 for she, 0 for the rest. Right, the weights those scores give after the division by "
    "the square root of 8 and the softmax: milk about 0.68, she about 0.16, each other word "
    "about 0.04."
)
CAPTION = (
    "A query and the keys live in one space, and a score is their alignment: the query's "
    "reach along a key, times the key's length. Drawn from the hand-built toy, whose query "
    "for drank has entries only in these two key columns, so the plane holds every score "
    "exactly."
)


class Arrows(NamedTuple):
    words: tuple[str, ...]
    asker: str  # the word whose query is drawn
    plane: tuple[str, str]
    query: np.ndarray  # (2,): drank's query in the plane
    off_plane: float  # length of the query's part outside the plane (0: the plane is exact)
    keys: np.ndarray  # (T, 2): each word's key in the plane
    scores: np.ndarray  # (T,): q · k_j over all D_K columns
    weights: np.ndarray  # (T,): softmax(scores / √d_k)


@cache
def data() -> Arrows:
    q, k, _ = project(toy.feature_embeddings(), toy.hand_built_projections())  # (T, 8) each
    columns = [toy.FEATURES.index(name) for name in PLANE]
    rest = [c for c in range(q.shape[1]) if c not in columns]
    query = q[toy.SENTENCE.index(QUERY)]
    scores = k @ query  # (T,): the full dot products, every column
    weights = softmax(scores / np.sqrt(q.shape[1]))
    return Arrows(
        toy.SENTENCE,
        QUERY,
        PLANE,
        query[columns],
        float(np.linalg.norm(query[rest])),
        k[:, columns],
        scores,
        weights,
    )


def tables() -> list[Table]:
    d = data()
    return [
        Table(
            f"The keys in the plane of {d.plane[0]} and {d.plane[1]}, "
            f"and {QUERY}'s score and weight for each",
            ("word", f"key: {d.plane[0]}", f"key: {d.plane[1]}", "score q · k", "weight"),
            tuple(
                (w, float(x), float(y), float(s), float(a))
                for w, (x, y), s, a in zip(d.words, d.keys, d.scores, d.weights, strict=True)
            ),
        ),
        Table(
            f"{QUERY}'s query in the plane",
            ("query of", d.plane[0], d.plane[1], "length outside the plane"),
            ((d.asker, float(d.query[0]), float(d.query[1]), d.off_plane),),
        ),
    ]


def _arrow(ax, xy, colour, width):
    ax.annotate(
        "", xy=tuple(xy), xytext=(0, 0), arrowprops={"arrowstyle": "-|>", "color": colour, "lw": width}
    )


def build(style, narrow: bool = False) -> Figure:
    d = data()
    if narrow:
        fig = Figure(figsize=(3.6, 6.4), layout="constrained")
        plane, bars = fig.subplots(2, 1, height_ratios=(1, 1))
    else:
        fig = Figure(figsize=(7.6, 3.4), layout="constrained")
        plane, bars = fig.subplots(1, 2, width_ratios=(1.5, 1))
    qx, qy = d.query
    plane.axhline(0, color=style.grid, lw=1)
    plane.axvline(0, color=style.grid, lw=1)
    _arrow(plane, d.query, style.primary, 2.4)
    plane.text(qx - 0.2, qy + 0.35, f"query ({QUERY})", ha="right", color=style.primary, fontsize=11)
    at_origin = []
    for word, key, score in zip(d.words, d.keys, d.scores, strict=True):
        if not key.any():
            at_origin.append(word)
            continue
        _arrow(plane, key * 1.0, style.lines[1], 2.4)
        unit = key / np.linalg.norm(key)
        foot = (d.query @ unit) * unit  # where the query's tip drops onto the key's direction
        plane.plot([qx, foot[0]], [qy, foot[1]], ls="--", color=style.muted, lw=1.3)
        plane.plot(*foot, marker="o", color=style.muted)
        label = f"key ({word})"
        offset = (0.3, 0.0) if unit[0] > unit[1] else (0.3, 0.6)
        plane.text(*(key + offset), label, color=style.lines[1], fontsize=11, va="center")
        reach = (0.0, -0.55) if unit[0] > unit[1] else (0.3, 0.2)
        plane.text(
            *(foot + reach),
            f"q·k = {score:g}",
            color=style.text,
            fontsize=11,
            ha="center" if unit[0] > unit[1] else "left",
        )
    plane.plot(0, 0, marker="o", color=style.lines[1])
    plane.text(0.2, -0.85, "at 0: keys of " + ", ".join(at_origin), color=style.muted, fontsize=10)
    plane.set_xlim(-0.6, 9.6)
    plane.set_ylim(-1.2, 5.2)
    plane.set_aspect("equal")
    plane.set_xlabel(f"key column: {d.plane[0]}")
    plane.set_ylabel(f"key column: {d.plane[1]}")
    plane.set_title("score = the query's reach along a key" if not narrow else "score = reach along a key")
    order = np.arange(len(d.words))[::-1]
    bars.barh(order, d.weights, color=style.primary)
    bars.set_yticks(order, d.words)
    bars.set_xlim(0, 1)
    bars.set_xlabel("weight")
    bars.set_title(f"{QUERY}'s weights")
    for y, weight in zip(order, d.weights, strict=True):
        bars.text(weight + 0.02, y, f"{weight:.2f}", va="center", color=style.text, fontsize=10)
    return fig
