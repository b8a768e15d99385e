"""Two heads of the trained model on the source's sentence, side by side: the head that
scores highest as a previous-token head and the one that scores highest as a first-token
head, both chosen by the head scores of the trained-model page (over ten texts), not by
looking at this sentence."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

from qkv_site.figures._table import Table, matrix
from qkv_site.figures._trained import label, repeated, texts
from qkv_site.figures.trained_head_types import data as head_types

KINDS = ("previous", "first")  # the two jobs shown, in the order of the panels
JOBS = {"previous": "the previous token", "first": "the first token"}
NARROW = True  # stacks the two grids on phones

ALT = (
    "Two grids of attention weights of SmolLM2-135M-Instruct on 'The cat sat on the mat "
    "because it was warm', queries down, keys across, under the causal mask. Left, layer 17 "
    "head 1, the model's strongest previous-token head: a bright stripe just below the "
    "diagonal, each word putting most of its weight on the word before it (0.81 on average, "
    "where an even spread would give 0.21). Right, layer 19 head 9, its strongest first-token "
    "head: one bright column, every word putting 1.00 on 'The'. On 12 random tokens written "
    "twice, which carry no meaning, the left head still puts at least 0.83 on the previous "
    "token and the right one at least 0.78 on the first: both follow position, not these words."
)
CAPTION = (
    "Two heads of one trained model, reading the same sentence, do different jobs: one "
    "looks one word back, the other parks its weight on the first token. Both were picked by "
    "their scores over ten texts on the trained-model page, before this sentence was drawn."
)


class TwoHeads(NamedTuple):
    pieces: tuple[str, ...]  # the sentence's tokens
    heads: tuple[tuple[int, int], ...]  # (layer, head) from 0, one per kind of KINDS
    weights: np.ndarray  # (2, T, T): each head's weights on the sentence
    scores: np.ndarray  # (2,): each head's score for its kind on the sentence
    baselines: np.ndarray  # (2,): an even spread's score for that kind on the sentence
    over_texts: np.ndarray  # (2,): the head's score over the ten texts (how it was chosen)
    on_random: np.ndarray  # (2, n): the head's score on each text of random tokens written twice


@cache
def data() -> TwoHeads:
    from qkv.lab import head_scores

    types = head_types()
    sentence = texts()[0]  # the source's sentence, the first of the trained-model page's texts
    heads, weights, scores, baselines, over, random = [], [], [], [], [], []
    for kind in KINDS:
        by_head = types.scores[types.kinds.index(kind)]  # (layers, heads) over the ten texts
        layer, head = (int(i) for i in np.unravel_index(np.argmax(by_head), by_head.shape))
        target = head_scores.targets(kind, sentence.ids)
        w = sentence.weights[layer, head].astype(np.float64)
        heads.append((layer, head))
        weights.append(w)
        scores.append(head_scores.score(w, target))
        baselines.append(head_scores.baseline(target))
        over.append(by_head[layer, head])
        random.append(
            [head_scores.score(r.weights[layer, head], head_scores.targets(kind, r.ids)) for r in repeated()]
        )
    return TwoHeads(
        sentence.pieces,
        tuple(heads),
        np.stack(weights),
        np.array(scores),
        np.array(baselines),
        np.array(over),
        np.array(random),
    )


def _title(kind: str, layer: int, head: int) -> str:
    return f"layer {layer + 1} head {head + 1}: {JOBS[kind]}"


def tables() -> list[Table]:
    d = data()
    words = [label(p) for p in d.pieces]
    return [
        matrix(_title(kind, *d.heads[i]) + " (query \\ key)", "query", words, words, d.weights[i].round(3))
        for i, kind in enumerate(KINDS)
    ] + [
        Table(
            "Each head's score for its job: the mean weight on its target (previous or first token)",
            ("head", "this sentence", "even spread", "ten texts", "random tokens, lowest"),
            tuple(
                (
                    _title(kind, *d.heads[i]),
                    float(d.scores[i]),
                    float(d.baselines[i]),
                    float(d.over_texts[i]),
                    float(d.on_random[i].min()),
                )
                for i, kind in enumerate(KINDS)
            ),
        )
    ]


def build(style, narrow: bool = False) -> Figure:
    d = data()
    words = [p.strip() for p in d.pieces]
    fig = Figure(figsize=(3.8, 7.6) if narrow else (7.2, 3.9), layout="constrained")
    axes = fig.subplots(2, 1) if narrow else fig.subplots(1, 2, sharey=True)
    for i, (ax, kind) in enumerate(zip(axes, KINDS, strict=True)):
        image = ax.imshow(d.weights[i], cmap=style.cmap, vmin=0.0, vmax=1.0, interpolation="none")
        ax.set_title(_title(kind, *d.heads[i]), fontsize=9)
        ax.set_xticks(range(len(words)), words, rotation=90, fontsize=8)
        ax.set_xlabel("key", fontsize=9)
        if narrow or i == 0:
            ax.set_yticks(range(len(words)), words, fontsize=8)
            ax.set_ylabel("query", fontsize=9)
        ax.tick_params(length=0)
        for spine in ax.spines.values():
            spine.set_visible(False)
    bar = fig.colorbar(image, ax=axes, location="bottom", shrink=0.8, aspect=30)
    bar.set_label("attention weight")
    bar.outline.set_visible(False)
    return fig
