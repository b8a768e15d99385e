"""The tables under the figure trained-it-query, rebuilt from its ``data()`` (``d``)."""

from __future__ import annotations


def expected(d) -> list[list[list]]:
    words = [f"‘{p.strip()}’" for p in d.pieces]
    return [
        [[word, w] for word, w in zip(words[: a + 1], row[: a + 1], strict=True)]
        for a, row in zip(d.asking, d.rows.tolist(), strict=True)
    ]
