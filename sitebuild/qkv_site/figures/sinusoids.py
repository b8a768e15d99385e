"""The original transformer's position vectors, before RoPE: a table of sines and cosines,
one row per position, whose columns turn slower and slower from left to right."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

from qkv.positions import sinusoidal_positions
from qkv_site.figures._draw import heatmap
from qkv_site.figures._table import Table, matrix

T, D = 32, 16  # positions 0..31, vectors 16 wide: eight (sin, cos) pairs
TRACED = (0, 4, 8)  # the sine columns drawn as curves on the right: pairs 0, 2 and 4
NARROW = True

ALT = (
    f"Left, a grid with one row for each of {T} positions and one column for each of {D} "
    "numbers, coloured from -1 to 1 by a scale beside it. The leftmost columns flicker from "
    "row to row; further right the colours change more and more slowly, and the last "
    "columns barely change at all over the 32 positions. Right, three columns as curves "
    "over the positions: column 0 repeats about every 6 positions, column 4 about every 63 "
    "(so only half a wave fits), column 8 about every 628, almost a straight line."
)
CAPTION = (
    "Sinusoidal position vectors (Vaswani et al., 2017), added to the embeddings before the "
    "first layer: each position gets its own row, and pair i turns at the frequency "
    "10,000^(−2i/d). RoPE, below, uses the same frequencies to turn queries and keys instead."
)


class Positions(NamedTuple):
    positions: np.ndarray  # (T,)
    vectors: np.ndarray  # (T, D): sin at even columns, cos at odd ones
    traced: tuple[int, ...]  # the columns drawn as curves
    periods: np.ndarray  # (len(traced),): positions per full turn, 2π / ω


@cache
def data() -> Positions:
    vectors = sinusoidal_positions(T, D)
    frequencies = 10_000.0 ** (-np.arange(0, D, 2) / D)  # ω_i of pair i
    periods = np.array([2 * np.pi / frequencies[c // 2] for c in TRACED])
    return Positions(np.arange(T), vectors, TRACED, periods)


def tables() -> list[Table]:
    d = data()
    return [
        matrix(f"The {T} position vectors, {D} numbers each", "position", d.positions, range(D), d.vectors),
        Table(
            "Positions per full turn of the columns drawn as curves",
            ("column", "positions per turn"),
            tuple((c, float(p)) for c, p in zip(d.traced, d.periods, strict=True)),
        ),
    ]


def build(style, narrow: bool = False) -> Figure:
    d = data()
    if narrow:
        fig = Figure(figsize=(3.6, 8.4), layout="constrained")
        grid, curves = fig.subplots(2, 1, height_ratios=(1.6, 1))
    else:
        fig = Figure(figsize=(7.6, 4.4), layout="constrained")
        grid, curves = fig.subplots(1, 2, width_ratios=(1, 1.1))
    labels = [str(p) if p % 4 == 0 else "" for p in d.positions]
    mesh = heatmap(
        grid, d.vectors, labels, [str(c) for c in range(D)], style, vmin=-1.0, vmax=1.0, cmap="PuOr"
    )
    grid.set_xticks(range(D), [str(c) if c % 2 == 0 else "" for c in range(D)], rotation=0, ha="center")
    grid.set_xlabel("column (sin at even, cos at odd)")
    grid.set_ylabel("position")
    grid.set_title("one row per position")
    bar = fig.colorbar(mesh, ax=grid, shrink=0.8, ticks=[-1, 0, 1])
    bar.set_label("value")
    bar.outline.set_visible(False)
    for colour, c, period in zip(style.lines, d.traced, d.periods, strict=False):
        curves.plot(
            d.positions,
            d.vectors[:, c],
            color=colour,
            marker="o",
            markersize=3,
            label=f"column {c}: a turn every {period:.0f}",
        )
    curves.set_xlabel("position")
    curves.set_ylabel("value")
    curves.set_ylim(-1.15, 2.4 if narrow else 1.6)
    curves.set_yticks([-1, 0, 1])
    curves.legend(loc="upper left", fontsize=10)
    curves.set_title("three columns, three speeds")
    return fig
