"""Peak memory of qkv.attention and qkv.tiled_attention against the length T, measured with
tracemalloc (float32, one head of 64)."""

from __future__ import annotations

import tracemalloc
from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

from qkv.dot_product import attention
from qkv.tiled import tiled_attention
from qkv_site.figures._table import Table

LENGTHS = (256, 512, 1024, 2048, 4096, 8192)
D = 64
MIB = 2**20

ALT = (
    "Line chart on log axes of peak memory in MiB against sequence length T from 256 to 8,192, "
    "float32, head width 64. qkv.attention's peak grows with the square of T, about four times per "
    "doubling from T = 2,048 on, to 258 MiB at T = 8,192, almost all of it the T × T score "
    "matrix. qkv.tiled_attention's peak grows only with T, to about 11 MiB at T = 8,192, more "
    "than 20 times less."
)
CAPTION = (
    "Measured with Python's tracemalloc while the page was built (it counts NumPy's arrays; "
    "the inputs q, k, v are not counted). tiled_attention with its default blocks of 1,024 "
    "queries by 2,048 keys. Up to T = 1,024 one block holds every score, and the "
    "running sums make tiled_attention slightly larger."
)


class Peaks(NamedTuple):
    lengths: tuple[int, ...]
    attention_mib: np.ndarray  # (len(LENGTHS),)
    tiled_mib: np.ndarray


def peak_mib(fn) -> float:
    """The most memory allocated at once while ``fn`` runs, in MiB rounded to 0.01 (the last
    few hundred bytes move with NumPy's small-array cache; the page must not). ``fn`` runs once
    untraced first, so that what a first call sets up once (caches, lazily built tables) is not
    counted: without it the smallest peaks differed by 0.01 between the build's process and a
    test's."""
    fn()
    tracemalloc.start()
    try:
        fn()
        return round(tracemalloc.get_traced_memory()[1] / MIB, 2)
    finally:
        tracemalloc.stop()


@cache
def data() -> Peaks:
    full, tiled = [], []
    for t in LENGTHS:
        rng = np.random.default_rng(t)
        q, k, v = (rng.standard_normal((t, D), dtype=np.float32) for _ in range(3))
        full.append(peak_mib(lambda q=q, k=k, v=v: attention(q, k, v)))
        tiled.append(peak_mib(lambda q=q, k=k, v=v: tiled_attention(q, k, v)))
    return Peaks(LENGTHS, np.array(full), np.array(tiled))


def tables() -> list[Table]:
    d = data()
    rows = tuple(
        (t, a, b, a / b)
        for t, a, b in zip(d.lengths, d.attention_mib.tolist(), d.tiled_mib.tolist(), strict=True)
    )
    return [
        Table("Peak memory in MiB (float32, d = 64)", ("T", "attention", "tiled_attention", "ratio"), rows)
    ]


def build(style) -> Figure:
    d = data()
    fig = Figure(figsize=(5.0, 3.6), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(d.lengths, d.attention_mib, color=style.lines[1], marker="o", label="qkv.attention")
    ax.plot(d.lengths, d.tiled_mib, color=style.lines[0], marker="s", label="qkv.tiled_attention")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xticks(d.lengths, [f"{t:,}" for t in d.lengths])
    ticks = [0.25, 1, 4, 16, 64, 256]
    ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
    ax.minorticks_off()
    ax.grid(True)
    ax.set_xlabel("sequence length T (log scale)")
    ax.set_ylabel("peak memory, MiB (log scale)")
    ax.legend(loc="upper left")
    return fig
