"""The table under the figure key-or-value, rebuilt from its ``data()`` (``d``)."""

from __future__ import annotations


def expected(d) -> list[list[list]]:
    cases = ("as built", "milk's value changed", "milk's key wiped")
    return [[[c, *row] for c, row in zip(cases, m, strict=True)] for m in (d.weights, d.received)]
