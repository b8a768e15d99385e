"""The table under the figure rope-pair, rebuilt from its ``data()`` (``d``)."""

from __future__ import annotations


def expected(d) -> list[list[list]]:
    return [
        [[p, *xy, a] for p, xy, a in zip(d.positions, d.turned.tolist(), d.angles, strict=True)],
        [[m, n, b, s] for (m, n), b, s in zip(d.cases, d.between, d.scores, strict=True)],
    ]
