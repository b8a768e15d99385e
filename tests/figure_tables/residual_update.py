"""The table under the figure residual-update, rebuilt from its ``data()`` (``d``)."""

from __future__ import annotations


def expected(d) -> list[list[list]]:
    return [
        [
            [f, b, c, a]
            for f, b, c, a in zip(
                d.features, d.before.tolist(), d.change.tolist(), d.after.tolist(), strict=True
            )
        ]
    ]
