"""Softmax saturation against d_k: without scaling the weights collapse onto one key."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

from qkv.lab.scaling import saturation
from qkv_site.figures._draw import DIMS, band, log2_axis, percentiles
from qkv_site.figures._table import Table

N_KEYS = 6
N_DRAWS = 2_000

ALT = (
    "Two line charts against the head dimension dₖ from 1 to 512, averaged over random "
    f"queries each attending over {N_KEYS} keys. Without scaling, the mean entropy of the "
    "weights falls from about 1.5 nats at dₖ = 1 to under 0.15 nats at dₖ = 512, and the "
    "mean largest weight climbs from under 0.4 to above 0.9: softmax becomes nearly one-hot. "
    "Divided by √dₖ, the mean entropy stays above 1.4 nats and the mean largest weight below "
    "0.45 at every dₖ."
)
CAPTION = (
    f"Mean over {N_DRAWS:,} random draws of one query and {N_KEYS} keys per dₖ; shaded: the "
    "middle 80 % of draws (10th to 90th percentile). Dotted lines: perfectly even weights."
)


class Curves(NamedTuple):
    """Per d_k: (mean, 10th, 90th percentile), as arrays of shape (len(DIMS), 3)."""

    dims: np.ndarray
    entropy: dict  # scale (bool) -> (len(DIMS), 3)
    max_weight: dict


@cache
def data() -> Curves:
    entropy, peak = {}, {}
    for scale in (True, False):
        runs = [saturation(d, scale=scale, n_keys=N_KEYS, n_draws=N_DRAWS) for d in DIMS]
        entropy[scale] = np.array([percentiles(r.entropy) for r in runs])
        peak[scale] = np.array([percentiles(r.max_weight) for r in runs])
    return Curves(np.array(DIMS), entropy, peak)


def tables() -> list[Table]:
    d = data()
    columns = ("d_k", "mean", "10th percentile", "90th percentile")
    return [
        Table(
            f"{what}, {'scaled' if scale else 'unscaled'} scores",
            columns,
            tuple((dim, *row) for dim, row in zip(d.dims.tolist(), values[scale].tolist(), strict=True)),
        )
        for what, values in (("Entropy of the weights (nats)", d.entropy), ("Largest weight", d.max_weight))
        for scale in (True, False)
    ]


def build(style) -> Figure:
    d = data()
    fig = Figure(figsize=(5.0, 5.6), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True)
    even = {top: np.log(N_KEYS), bottom: 1 / N_KEYS}
    for ax, curves in ((top, d.entropy), (bottom, d.max_weight)):
        ax.axhline(even[ax], color=style.muted, linestyle=":", linewidth=1.5)
        band(ax, d.dims, *curves[False].T, style.unscaled, "unscaled", "o")
        band(ax, d.dims, *curves[True].T, style.scaled, r"scaled by $1/\sqrt{d_k}$", "s")
        ax.grid(True)
    top.set_ylabel("entropy of weights (nats)")
    top.set_ylim(0, 2.05)
    top.text(
        d.dims[-1],
        even[top] + 0.04,
        f"even over {N_KEYS}: ln {N_KEYS}",
        ha="right",
        va="bottom",
        color=style.muted,
        fontsize=10,
    )
    top.legend(loc="lower left")
    bottom.set_ylabel("largest weight")
    bottom.set_ylim(0, 1.05)
    bottom.text(
        d.dims[-1],
        even[bottom] - 0.04,
        f"even: 1/{N_KEYS}",
        ha="right",
        va="top",
        color=style.muted,
        fontsize=10,
    )
    log2_axis(bottom, d.dims, r"head dimension $d_k$ (log scale)")
    return fig
