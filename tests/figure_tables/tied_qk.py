"""The table under the figure tied-qk, rebuilt from its ``data()`` (``d``)."""

from __future__ import annotations


def expected(d) -> list[list[list]]:
    return [[[w, *row] for w, row in zip(d.words, m, strict=True)] for m in (d.separate, d.tied)]
