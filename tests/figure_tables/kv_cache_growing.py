"""The table under the figure kv-cache-growing, rebuilt from its ``data()`` (``d``)."""

from __future__ import annotations


def expected(d) -> list[list[list]]:
    width = len(d.words)
    return [
        [
            [f"step {i}: {word}", len(keys), added, moved, *weights, *[""] * (width - len(weights))]
            for i, (word, keys, added, moved, weights) in enumerate(
                zip(d.words, d.keys, d.added, d.moved, d.weights, strict=True), start=1
            )
        ]
    ]
