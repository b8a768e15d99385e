"""The table under the figure dot-vs-cosine, rebuilt from its ``data()`` (``d``)."""

from __future__ import annotations


def expected(d) -> list[list[list]]:
    columns = (d.names, d.lengths, d.angles, d.dot_scores, d.dot, d.cos_scores, d.cosine)
    return [[list(row) for row in zip(*columns, strict=True)]]
