"""The table under the figure saturation, rebuilt from its ``data()`` (``d``)."""

from __future__ import annotations


def expected(d) -> list[list[list]]:
    return [
        [[int(k), *row] for k, row in zip(d.dims, values[scale], strict=True)]
        for values in (d.entropy, d.max_weight)
        for scale in (True, False)
    ]
