"""The table under the figure masks, rebuilt from its ``data()`` (``d``)."""

from __future__ import annotations


def expected(d) -> list[list[list]]:
    return [
        [[w, *row] for w, row in zip(d.words, d.causal, strict=True)],
        [[w, *row] for w, row in zip(d.padded_words, d.padding, strict=True)],
    ]
