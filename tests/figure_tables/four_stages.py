"""The table under the figure four-stages, rebuilt from its ``data()`` (``d``)."""

from __future__ import annotations


def expected(d) -> list[list[list]]:
    return [
        [[w, r, s, p] for w, r, s, p in zip(d.words, d.raw, d.scaled, d.weights, strict=True)],
        [[w, *v] for w, v in zip([*d.words, "output"], [*d.values, d.output], strict=True)],
    ]
