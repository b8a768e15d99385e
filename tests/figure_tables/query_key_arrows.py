"""The tables under the figure query-key-arrows, rebuilt from its ``data()`` (``d``)."""

from __future__ import annotations


def expected(d) -> list[list[list]]:
    return [
        [[w, *k, s, a] for w, k, s, a in zip(d.words, d.keys.tolist(), d.scores, d.weights, strict=True)],
        [[d.asker, *d.query.tolist(), d.off_plane]],
    ]
