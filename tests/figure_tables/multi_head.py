"""The table under the figure multi-head, rebuilt from its ``data()`` (``d``)."""

from __future__ import annotations


def expected(d) -> list[list[list]]:
    heads = [[[w, *row] for w, row in zip(d.words, head, strict=True)] for head in d.weights]
    return [*heads, [[h, dh, f] for (h, dh), f in d.flops.items()]]
