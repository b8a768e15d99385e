"""Multi-head attention: split into heads, attend in each, concatenate, project.

One function covers multi-head (``n_kv_heads == n_heads``), grouped-query (``1
< n_kv_heads < n_heads``) and multi-query (``n_kv_heads == 1``) attention: the
only difference is how many distinct key/value heads the query heads share.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qkv._checks import as_float_array, whole_number
from qkv.dot_product import Attention, attention


@dataclass(frozen=True)
class MultiHeadWeights:
    """Weights of one multi-head attention layer.

    ``w_q``: (d_model, n_heads * d_head); ``w_k``, ``w_v``: (d_model,
    n_kv_heads * d_head); ``w_o``: (n_heads * d_head, d_model), the output
    projection applied after concatenation.

    Examples
    --------
    Four query heads sharing two key/value heads of width 3 (grouped-query
    attention):

    >>> w = MultiHeadWeights(np.ones((8, 12)), np.ones((8, 6)), np.ones((8, 6)),
    ...                      np.ones((12, 8)), n_heads=4, n_kv_heads=2)
    >>> w.d_model, w.d_head
    (8, 3)
    """

    w_q: np.ndarray
    w_k: np.ndarray
    w_v: np.ndarray
    w_o: np.ndarray
    n_heads: int
    n_kv_heads: int

    def __post_init__(self):
        whole_number("n_heads", self.n_heads, minimum=1)
        whole_number("n_kv_heads", self.n_kv_heads, minimum=1)
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"n_heads ({self.n_heads}) must be a positive multiple of n_kv_heads ({self.n_kv_heads})"
            )
        if np.ndim(self.w_q) != 2:
            raise ValueError(f"w_q must be 2-D (d_model, n_heads * d_head), got shape {np.shape(self.w_q)}")
        d_model, width_q = np.shape(self.w_q)
        if width_q % self.n_heads:
            raise ValueError(f"w_q width {width_q} is not divisible by n_heads={self.n_heads}")
        d_head = width_q // self.n_heads
        want = {
            "w_k": (d_model, self.n_kv_heads * d_head),
            "w_v": (d_model, self.n_kv_heads * d_head),
            "w_o": (self.n_heads * d_head, d_model),
        }
        for name, shape in want.items():
            got = np.shape(getattr(self, name))
            if got != shape:
                raise ValueError(
                    f"{name} must have shape {shape} for n_heads={self.n_heads}, "
                    f"n_kv_heads={self.n_kv_heads}, d_head={d_head}; got {got}"
                )

    @property
    def d_model(self) -> int:
        return np.shape(self.w_q)[0]

    @property
    def d_head(self) -> int:
        return np.shape(self.w_q)[1] // self.n_heads

    @classmethod
    def random(
        cls,
        rng,
        d_model: int,
        n_heads: int,
        n_kv_heads: int | None = None,
        d_head: int | None = None,
    ) -> MultiHeadWeights:
        """Random weights with entries N(0, 1/fan_in).

        ``d_head`` defaults to ``d_model // n_heads``, the usual choice that
        keeps the total width of all heads equal to ``d_model``. ``rng`` is a
        NumPy ``Generator`` or a seed for one.

        Examples
        --------
        >>> w = MultiHeadWeights.random(np.random.default_rng(0), d_model=512, n_heads=8)
        >>> w.d_head, w.w_q.shape, w.w_o.shape
        (64, (512, 512), (512, 512))
        """
        rng = np.random.default_rng(rng)  # a Generator is used as it is
        d_model = whole_number("d_model", d_model, minimum=1)
        n_heads = whole_number("n_heads", n_heads, minimum=1)
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        d_head = whole_number("d_head", d_model // n_heads if d_head is None else d_head, minimum=1)
        return cls(
            w_q=rng.normal(0, d_model**-0.5, (d_model, n_heads * d_head)),
            w_k=rng.normal(0, d_model**-0.5, (d_model, n_kv_heads * d_head)),
            w_v=rng.normal(0, d_model**-0.5, (d_model, n_kv_heads * d_head)),
            w_o=rng.normal(0, (n_heads * d_head) ** -0.5, (n_heads * d_head, d_model)),
            n_heads=n_heads,
            n_kv_heads=n_kv_heads,
        )


# --8<-- [start:heads]
def split_heads(x, n_heads: int) -> np.ndarray:
    """Cut the last axis into ``n_heads`` equal slices, one per head.

    ``(..., T, n_heads * d_head)`` becomes ``(..., n_heads, T, d_head)``.

    Examples
    --------
    >>> split_heads(np.zeros((2, 5, 12)), n_heads=3).shape
    (2, 3, 5, 4)
    """
    x = as_float_array("x", x)  # (..., T, width)
    *lead, t, width = x.shape
    n_heads = whole_number("n_heads", n_heads, minimum=1)
    if width % n_heads:
        raise ValueError(f"last axis {width} (shape {x.shape}) is not divisible by n_heads={n_heads}")
    # (..., T, heads, d_head)
    x = x.reshape(*lead, t, n_heads, width // n_heads)
    return np.swapaxes(x, -3, -2)  # (..., heads, T, d_head)


def merge_heads(x) -> np.ndarray:
    """Undo :func:`split_heads`: put the heads back side by side.

    Examples
    --------
    >>> x = np.arange(24.0).reshape(2, 12)
    >>> bool((merge_heads(split_heads(x, 3)) == x).all())
    True
    """
    x = as_float_array("x", x, min_ndim=3)  # (..., heads, T, d_head)
    x = np.swapaxes(x, -3, -2)  # (..., T, heads, d_head)
    *lead, t, heads, d_head = x.shape
    return x.reshape(*lead, t, heads * d_head)  # (..., T, heads * d_head)


# --8<-- [end:heads]


def checked_inputs(x_q, x_kv, w: MultiHeadWeights) -> tuple[np.ndarray, np.ndarray]:
    """``x_q`` and ``x_kv`` as float arrays whose last axis is ``w.d_model``, or a ValueError."""
    if not isinstance(w, MultiHeadWeights):
        raise ValueError(f"w must be a qkv.MultiHeadWeights, got {type(w).__name__}")
    return (as_float_array("x_q", x_q, width=w.d_model), as_float_array("x_kv", x_kv, width=w.d_model))


# --8<-- [start:multi_head_attention]
def grouped_attention(q, k, v, mask=None, scale=True) -> Attention:
    """Attention in every query head, each reading the key/value head of its group.

    With ``n_heads`` query heads and ``n_kv_heads`` key/value heads, query head ``h`` reads
    key/value head ``h // (n_heads // n_kv_heads)``: consecutive query heads share one.
    ``n_kv_heads == n_heads`` is ordinary multi-head attention.

    Parameters
    ----------
    q : array_like, shape (..., n_heads, Tq, d_head)
    k, v : array_like, shape (..., n_kv_heads, Tk, d_head)
        ``n_heads`` must be a multiple of ``n_kv_heads``.
    mask : bool array broadcastable to (..., Tq, Tk), optional
        Shared by all heads (a head axis is inserted for you).
    scale : bool or float
        As in :func:`qkv.attention`.

    Returns
    -------
    Attention
        weights of shape (..., n_heads, Tq, Tk); output of shape (..., n_heads, Tq, d_head).

    Examples
    --------
    Four query heads over two key/value heads: heads 0 and 1 read the same keys, so the
    same query gives them the same weights.

    >>> rng = np.random.default_rng(0)
    >>> q = np.repeat(rng.normal(size=(1, 3, 8)), 4, axis=0)  # (4, 3, 8): one query, 4 times
    >>> k, v = rng.normal(size=(2, 2, 5, 8))                  # (2, 5, 8) each
    >>> weights, out = grouped_attention(q, k, v)
    >>> weights.shape, out.shape
    ((4, 3, 5), (4, 3, 8))
    >>> bool(np.allclose(weights[0], weights[1])), bool(np.allclose(weights[1], weights[2]))
    (True, False)
    """
    if (
        min(np.ndim(q), np.ndim(k), np.ndim(v)) < 3
        or np.shape(k)[-3] == 0
        or np.shape(q)[-3] % np.shape(k)[-3]
        or np.shape(v)[-3] != np.shape(k)[-3]
    ):
        raise ValueError(
            f"q must be (..., n_heads, Tq, d_head) and k, v (..., n_kv_heads, Tk, d) with "
            f"n_heads a multiple of n_kv_heads >= 1; got q {np.shape(q)}, k {np.shape(k)}, "
            f"v {np.shape(v)}"
        )
    # query heads that share one key/value head
    group = np.shape(q)[-3] // np.shape(k)[-3]
    k = np.repeat(k, group, axis=-3)  # (..., heads, Tk, d_head)
    v = np.repeat(v, group, axis=-3)  # (..., heads, Tk, d_head)
    if mask is not None:
        mask = np.asarray(mask)
        if mask.ndim < 2:
            raise ValueError(f"mask must be (..., Tq, Tk), got shape {mask.shape}")
        mask = mask[..., None, :, :]  # same mask for every head
    return attention(q, k, v, mask=mask, scale=scale)


def multi_head_attention(x_q, x_kv, w: MultiHeadWeights, mask=None, scale=True) -> Attention:
    """Run ``w.n_heads`` attentions side by side, then mix them with ``w_o``.

    Parameters
    ----------
    x_q : array_like, shape (..., Tq, d_model)
        Where the queries come from.
    x_kv : array_like, shape (..., Tk, d_model)
        Where keys and values come from: ``x_q`` itself for self-attention,
        another sequence for cross-attention.
    w : MultiHeadWeights
    mask : bool array broadcastable to (..., Tq, Tk), optional
        Shared by all heads (a head axis is inserted for you).

    Returns
    -------
    Attention
        weights of shape (..., n_heads, Tq, Tk); output of shape (..., Tq,
        d_model).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> w = MultiHeadWeights.random(rng, d_model=16, n_heads=4, n_kv_heads=2)
    >>> x = rng.normal(size=(5, 16))
    >>> weights, out = multi_head_attention(x, x, w)
    >>> weights.shape, out.shape
    ((4, 5, 5), (5, 16))
    """
    x_q, x_kv = checked_inputs(x_q, x_kv, w)  # (..., Tq, d_model), (..., Tk, d_model)
    q = split_heads(x_q @ w.w_q, w.n_heads)  # (..., heads, Tq, d_head)
    k = split_heads(x_kv @ w.w_k, w.n_kv_heads)  # (..., kv_heads, Tk, d_head)
    v = split_heads(x_kv @ w.w_v, w.n_kv_heads)  # (..., kv_heads, Tk, d_head)
    weights, heads_out = grouped_attention(q, k, v, mask=mask, scale=scale)
    output = merge_heads(heads_out) @ w.w_o  # (..., Tq, d_model)
    return Attention(weights, output)


# --8<-- [end:multi_head_attention]
