"""The table under the figure score-spread, rebuilt from its ``data()`` (``d``)."""

from __future__ import annotations


def expected(d) -> list[list[list]]:
    return [[[int(k), u, s] for k, u, s in zip(d.dims, d.unscaled, d.scaled, strict=True)]]
