"""The KV cache growing one row at a time while the toy sentence is decoded: each step adds
the new word's key and value and keeps every row stored before it."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from qkv import toy
from qkv.dot_product import attention
from qkv.kvcache import KVCache
from qkv.masks import causal_mask
from qkv.projections import self_attention
from qkv_site.figures._table import Table

D_K = toy.D_K  # the site's one toy head

ALT = (
    "Six columns, one per decoding step of the toy sentence she drank milk from a cup. At "
    "each step the cache gains exactly one row, the new word's key and value, and keeps "
    "every row stored before it unchanged, so after step t it holds t rows, and only one of "
    "them is computed at that step."
)
CAPTION = (
    "A KV cache while a one-head layer decodes the toy sentence (qkv.KVCache). Grey rows were "
    "computed at an earlier step and are read again, not recomputed; the new word's query "
    "reads every row, and its weights over them are those of a causal pass over the whole "
    "sentence (the numbers behind the figure)."
)


class Growing(NamedTuple):
    words: tuple[str, ...]
    keys: tuple[np.ndarray, ...]  # the cache's keys after each step: (t, d_k)
    values: tuple[np.ndarray, ...]  # the cache's values after each step: (t, d_k)
    added: tuple[int, ...]  # rows each step appended
    moved: tuple[float, ...]  # largest change of the rows stored before each step
    weights: tuple[np.ndarray, ...]  # the new word's weights over the cache, per step: (t,)
    causal: np.ndarray  # (T, T): the weights of one causal pass over the whole sentence


@cache
def data() -> Growing:
    x, p = toy.embeddings(), toy.projections(D_K)  # d_v = d_k: one cache width
    store = KVCache.empty(n_kv_heads=1, d_head=D_K)
    keys, values, added, moved, weights = [], [], [], [], []
    for t in range(len(toy.SENTENCE)):
        token = x[t : t + 1]  # (1, d_model): only the newest word is new
        before = store.keys.copy(), store.values.copy()
        store.append((token @ p.w_k)[None], (token @ p.w_v)[None])  # (1 head, 1, d)
        added.append(len(store) - len(before[0][0]))
        moved.append(
            max(
                float(np.abs(store.keys[:, :t] - before[0]).max(initial=0.0)),
                float(np.abs(store.values[:, :t] - before[1]).max(initial=0.0)),
            )
        )
        q = token @ p.w_q  # (1, d_k)
        weights.append(attention(q, store.keys[0], store.values[0]).weights[0])  # (t + 1,)
        keys.append(store.keys[0].copy())
        values.append(store.values[0].copy())
    t = len(toy.SENTENCE)
    causal = self_attention(x, p, mask=causal_mask(t)).weights
    return Growing(
        toy.SENTENCE, tuple(keys), tuple(values), tuple(added), tuple(moved), tuple(weights), causal
    )


def tables() -> list[Table]:
    d = data()
    width = len(d.words)
    rows = tuple(
        (
            f"step {step}: {word}",
            len(k),
            added,
            moved,
            *[float(w) for w in weights],
            *[""] * (width - len(weights)),
        )
        for step, (word, k, added, moved, weights) in enumerate(
            zip(d.words, d.keys, d.added, d.moved, d.weights, strict=True), start=1
        )
    )
    return [
        Table(
            "The cache after each step, and the new word's weights over its rows",
            ("step: new word", "rows held", "rows added", "largest change of earlier rows", *d.words),
            rows,
        )
    ]


def build(style) -> Figure:
    d = data()
    n = len(d.words)
    fig = Figure(figsize=(6.4, 4.6), layout="constrained")
    ax = fig.subplots()
    stored = style.grid
    for step in range(n):
        for row in range(step + 1):
            new = row == step
            ax.add_patch(
                Rectangle(
                    (step - 0.42, row - 0.4),
                    0.84,
                    0.8,
                    facecolor=style.accent if new else stored,
                    edgecolor=style.faint,
                    linewidth=0.8,
                )
            )
            ax.text(
                step,
                row,
                d.words[row],
                ha="center",
                va="center",
                color=style.text_on(to_rgb(style.accent)) if new else style.text,
                fontsize=10,
            )
        ax.text(step, -0.85, f"step {step + 1}", ha="center", va="center", fontsize=10, color=style.muted)
    ax.set_xlim(-0.55, n - 0.45)
    ax.set_ylim(n - 0.45, -1.2)  # the first row at the top; the cache grows downwards
    ax.set_aspect("equal")
    ax.axis("off")
    fig.legend(
        handles=[
            Patch(facecolor=stored, edgecolor=style.faint, label="stored earlier, read again"),
            Patch(facecolor=style.accent, edgecolor=style.faint, label="computed at this step"),
        ],
        loc="outside lower center",
        ncols=2,
    )
    return fig
