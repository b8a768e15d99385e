"""The table under the figure explorer-widths, rebuilt from its ``data()`` (``d``)."""

from __future__ import annotations


def expected(d) -> list[list[list]]:
    return [
        [[f"dₖ = {w}", *row] for w, row in zip(d.widths, weights, strict=True)]
        for weights in (d.scaled, d.unscaled)
    ]
