"""Score spread against d_k: raw dot products grow like √d_k; scaled ones do not."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

from qkv.lab.scaling import score_std
from qkv_site.figures._draw import DIMS, log2_axis
from qkv_site.figures._table import Table

N_DRAWS = 5_000

ALT = (
    "Line chart on log axes of the spread (standard deviation) of attention scores against the "
    "head dimension dₖ from 1 to 512. Unscaled dot products spread like √dₖ: about 1 at "
    "dₖ = 1, about 8 at dₖ = 64 and about 23 at dₖ = 512. Scores divided by √dₖ keep a "
    "spread within 5 % of 1 at every dₖ."
)
CAPTION = (
    f"Spread of q·k over {N_DRAWS:,} random query-key pairs per dₖ, with independent "
    "unit-variance components. Raw scores follow the √dₖ curve; dividing by √dₖ cancels "
    "the growth."
)


class Spread(NamedTuple):
    dims: np.ndarray
    unscaled: np.ndarray  # standard deviation of q·k
    scaled: np.ndarray  # standard deviation of q·k / √d_k


@cache
def data() -> Spread:
    return Spread(
        np.array(DIMS),
        np.array([score_std(d, scale=False, n_draws=N_DRAWS) for d in DIMS]),
        np.array([score_std(d, scale=True, n_draws=N_DRAWS) for d in DIMS]),
    )


def tables() -> list[Table]:
    d = data()
    rows = tuple(zip(d.dims.tolist(), d.unscaled.tolist(), d.scaled.tolist(), strict=True))
    return [
        Table(
            "Spread (standard deviation) of attention scores per head dimension",
            ("d_k", "unscaled q·k", "scaled q·k / √d_k"),
            rows,
        )
    ]


def build(style) -> Figure:
    d = data()
    fig = Figure(figsize=(5.0, 3.6), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(d.dims, d.unscaled, marker="o", color=style.unscaled, label=r"unscaled: $q\cdot k$")
    ax.plot(d.dims, d.scaled, marker="s", color=style.scaled, label=r"scaled: $q\cdot k\,/\sqrt{d_k}$")
    smooth = np.geomspace(d.dims[0], d.dims[-1], 200)
    ax.plot(
        smooth,
        np.sqrt(smooth),
        color=style.text,
        linestyle=(0, (3, 3)),
        linewidth=1.2,
        label=r"$\sqrt{d_k}$ (predicted)",
        zorder=3,
    )  # on top: the data lie on it
    log2_axis(ax, d.dims, r"head dimension $d_k$ (log scale)")
    ax.set_yscale("log", base=2)
    ticks = [0.5, 1, 2, 4, 8, 16, 32]
    ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
    ax.minorticks_off()
    ax.set_ylim(0.5, 40)
    ax.grid(True)
    ax.set_ylabel("spread of scores (std, log scale)")
    ax.legend(loc="upper left")
    return fig
