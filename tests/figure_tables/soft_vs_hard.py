"""The table under the figure soft-vs-hard, rebuilt from its ``data()`` (``d``)."""

from __future__ import annotations


def expected(d) -> list[list[list]]:
    return [
        [[n, s, h] for n, s, h in zip(d.names, d.soft, d.hard, strict=True)],
        [["soft (blend)", *d.soft_answer], ["hard (best key)", *d.hard_answer]],
    ]
