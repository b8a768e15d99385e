"""The vanishing gradient: the softmax Jacobian shrinks towards 0 when scores are not scaled."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

from qkv.lab.scaling import saturation
from qkv_site.figures._draw import DIMS, log2_axis
from qkv_site.figures._table import Table

N_KEYS = 6
N_DRAWS = 2_000
FLOOR = 1e-6  # the y axis starts here; smaller norms are drawn at the floor

ALT = (
    "Line chart on log axes of the size of the softmax Jacobian (how much the weights move "
    "when the scores move) against the head dimension dₖ from 1 to 512. Divided by √dₖ, the "
    "median size stays between 0.35 and 0.45 at every dₖ. Unscaled, it is about 10 times "
    "smaller at dₖ = 64 and more than 1,000 times smaller at dₖ = 512: almost no gradient "
    "reaches the scores."
)
CAPTION = (
    "Frobenius norm of the softmax Jacobian ∂weights/∂scores, median over "
    f"{N_DRAWS:,} random draws of one query and {N_KEYS} keys per dₖ; shaded: the middle half "
    "of the draws. The median draw is shown because a few near-ties keep the mean up."
)


class Gradient(NamedTuple):
    """Per d_k: (25th, 50th, 75th percentile) of the Jacobian norm, shape (len(DIMS), 3)."""

    dims: np.ndarray
    quartiles: dict  # scale (bool) -> (len(DIMS), 3)


@cache
def data() -> Gradient:
    quartiles = {}
    for scale in (True, False):
        runs = [saturation(d, scale=scale, n_keys=N_KEYS, n_draws=N_DRAWS) for d in DIMS]
        quartiles[scale] = np.array([np.percentile(r.jacobian_norm, [25, 50, 75]) for r in runs])
    return Gradient(np.array(DIMS), quartiles)


def tables() -> list[Table]:
    d = data()
    columns = ("d_k", "25th percentile", "median", "75th percentile")
    return [
        Table(
            f"Norm of the softmax Jacobian (gradient size), {'scaled' if scale else 'unscaled'} scores",
            columns,
            tuple((dim, *row) for dim, row in zip(d.dims.tolist(), d.quartiles[scale].tolist(), strict=True)),
        )
        for scale in (True, False)
    ]


def build(style) -> Figure:
    d = data()
    fig = Figure(figsize=(5.0, 3.8), layout="constrained")
    ax = fig.add_subplot()
    for scale, colour, marker, label in (
        (False, style.unscaled, "o", "unscaled"),
        (True, style.scaled, "s", r"scaled by $1/\sqrt{d_k}$"),
    ):
        low, median, high = np.maximum(d.quartiles[scale], FLOOR).T
        ax.fill_between(d.dims, low, high, color=colour, alpha=0.22, linewidth=0)
        ax.plot(d.dims, median, color=colour, marker=marker, label=label)
    ax.set_yscale("log")
    ax.set_ylim(FLOOR, 1)
    ax.grid(True)
    log2_axis(ax, d.dims, r"head dimension $d_k$ (log scale)")
    ax.set_ylabel(r"size of $\partial$weights / $\partial$scores" "\n(Frobenius norm, log scale)")
    ax.legend(loc="lower left")
    return fig
