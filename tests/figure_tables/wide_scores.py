"""The table under the figure wide-scores, rebuilt from its ``data()`` (``d``)."""

from __future__ import annotations


def expected(d) -> list[list[list]]:
    return [
        [
            [f"dₖ = {d_k}, {label}", *weights[i]]
            for i, d_k in enumerate(d.widths)
            for label, weights in (("q·k", d.unscaled), ("q·k / √dₖ", d.scaled))
        ]
    ]
