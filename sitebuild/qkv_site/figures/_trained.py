"""The trained model's runs shared by the trained-model figures: the texts of
:mod:`qkv.lab.texts` (the ones docs/trained-model.md runs) and its repeated random tokens,
run by :mod:`qkv.smollm2`. The model is loaded from its weight cache; the matrices are
small, so one BLAS thread is faster than several on a busy machine.
"""

from __future__ import annotations

from functools import cache

from qkv.lab.texts import ORDINARY as TEXTS
from qkv.lab.texts import REPEATS, THRESHOLD

__all__ = ["REPEATS", "TEXTS", "THRESHOLD", "label", "repeated", "texts"]


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
