"""The table under the figure data-flow, rebuilt from its ``data()`` (``d``)."""

from __future__ import annotations


def expected(d) -> list[list[list]]:
    return [[[array, *shape] for array, shape in d.items()]]
