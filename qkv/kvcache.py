"""Token-by-token decoding with and without a key/value cache, counting the work.

A decoder generates one token at a time. Its keys and values for earlier
tokens do not change when a new token arrives (causal masking means earlier
positions never look at later ones), so they can be computed once and stored.

What the cache saves, precisely: the key/value *projections* per new token
drop from ``t`` (re-project the whole prefix) to 1. What it does not save: the
new token's query is still dotted with all ``t`` cached keys, so score work
per token still grows with ``t``. The counters below record both, counted from the
arrays each step computes (the rows that went through ``w_k`` and ``w_v``, the entries
of the weights), so a decoder that did more work would count more.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from qkv._checks import as_float_array, whole_number
from qkv.dot_product import attention
from qkv.masks import causal_mask
from qkv.multihead import (
    MultiHeadWeights,
    merge_heads,
    multi_head_attention,
    split_heads,
)


@dataclass
class WorkCounter:
    """Work done while decoding, counted per generated token.

    ``kv_projections[i]``: token positions whose key and value were projected
    at step i (rows multiplied by ``w_k`` and ``w_v``). ``scores[i]``: query-key
    dot products computed at step i, summed over heads (entries of the weights).

    Examples
    --------
    >>> counter = WorkCounter(kv_projections=[1, 1, 1], scores=[2, 4, 6])
    >>> counter.total_kv_projections, counter.total_scores
    (3, 12)
    """

    kv_projections: list[int] = field(default_factory=list)
    scores: list[int] = field(default_factory=list)

    @property
    def total_kv_projections(self) -> int:
        return sum(self.kv_projections)

    @property
    def total_scores(self) -> int:
        return sum(self.scores)


@dataclass
class KVCache:
    """Keys and values of the tokens seen so far, per key/value head.

    ``keys`` and ``values`` have shape ``(n_kv_heads, T, d_head)`` and grow
    along T.

    Examples
    --------
    >>> cache = KVCache.empty(n_kv_heads=2, d_head=4)
    >>> cache.append(np.zeros((2, 3, 4)), np.ones((2, 3, 4)))  # three positions
    >>> len(cache), cache.keys.shape, cache.nbytes()  # float64: 8 bytes a number
    (3, (2, 3, 4), 384)
    """

    keys: np.ndarray
    values: np.ndarray

    @classmethod
    def empty(cls, n_kv_heads: int, d_head: int, dtype=np.float64) -> KVCache:
        """A cache holding no position yet, storing numbers of ``dtype``.

        Examples
        --------
        >>> KVCache.empty(n_kv_heads=3, d_head=64, dtype=np.float32).keys.shape
        (3, 0, 64)
        """
        n_kv_heads = whole_number("n_kv_heads", n_kv_heads, minimum=1)
        d_head = whole_number("d_head", d_head, minimum=1)
        return cls(
            np.zeros((n_kv_heads, 0, d_head), dtype=dtype),
            np.zeros((n_kv_heads, 0, d_head), dtype=dtype),
        )

    def __len__(self) -> int:
        return self.keys.shape[-2]

    def append(self, k, v) -> None:
        """Add the key and value of new positions, each ``(n_kv_heads, t_new, d_head)``."""
        k, v = as_float_array("k", k, min_ndim=3), as_float_array("v", v, min_ndim=3)
        if np.shape(k) != np.shape(v) or np.shape(k)[::2] != self.keys.shape[::2]:
            raise ValueError(
                f"new k {np.shape(k)} and v {np.shape(v)} must both be "
                f"(n_kv_heads, t_new, d_head) = ({self.keys.shape[0]}, t_new, {self.keys.shape[2]})"
            )
        # the cache keeps its own dtype: a float32 cache stays 4 bytes a number
        self.keys = np.concatenate([self.keys, k], axis=-2, dtype=self.keys.dtype)
        self.values = np.concatenate([self.values, v], axis=-2, dtype=self.values.dtype)

    def nbytes(self) -> int:
        """Bytes held by this cache (keys and values)."""
        return self.keys.nbytes + self.values.nbytes


def _check_sequence(x, w: MultiHeadWeights) -> np.ndarray:
    if not isinstance(w, MultiHeadWeights):
        raise ValueError(f"w must be a qkv.MultiHeadWeights, got {type(w).__name__}")
    x = as_float_array("x", x)
    if x.ndim != 2 or x.shape[1] != w.d_model:
        raise ValueError(f"x must be (T, d_model={w.d_model}), got shape {x.shape}")
    return x


# --8<-- [start:decode_cached]
def decode_with_cache(x, w: MultiHeadWeights, counter: WorkCounter | None = None) -> np.ndarray:
    """Causal self-attention, one token at a time, reusing cached K and V.

    Parameters
    ----------
    x : array_like, shape (T, d_model)
        The tokens' inputs, fed one per step.
    w : MultiHeadWeights
    counter : WorkCounter, optional
        Receives the work done at each step.

    Returns
    -------
    ndarray, shape (T, d_model): the output for each token, as it was
    produced.

    Examples
    --------
    The cached outputs equal one causal pass over the whole sequence:

    >>> rng = np.random.default_rng(0)
    >>> w = MultiHeadWeights.random(rng, d_model=16, n_heads=4, n_kv_heads=2)
    >>> x = rng.normal(size=(6, 16))
    >>> full = multi_head_attention(x, x, w, mask=causal_mask(6)).output
    >>> cached = decode_with_cache(x, w)
    >>> bool(np.allclose(cached, full, rtol=1e-12, atol=1e-12))
    True
    """
    x = _check_sequence(x, w)
    counter = WorkCounter() if counter is None else counter
    # the cache stores the type the projections give (float32 inputs: a float32 cache)
    cache = KVCache.empty(w.n_kv_heads, w.d_head, dtype=np.result_type(x, w.w_k, w.w_v))
    group = w.n_heads // w.n_kv_heads
    outputs = []
    for t in range(len(x)):
        token = x[t : t + 1]  # (1, d_model): only the newest token is new
        q = split_heads(token @ w.w_q, w.n_heads)  # (heads, 1, d_head)
        k_new = split_heads(token @ w.w_k, w.n_kv_heads)  # (kv_heads, 1, d_head)
        v_new = split_heads(token @ w.w_v, w.n_kv_heads)
        cache.append(k_new, v_new)
        k = np.repeat(cache.keys, group, axis=0)  # (heads, t+1, d_head)
        v = np.repeat(cache.values, group, axis=0)
        # no mask needed: the cache holds only the past
        weights, out = attention(q, k, v)  # (heads, 1, t+1), (heads, 1, d_head)
        outputs.append(merge_heads(out) @ w.w_o)  # (1, d_model)
        counter.kv_projections.append(k_new.shape[-2])  # positions projected now: 1
        counter.scores.append(weights.size)  # one query against t+1 keys, every head
    return np.concatenate(outputs, axis=0)


# --8<-- [end:decode_cached]


# --8<-- [start:decode_uncached]
def decode_without_cache(x, w: MultiHeadWeights, counter: WorkCounter | None = None) -> np.ndarray:
    """Causal decoding that recomputes the whole prefix at every step.

    This is what ``model(prefix)[-1]`` in a plain generation loop does: each
    step projects every token of the prefix again and computes the full causal
    score matrix.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> w = MultiHeadWeights.random(rng, d_model=8, n_heads=2)
    >>> x = rng.normal(size=(5, 8))
    >>> c = WorkCounter()
    >>> _ = decode_without_cache(x, w, c)
    >>> c.kv_projections  # the whole prefix is projected again at every step
    [1, 2, 3, 4, 5]
    """
    x = _check_sequence(x, w)
    counter = WorkCounter() if counter is None else counter
    outputs = []
    for t in range(1, len(x) + 1):
        prefix = x[:t]  # (t, d_model): everything so far, projected again
        weights, out = multi_head_attention(prefix, prefix, w, mask=causal_mask(t))
        outputs.append(out[-1:])  # keep only the newest token's output
        counter.kv_projections.append(len(prefix))  # every position, again
        counter.scores.append(weights.size)  # the full t x t scores, every head
    return np.concatenate(outputs, axis=0)


# --8<-- [end:decode_uncached]
