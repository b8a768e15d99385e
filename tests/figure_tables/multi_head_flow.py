"""The table under the figure multi-head-flow, rebuilt from its ``data()`` (``d``)."""

from __future__ import annotations


def expected(d) -> list[list[list]]:
    return [[[w, *row] for w, row in zip(d.words, head, strict=True)] for head in d.weights]
