"""The tables under the figure trained-two-heads, rebuilt from its ``data()`` (``d``)."""

from __future__ import annotations


def expected(d) -> list[list[list]]:
    words = [f"‘{p.strip()}’" for p in d.pieces]
    grids = [
        [[word, *(round(x, 3) for x in row)] for word, row in zip(words, weights, strict=True)]
        for weights in d.weights.tolist()
    ]  # shown to 3 decimals
    jobs = ("the previous token", "the first token")
    scores = [
        [f"layer {layer + 1} head {head + 1}: {job}", s, b, o, min(r)]
        for (layer, head), job, s, b, o, r in zip(
            d.heads, jobs, d.scores, d.baselines, d.over_texts, d.on_random.tolist(), strict=True
        )
    ]
    return [*grids, scores]
