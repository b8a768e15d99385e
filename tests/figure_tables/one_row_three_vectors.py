"""The table under the figure one-row-three-vectors, rebuilt from its ``data()`` (``d``)."""

from __future__ import annotations


def expected(d) -> list[list[list]]:
    return [[[c, e] for c, e in zip(row.columns, row.values, strict=True)] for row in d]
