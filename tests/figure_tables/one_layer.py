"""The table under the figure one-layer, rebuilt from its ``data()`` (``d``)."""

from __future__ import annotations


def expected(d) -> list[list[list]]:
    return [
        [
            [
                step.name,
                "; ".join(f"{n} {' × '.join(map(str, d.arrays[n].shape))}" for n in step.outputs),
                "yes" if d.mixes[step.name] else "no",
            ]
            for step in d.steps
        ]
    ]
