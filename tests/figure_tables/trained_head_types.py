"""The table under the figure trained-head-types, rebuilt from its ``data()`` (``d``)."""

from __future__ import annotations


def expected(d) -> list[list[list]]:
    return [
        [[layer + 1, *(round(x, 3) for x in row)] for layer, row in enumerate(scores)]
        for scores in d.scores.tolist()
    ]  # shown to 3 decimals
