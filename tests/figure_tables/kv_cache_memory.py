"""The table under the figure kv-cache-memory, rebuilt from its ``data()`` (``d``)."""

from __future__ import annotations


def expected(d) -> list[list[list]]:
    return [[[f"{line.label} ({line.kind})", *line.gib] for line in d]]
