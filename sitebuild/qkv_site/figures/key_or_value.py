"""A key decides the weights, a value what they bring in: change one of milk's, then the other."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

from qkv import toy
from qkv.dot_product import attention
from qkv.projections import project
from qkv_site.figures._table import Table

# The chapter's two edits (snippets/keys_vs_values.py): milk's value hands over
# "container" instead of "dairy"; milk's key is wiped so that it shows nothing.
READER, EDITED = "drank", "milk"
NEW_VALUE = "container"

ALT = (
    "Four bar charts of the word “drank” in the hand-built toy sentence “she drank milk "
    "from a cup”, before and after one change to “milk”. Left, milk's value changed from "
    "dairy to container: drank's weights on the six words do not move at all, and what it "
    "receives swaps 0.68 of dairy for 0.68 of container. Right, milk's key wiped: drank's "
    "weight on milk falls from 0.68 to 0.11, and the dairy it receives falls with it, "
    "though milk's value is the same."
)
CAPTION = (
    "One query, “drank”, before (outlined) and after (filled) each change. A value enters "
    "only the average, so changing it leaves every weight where it was; a key enters only "
    "the scores, so wiping it moves the weights, and what is averaged follows."
)


class Edits(NamedTuple):
    words: tuple[str, ...]  # the sentence: the columns of the weights
    hands: tuple[str, ...]  # what a value hands over: its columns
    weights: np.ndarray  # (3, T): drank's weights as built, new value, wiped key
    received: np.ndarray  # (3, d_v): drank's output in the same three cases


@cache
def data() -> Edits:
    q, k, v = project(toy.feature_embeddings(), toy.hand_built_projections())
    i, j = toy.SENTENCE.index(READER), toy.SENTENCE.index(EDITED)
    new_v, wiped_k = v.copy(), k.copy()
    new_v[j] = np.eye(v.shape[1])[toy.VALUE_COLUMNS.index(NEW_VALUE)]
    wiped_k[j] = 0
    cases = [attention(q, k, v), attention(q, k, new_v), attention(q, wiped_k, v)]
    return Edits(
        toy.SENTENCE,
        toy.VALUE_COLUMNS,
        np.array([c.weights[i] for c in cases]),
        np.array([c.output[i] for c in cases]),
    )


def tables() -> list[Table]:
    d = data()
    cases = ("as built", "milk's value changed", "milk's key wiped")
    return [
        Table(
            "Weights of drank",
            ("case", *d.words),
            tuple((c, *w) for c, w in zip(cases, d.weights, strict=True)),
        ),
        Table(
            "What drank receives",
            ("case", *d.hands),
            tuple((c, *r) for c, r in zip(cases, d.received, strict=True)),
        ),
    ]


def _bars(ax, labels, before, after, style, colour):
    x = np.arange(len(labels))
    ax.bar(x, after, width=0.62, color=colour, label="after")
    ax.bar(x, before, width=0.62, fill=False, edgecolor=style.text, linewidth=1.4, label="before")
    ax.set_xticks(x, labels, rotation=35, ha="right", rotation_mode="anchor")
    ax.set_ylim(0, 1.08)
    ax.set_yticks([0, 0.5, 1])
    ax.tick_params(axis="x", length=0)


def build(style) -> Figure:
    d = data()
    fig = Figure(figsize=(6.2, 5.0), layout="constrained")
    axes = fig.subplots(2, 2, sharey="row")
    j = d.words.index(EDITED)
    for col, (case, title) in enumerate(((1, "change milk's value"), (2, "wipe milk's key"))):
        top, bottom = axes[0, col], axes[1, col]
        _bars(top, d.words, d.weights[0], d.weights[case], style, style.primary)
        _bars(bottom, d.hands, d.received[0], d.received[case], style, style.accent)
        top.set_title(title)
        before, after = d.weights[0, j], d.weights[case, j]
        note = (
            "weights unchanged"
            if np.array_equal(d.weights[0], d.weights[case])
            else f"milk {before:.2f} → {after:.2f}"
        )
        top.text(0.97, 0.95, note, transform=top.transAxes, ha="right", va="top", fontsize=10.5)
    axes[0, 0].set_ylabel("drank's weight")
    axes[1, 0].set_ylabel("drank receives")
    axes[0, 0].legend(loc="upper left", fontsize=10, handlelength=1.2)
    return fig
