"""Work per generated token with and without a KV cache, from qkv's own counters."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

from qkv.kvcache import WorkCounter, decode_with_cache, decode_without_cache
from qkv.multihead import MultiHeadWeights
from qkv_site.figures._table import Table

T = 64  # tokens generated
D_MODEL, N_HEADS = 32, 4  # the chapter's small decoder (snippets/kv_cache.py)
SEED = 0

ALT = (
    f"Two line charts over {T} generated tokens. Top: key/value projections computed for each "
    "new token. Without a cache they grow in a straight line with the token's position "
    f"(up to {T} for token {T}); with the cache they stay at 1. Bottom: query-key scores for "
    "each new token. With the cache they still grow in a straight line with position; "
    f"without it they grow with the square of position, to {T}² × {N_HEADS} heads for the "
    "last token."
)
CAPTION = (
    f"Counted while decoding {T} tokens with {N_HEADS} heads (qkv.WorkCounter). The cache "
    "makes the key/value work per token constant, so it is linear in total; the new query "
    "is still dotted with every cached key, so score work per token keeps growing."
)


class Work(NamedTuple):
    position: np.ndarray  # 1..T
    cached: WorkCounter
    uncached: WorkCounter


@cache
def data() -> Work:
    rng = np.random.default_rng(SEED)
    w = MultiHeadWeights.random(rng, D_MODEL, N_HEADS)
    x = rng.normal(size=(T, D_MODEL))
    cached, uncached = WorkCounter(), WorkCounter()
    decode_with_cache(x, w, cached)
    decode_without_cache(x, w, uncached)
    return Work(np.arange(1, T + 1), cached, uncached)


def tables() -> list[Table]:
    d = data()
    rows = tuple(
        zip(
            d.position.tolist(),
            d.cached.kv_projections,
            d.uncached.kv_projections,
            d.cached.scores,
            d.uncached.scores,
            strict=True,
        )
    )
    return [
        Table(
            "Work per generated token, with and without a KV cache",
            (
                "token",
                "K/V projections, cached",
                "K/V projections, uncached",
                "scores, cached",
                "scores, uncached",
            ),
            rows,
        )
    ]


def build(style) -> Figure:
    d = data()
    fig = Figure(figsize=(5.0, 5.8), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True)
    t = d.position
    for ax, field, title, growth in (
        (top, "kv_projections", "key/value projections per token", ("∝ t", "constant: 1")),
        (bottom, "scores", "query-key scores per token", ("∝ t²", "∝ t")),
    ):
        uncached, cached = getattr(d.uncached, field), getattr(d.cached, field)
        ax.plot(t, uncached, color=style.unscaled, label="without cache")
        ax.plot(t, cached, color=style.scaled, linestyle="--", label="with cache")
        for y, text, colour in ((uncached, growth[0], style.unscaled), (cached, growth[1], style.scaled)):
            ax.annotate(
                text,
                (t[-1], y[-1]),
                xytext=(-4, 6),
                textcoords="offset points",
                ha="right",
                va="bottom",
                color=colour,
                fontsize=11,
            )
        ax.set_title(title, loc="left")
        ax.set_yscale("log", base=2)
        ax.set_ylabel("count (log scale)")
        ax.grid(True)
    top.set_ylim(0.5, 2 * T)
    for ax, ticks in ((top, 4 ** np.arange(4)), (bottom, N_HEADS * 16 ** np.arange(4))):
        ax.set_yticks(ticks, [f"{v:,}" for v in ticks])
    top.legend(loc="upper left")
    bottom.set_ylim(top=4 * N_HEADS * T * T)
    bottom.set_xscale("log", base=2)
    ticks = [int(v) for v in 2 ** np.arange(int(np.log2(T)) + 1)]
    bottom.set_xticks(ticks, [str(v) for v in ticks])
    bottom.minorticks_off()
    top.minorticks_off()
    bottom.set_xlabel("position t of the generated token (log scale)")
    return fig
