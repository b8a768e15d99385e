"""The trained model's trace of the source's sentence, shared by the trained-model figures.

The model (``qkv.smollm2``) is loaded from its weight cache; the matrices are small, so one
BLAS thread is faster than several on a busy machine.
"""

from __future__ import annotations

from functools import cache

SENTENCE = "The cat sat on the mat because it was warm"


@cache
def trace():
    """``qkv.smollm2.run(SENTENCE)``: every weight of all 30 layers x 9 heads."""
    from threadpoolctl import threadpool_limits

    from qkv import smollm2

    with threadpool_limits(limits=1, user_api="blas"):
        return smollm2.run(SENTENCE)


def label(piece: str) -> str:
    """A token as a label: its text without the leading space, in quotes."""
    return f"‘{piece.strip()}’"
