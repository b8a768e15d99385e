"""The table under the figure kernel-regression, rebuilt from its ``data()`` (``d``)."""

from __future__ import annotations


def expected(d) -> list[list[list]]:
    return [
        [[i + 1, n, r, a, k] for i, (n, r, a, k) in enumerate(zip(*panel, strict=True))]
        for panel in (d.same_norm, d.mixed_norm)
    ]
