"""The table under the figure weighted-sum, rebuilt from its ``data()`` (``d``)."""

from __future__ import annotations


def expected(d) -> list[list[list]]:
    rows = [[w, a, *c] for w, a, c in zip(d.words, d.weights, d.contributions.tolist(), strict=True)]
    return [[*rows, ["output", float(d.weights.sum()), *d.output.tolist()]]]
