"""The table under the figure kv-cache-work, rebuilt from its ``data()`` (``d``)."""

from __future__ import annotations


def expected(d) -> list[list[list]]:
    c, u = d.cached, d.uncached
    return [
        [
            [int(t), *cols]
            for t, *cols in zip(
                d.position, c.kv_projections, u.kv_projections, c.scores, u.scores, strict=True
            )
        ]
    ]
