"""The table under the figure head-roles, rebuilt from its ``data()`` (``d``)."""

from __future__ import annotations


def expected(d) -> list[list[list]]:
    return [[[w, *row] for w, row in zip(d.labels, m, strict=True)] for m in (d.previous, d.induction)]
