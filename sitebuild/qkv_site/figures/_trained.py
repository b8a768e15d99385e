"""The trained model's runs shared by the trained-model figures: the texts of
docs/trained-model.md and its repeated random tokens, run by :mod:`qkv.smollm2`.

The texts and the threshold are the page's content, fixed in the page's own code
(``snippets/trained_model.py``, which the page shows and a reader runs): they are read
from there, so there is one source, and the figure's cache entry depends on that file
(:data:`READS`). The model is loaded from its weight cache; the matrices are small, so one
BLAS thread is faster than several on a busy machine.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

PAGE_CODE = Path(__file__).resolve().parents[3] / "snippets" / "trained_model.py"
READS = (PAGE_CODE,)  # files a figure built from these runs reads without importing them
REPEATS = (4, 12, 0)  # texts, random tokens in each half, seed: as docs/trained-model.md


def page_constant(name: str):
    """The value the page's code assigns to ``name`` at its top level (a literal)."""
    tree = ast.parse(PAGE_CODE.read_text(encoding="utf-8"), filename=str(PAGE_CODE))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == name for target in node.targets
        ):
            return ast.literal_eval(node.value)
    raise LookupError(f"{PAGE_CODE} assigns no literal to {name} at its top level")


TEXTS: tuple[str, ...] = page_constant("TEXTS")
"""The ten ordinary texts of docs/trained-model.md, chosen before any score was computed."""
THRESHOLD: float = page_constant("THRESHOLD")
"""A head is counted as a kind above this mean weight on the kind's targets."""


@cache
def texts():
    """``qkv.smollm2.run`` of every text of :data:`TEXTS`."""
    from threadpoolctl import threadpool_limits

    from qkv import smollm2

    with threadpool_limits(limits=1, user_api="blas"):
        model = smollm2.load()
        return tuple(smollm2.run(text, model) for text in TEXTS)


@cache
def repeated():
    """``qkv.smollm2.forward`` of each text of random tokens written twice."""
    from threadpoolctl import threadpool_limits

    from qkv import smollm2
    from qkv.lab import head_scores

    with threadpool_limits(limits=1, user_api="blas"):
        model = smollm2.load()
        ids = head_scores.repeated_random_tokens(*REPEATS[:2], seed=REPEATS[2])
        return tuple(smollm2.forward(model, row) for row in ids)


def label(piece: str) -> str:
    """A token as a label: its text without the leading space, in quotes."""
    return f"‘{piece.strip()}’"
