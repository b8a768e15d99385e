"""The table under the figure tiled-memory, rebuilt from its ``data()`` (``d``)."""

from __future__ import annotations


def expected(d) -> list[list[list]]:
    return [
        [
            [t, a, b, a / b]
            for t, a, b in zip(d.lengths, d.attention_mib.tolist(), d.tiled_mib.tolist(), strict=True)
        ]
    ]
