"""The tables under the figure sinusoids, rebuilt from its ``data()`` (``d``)."""

from __future__ import annotations


def expected(d) -> list[list[list]]:
    return [
        [[str(p), *row] for p, row in zip(d.positions.tolist(), d.vectors.tolist(), strict=True)],
        [[c, p] for c, p in zip(d.traced, d.periods.tolist(), strict=True)],
    ]
