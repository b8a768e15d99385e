"""Checkers for the exercises in which you write a piece of attention yourself.

Each ``check_*`` function takes your function, which has the signature of the qkv function
it mirrors, runs it and qkv's on many seeded random inputs and on the edge cases of the
traps chapter (huge scores, masked keys, a single position), and answers with one
sentence: that it passed, or the first thing that is wrong and how to put it right.

The answer is a :class:`CheckResult`, not an exception. In a notebook it shows as its
sentence, with no traceback into this module, and the cells after it still run; in a
script, ``print`` it. ``result.ok`` (or ``bool(result)``) says whether it passed.

A checker compares what your function returns. It cannot tell *how* it got there: an
online softmax that reads the row twice passes, as long as its weights are right.
"""

from qkv.exercises._verdict import ASK_AGAIN, CheckResult
from qkv.exercises.attention import check_attention
from qkv.exercises.cache import check_kv_cache_step
from qkv.exercises.heads import check_split_heads
from qkv.exercises.learning import check_gradient_step
from qkv.exercises.masks import check_causal_mask
from qkv.exercises.merged import check_merged_scores
from qkv.exercises.multi_head import check_multi_head_attention
from qkv.exercises.one_query import check_one_query_attention
from qkv.exercises.online import check_online_softmax
from qkv.exercises.rope import check_rope
from qkv.exercises.scaled_scores import check_scaled_scores
from qkv.exercises.softmax import check_softmax

__all__ = [
    "ASK_AGAIN",
    "CheckResult",
    "check_attention",
    "check_causal_mask",
    "check_gradient_step",
    "check_kv_cache_step",
    "check_merged_scores",
    "check_multi_head_attention",
    "check_one_query_attention",
    "check_online_softmax",
    "check_rope",
    "check_scaled_scores",
    "check_softmax",
    "check_split_heads",
]
