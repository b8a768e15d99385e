"""Which noun does a trained model expect after "What was soft? The"? Sixteen minimal pairs."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

from qkv_site.figures._table import Table

ALT = (
    "Dot plot, one row per minimal pair (cat / mat, trophy / suitcase, ...), of "
    "SmolLM2-135M-Instruct's log P(first noun) − log P(second noun) after the probe "
    "question, once for the sentence whose changed word means the first noun (filled dot) "
    "and once for the one that means the second (open square). If the model followed the "
    "word, every filled dot would lie right of its square and right of zero, every square "
    "left of zero. The filled dot is right of its square in 11 of the 16 pairs, and the "
    "meant noun is the likelier in 15 of the 32 sentences, no more than a coin gives; most "
    "pairs sit on one side of zero, so the two nouns themselves decide more than the word "
    "(cat over mat by 3.96 nats even when the mat is meant)."
)
CAPTION = (
    "The model's own answer to each minimal pair: log P(first noun) − log P(second noun) "
    "after “What was soft? The” (and its likes), for the sentence meaning the first noun "
    "(filled) and the one meaning the second (open)."
)


class Preferences(NamedTuple):
    labels: tuple[str, ...]  # "cat / mat" per pair
    words: tuple[tuple[str, str], ...]  # the word that means noun 1, noun 2
    preference: np.ndarray  # (pairs, 2): log P(noun 1) - log P(noun 2), noun 1 meant | noun 2


@cache
def data() -> Preferences:
    from threadpoolctl import threadpool_limits

    from qkv import coreference, smollm2

    with threadpool_limits(limits=1, user_api="blas"):
        model = smollm2.load()
        runs = [coreference.run_pair(model, pair) for pair in coreference.PAIRS]
    return Preferences(tuple(" / ".join(p.nouns) for p in coreference.PAIRS),
                       tuple(p.words for p in coreference.PAIRS),
                       np.array([run.preference for run in runs]))


def tables() -> list[Table]:
    d = data()
    rows = tuple((label, f"{w1} / {w2}", a, b)
                 for label, (w1, w2), (a, b) in zip(d.labels, d.words, d.preference, strict=True))
    return [Table("log P(first noun) − log P(second noun) after the probe",
                  ("nouns", "words", "first noun meant", "second noun meant"), rows)]


def build(style) -> Figure:
    d = data()
    n = len(d.labels)
    y = np.arange(n)[::-1]  # the first pair on top
    fig = Figure(figsize=(6.4, 5.2), layout="constrained")
    ax = fig.add_subplot()
    ax.axvline(0, color=style.muted, linewidth=1)
    for row, (first, second) in zip(y, d.preference, strict=True):
        ax.plot([second, first], [row, row], color=style.faint, linewidth=1.5, zorder=1)
    ax.scatter(d.preference[:, 0], y, color=style.scaled, s=30, zorder=2,
               label="sentence meaning the first noun")
    ax.scatter(d.preference[:, 1], y, facecolors="none", edgecolors=style.unscaled, s=30,
               marker="s", linewidths=1.3, zorder=2, label="sentence meaning the second noun")
    ax.set_yticks(y, d.labels, fontsize=9)
    ax.set_xlabel("log P(first noun) − log P(second noun), nats")
    fig.legend(loc="outside upper center", ncols=2, fontsize=9)
    ax.grid(True, axis="x")
    ax.set_axisbelow(True)
    return fig
