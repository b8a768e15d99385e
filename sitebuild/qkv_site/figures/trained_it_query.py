"""Where the trained model's query of *it* looks in the source's sentence, "The cat sat on
the mat because it was warm": in the head that puts the most of it on the sentence's two
nouns, the weights of *it* (which, under the causal mask, cannot see *warm*) and of *warm*."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

from qkv_site.figures._table import Table
from qkv_site.figures._trained import label, texts

NOUNS = ("cat", "mat")
ASKERS = ("it", "warm")  # the two queries drawn, one panel each
NARROW = True  # stacks the two panels on phones

ALT = (
    "Two bar charts from SmolLM2-135M-Instruct, layer 14 head 9, the head that puts the most "
    "of the query of 'it' on the sentence's two nouns, in 'The cat sat on the mat because it "
    "was warm'. Left, the weights of 'it' over the words it can see, 'The' to 'it': 0.80 on "
    "'cat', 0.05 on 'mat', 0.08 on 'The'. Under the causal mask 'it' cannot see 'warm', so "
    "its weights are the same whatever the sentence says next. Right, the weights of 'warm' "
    "in the same head: 0.47 on 'cat' and 0.36 on 'mat'. From 'it', no head of the 270 puts "
    "more than 0.3 on 'mat'; 109 put more than half on 'The'."
)
CAPTION = (
    "The usual story has the query of it go looking for what warm describes. In the trained "
    "model, the query of it cannot see warm yet: the head that looks hardest at the nouns "
    "picks cat, and what follows it cannot change that."
)


class ItQuery(NamedTuple):
    pieces: tuple[str, ...]  # the sentence's tokens
    head: tuple[int, int]  # (layer, head) from 0: the most weight from "it" on the nouns
    rows: np.ndarray  # (2, T): that head's weights of "it" and of "warm" over every key
    asking: tuple[int, int]  # the positions of "it" and "warm"
    nouns: tuple[int, int]  # the positions of "cat" and "mat"
    on_mat_most: float  # the most weight any head puts from "it" on "mat"
    on_first: int  # heads putting more than half of the weight of "it" on the first token


@cache
def data() -> ItQuery:
    sentence = texts()[0]
    words = [p.strip() for p in sentence.pieces]
    asking = tuple(words.index(w) for w in ASKERS)
    nouns = tuple(words.index(w) for w in NOUNS)
    weights = sentence.weights.astype(np.float64)  # (layers, heads, T, T)
    from_it = weights[:, :, asking[0], :]  # (layers, heads, T)
    on_nouns = from_it[..., list(nouns)].sum(-1)
    layer, head = (int(i) for i in np.unravel_index(np.argmax(on_nouns), on_nouns.shape))
    return ItQuery(
        sentence.pieces,
        (layer, head),
        weights[layer, head][list(asking)],
        asking,
        nouns,
        float(from_it[..., nouns[1]].max()),
        int((from_it[..., 0] > 0.5).sum()),
    )


def tables() -> list[Table]:
    d = data()
    name = f"layer {d.head[0] + 1} head {d.head[1] + 1}"
    return [
        Table(
            f"The weights of {label(d.pieces[a])} in {name}, over the keys it can see",
            ("key", "weight"),
            tuple((label(p), float(w)) for p, w in zip(d.pieces[: a + 1], d.rows[i][: a + 1], strict=True)),
        )
        for i, a in enumerate(d.asking)
    ]


def build(style, narrow: bool = False) -> Figure:
    d = data()
    words = [p.strip() for p in d.pieces]
    fig = Figure(figsize=(3.8, 6.6) if narrow else (7.2, 3.6), layout="constrained")
    axes = fig.subplots(2, 1) if narrow else fig.subplots(1, 2, sharex=True)
    for ax, row, asking in zip(axes, d.rows, d.asking, strict=True):
        seen = words[: asking + 1]  # the causal mask: a query sees itself and what came before
        order = np.arange(len(seen))[::-1]
        colours = [style.accent if j in d.nouns else style.muted for j in range(len(seen))]
        ax.barh(order, row[: asking + 1], color=colours)
        ax.set_yticks(order, seen, fontsize=8)
        ax.set_xlim(0, 1)
        ax.set_title(f"the query of ‘{words[asking]}’", fontsize=9)
        for y, w in zip(order, row[: asking + 1], strict=True):
            ax.text(w + 0.02, y, f"{w:.2f}", va="center", fontsize=7, color=style.text)
        ax.set_xlabel(f"weight in layer {d.head[0] + 1} head {d.head[1] + 1}", fontsize=9)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    return fig
