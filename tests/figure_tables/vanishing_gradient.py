"""The table under the figure vanishing-gradient, rebuilt from its ``data()`` (``d``)."""

from __future__ import annotations


def expected(d) -> list[list[list]]:
    return [
        [[int(k), *row] for k, row in zip(d.dims, d.quartiles[scale], strict=True)] for scale in (True, False)
    ]
