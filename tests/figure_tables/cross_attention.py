"""The table under the figure cross-attention, rebuilt from its ``data()`` (``d``)."""

from __future__ import annotations


def expected(d) -> list[list[list]]:
    return [[[q, *w] for q, w in zip(d.query_words, d.weights, strict=True)]]
