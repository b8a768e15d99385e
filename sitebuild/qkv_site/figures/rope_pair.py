"""RoPE on one pair of numbers: each position turns it by the same angle, so a query and a
key keep the angle between them when both move along the sentence together."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Arc, Circle

from qkv.rope import rope
from qkv_site.figures._table import Table

POSITIONS = tuple(range(6))  # the left panel: one query at positions 0 to 5
QUERY = (1.0, 0.0)  # one pair (d = 2): RoPE turns it by one radian per position
KEY = (0.75 * np.cos(0.6), 0.75 * np.sin(0.6))  # shorter, and turned 0.6 rad from the query
CASES = ((2, 0), (5, 3))  # (query position, key position): the same offset, 2
NARROW = True  # stacks the three panels on phones

ALT = (
    "Three circles. Left, one pair of a query's numbers drawn at positions 0 to 5: each step "
    "along the sentence turns it by the same angle, one radian. Middle, a query at position 2 "
    "and a key at position 0; right, a query at 5 and a key at 3. Both arrows are turned "
    "further on the right, yet the angle between them is the same, 1.4 radians, and so is "
    "their dot product: only the offset of 2 counts."
)
CAPTION = (
    "Rotary position embedding on a single pair of numbers. A head of width dₖ has dₖ/2 such "
    "pairs; the others turn the same way, each at its own, slower speed."
)


class Turning(NamedTuple):
    positions: tuple[int, ...]
    turned: np.ndarray  # (T, 2): the query's pair at each position
    angles: np.ndarray  # (T,): its direction in radians, counted on from 0 without wrapping
    cases: tuple[tuple[int, int], ...]  # (m, n) for the middle and right panels
    queries: np.ndarray  # (cases, 2): the query turned to m
    keys: np.ndarray  # (cases, 2): the key turned to n
    between: np.ndarray  # (cases,): the angle from the key to the query, radians
    scores: np.ndarray  # (cases,): the query's dot product with the key


@cache
def data() -> Turning:
    query, key = np.array([QUERY]), np.array([KEY])  # (1, 2) each: one token, one pair
    turned = np.concatenate([rope(query, [p]) for p in POSITIONS])  # (T, 2)
    angles = np.unwrap(np.arctan2(turned[:, 1], turned[:, 0]))
    queries = np.concatenate([rope(query, [m]) for m, _ in CASES])  # (cases, 2)
    keys = np.concatenate([rope(key, [n]) for _, n in CASES])
    between = np.arctan2(queries[:, 1], queries[:, 0]) - np.arctan2(keys[:, 1], keys[:, 0])
    between = np.mod(between, 2 * np.pi)  # in [0, 2π)
    scores = (queries * keys).sum(axis=-1)
    return Turning(POSITIONS, turned, angles, CASES, queries, keys, between, scores)


def tables() -> list[Table]:
    d = data()
    return [
        Table(
            "One pair of a query, turned by position",
            ("position", "first number", "second number", "direction (radians)"),
            tuple(
                (p, *map(float, xy), float(a))
                for p, xy, a in zip(d.positions, d.turned, d.angles, strict=True)
            ),
        ),
        Table(
            "A query and a key two positions apart",
            ("query position", "key position", "angle between (radians)", "dot product"),
            tuple(
                (m, n, float(b), float(s)) for (m, n), b, s in zip(d.cases, d.between, d.scores, strict=True)
            ),
        ),
    ]


def _circle(ax, style, bottom=-1.8):
    ax.add_patch(Circle((0, 0), 1.0, fill=False, edgecolor=style.grid, linewidth=1.2))
    ax.set_xlim(-1.45, 1.45)
    ax.set_ylim(bottom, 1.45)
    ax.set_aspect("equal")
    ax.set_axis_off()


def _beyond(xy, gap=0.25):
    """A point ``gap`` past the tip of the arrow to ``xy``, for its label."""
    xy = np.asarray(xy)
    return xy + gap * xy / np.linalg.norm(xy)


def _arrow(ax, xy, colour, width=2.2):
    ax.annotate(
        "", xy=tuple(xy), xytext=(0, 0), arrowprops={"arrowstyle": "-|>", "color": colour, "lw": width}
    )


def build(style, narrow: bool = False) -> Figure:
    d = data()
    if narrow:
        fig = Figure(figsize=(3.4, 8.6), layout="constrained")
        axes = fig.subplots(3, 1)
    else:
        fig = Figure(figsize=(7.6, 3.3), layout="constrained")
        axes = fig.subplots(1, 3)
    left, *pairs = axes
    _circle(left, style)
    for p, xy in zip(d.positions, d.turned, strict=True):
        _arrow(left, xy, style.primary)
        left.text(*_beyond(xy, 0.22), str(p), ha="center", va="center", color=style.text, fontsize=12)
    left.set_title("a query at positions 0–5")
    for ax, (m, n), q, k, between, score in zip(
        pairs, d.cases, d.queries, d.keys, d.between, d.scores, strict=True
    ):
        _circle(ax, style)
        _arrow(ax, k, style.lines[1])
        _arrow(ax, q, style.primary)
        ax.text(*_beyond(q), "q", ha="center", va="center", color=style.primary, fontsize=12)
        ax.text(*_beyond(k), "k", ha="center", va="center", color=style.lines[1], fontsize=12)
        start = np.degrees(np.arctan2(k[1], k[0]))
        end = start + np.degrees(between)
        ax.add_patch(Arc((0, 0), 0.7, 0.7, theta1=start, theta2=end, color=style.muted, lw=1.5))
        label = f"{between:.1f} rad apart, q·k = {score:.2f}"
        ax.text(0, -1.62, label, ha="center", va="center", color=style.text, fontsize=11)
        ax.set_title(f"query at {m}, key at {n}")
    return fig
