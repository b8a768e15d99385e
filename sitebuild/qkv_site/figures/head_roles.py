"""What the query and the key do in a previous-token head and in an induction head, on a
hand-built toy: eight tokens, the second four a copy of the first four."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

import qkv
from qkv.rope import rope
from qkv_site.figures._draw import cell_text, heatmap, outline
from qkv_site.figures._table import Table, matrix

TOKENS = ("K", "P", "Z", "M", "K", "P", "Z", "M")  # four tokens, then the same four again
SHARPNESS = 20.0  # how long the queries are: a longer query makes a sharper softmax
# RoPE with two pairs turning at 1 and 1/2 radian per position: the slower pair keeps an
# offset of 7 from looking like an offset of 1 (7 radians is nearly a whole turn)
ROPE_BASE = 4.0
KEY = np.array([1.0, 0.0, 1.0, 0.0])  # every token's key before RoPE, in the position head
NARROW = True  # stacks the two panels on phones

ALT = (
    "Two grids of attention weights over eight tokens, K P Z M written twice, queries as rows "
    "and keys as columns, the keys after each query masked. Left, a previous-token head, "
    "whose query is its key turned one position back, so that RoPE lines it up with the key "
    "before it: every query after the first puts "
    "at least 0.98 of its weight on the key just before it. Right, an induction head, whose "
    "keys carry the token before them: each query of the second half puts at least 0.98 on "
    "the key just after the earlier copy of its own token, and each query of the first half, "
    "with no copy to find, spreads its weight evenly."
)
CAPTION = (
    "Two kinds of head in a trained model, built by hand. In the previous-token head the query "
    "asks for the position one before its own and every key answers with its position, "
    "through RoPE. In the induction head the query holds its own token and every key holds "
    "the token before it, which a previous-token head in an earlier layer wrote there; the "
    "value it finds is the token that came next last time."
)


class Heads(NamedTuple):
    labels: tuple[str, ...]  # "1 K", "2 P", ...: position (from 1) and token
    previous: np.ndarray  # (T, T): the previous-token head's weights
    induction: np.ndarray  # (T, T): the induction head's weights


def _one_hot(tokens) -> np.ndarray:
    vocabulary = sorted(set(TOKENS))
    return np.eye(len(vocabulary))[[vocabulary.index(t) for t in tokens]]


@cache
def data() -> Heads:
    t = len(TOKENS)
    mask = qkv.causal_mask(t)
    # previous-token head: the same key at every position, turned by RoPE; the query is
    # that key turned one position back, so at position i it lines up with the key at i - 1
    keys = rope(np.tile(KEY, (t, 1)), base=ROPE_BASE)
    query = SHARPNESS * rope(KEY[None], [-1], base=ROPE_BASE)[0]
    queries = rope(np.tile(query, (t, 1)), base=ROPE_BASE)
    values = np.eye(t)  # unused by the weights; one-hot so the output names the key found
    previous = qkv.attention(queries, keys, values, mask=mask).weights
    # induction head: each key holds the token before it (nothing at the first position);
    # each query holds its own token
    tokens = _one_hot(TOKENS)
    keys = np.vstack([np.zeros(tokens.shape[1]), tokens[:-1]])
    induction = qkv.attention(SHARPNESS * tokens, keys, values, mask=mask).weights
    labels = tuple(f"{i + 1} {token}" for i, token in enumerate(TOKENS))
    return Heads(labels, previous, induction)


def targets() -> tuple[list[int | None], list[int | None]]:
    """For each query, the key each head should find: one back, and one after the earlier copy
    (None where there is none)."""
    before = [None, *range(len(TOKENS) - 1)]
    after_copy = [next((j + 1 for j in range(i) if TOKENS[j] == TOKENS[i]), None) for i in range(len(TOKENS))]
    return before, after_copy


def tables() -> list[Table]:
    d = data()
    return [
        matrix("Previous-token head: attention weights", r"query \ key", d.labels, d.labels, d.previous),
        matrix("Induction head: attention weights", r"query \ key", d.labels, d.labels, d.induction),
    ]


def _panel(ax, d, weights, wanted, title, style):
    t = len(d.labels)
    seen = np.where(np.tril(np.ones((t, t), dtype=bool)), weights, np.nan)  # masked keys: blank
    mesh = heatmap(ax, seen, d.labels, d.labels, style)
    for i in range(t):
        for j in range(i + 1):
            cell_text(ax, mesh, i, j, f"{weights[i, j]:.2f}".removeprefix("0"), style, fontsize=7)
        if wanted[i] is not None:
            outline(ax, i, wanted[i], style.accent, linewidth=2)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    return mesh


def build(style, narrow: bool = False) -> Figure:
    d = data()
    before, after_copy = targets()
    if narrow:
        fig = Figure(figsize=(4.0, 8.4), layout="constrained")
        axes = fig.subplots(2, 1)
    else:
        fig = Figure(figsize=(8.0, 4.4), layout="constrained")
        axes = fig.subplots(1, 2)
    _panel(axes[0], d, d.previous, before, "previous-token head:\nquery asks for one position back", style)
    mesh = _panel(
        axes[1],
        d,
        d.induction,
        after_copy,
        "induction head: query asks for\na key whose previous token is its own",
        style,
    )
    bar = fig.colorbar(mesh, ax=list(axes), shrink=0.8, orientation="vertical" if narrow else "horizontal")
    bar.set_label("attention weight (both heads)", fontsize=10)
    bar.outline.set_visible(False)
    return fig
