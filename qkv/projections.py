"""Where Q, K and V come from: three learned linear maps of the same input.

All the parameters of an attention layer live here. :func:`qkv.attention`
itself has none.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qkv._checks import as_float_array, whole_number
from qkv.dot_product import Attention, attention


@dataclass(frozen=True)
class Projections:
    """The three weight matrices of one attention head.

    ``w_q`` and ``w_k`` are ``(d_model, d_k)``: queries and keys are dotted
    together, so they must share ``d_k``. ``w_v`` is ``(d_model, d_v)`` and
    ``d_v`` is free.

    Examples
    --------
    >>> p = Projections(np.ones((8, 4)), np.ones((8, 4)), np.ones((8, 2)))
    >>> p.d_model, p.d_k, p.d_v
    (8, 4, 2)
    """

    w_q: np.ndarray
    w_k: np.ndarray
    w_v: np.ndarray

    def __post_init__(self):
        for name in ("w_q", "w_k", "w_v"):
            w = as_float_array(name, getattr(self, name))
            if w.ndim != 2:
                raise ValueError(f"{name} must be 2-D (d_model, d), got shape {w.shape}")
            object.__setattr__(self, name, w)
        if self.w_q.shape != self.w_k.shape:
            raise ValueError(
                f"w_q and w_k must have the same shape (d_model, d_k), "
                f"got {self.w_q.shape} and {self.w_k.shape}"
            )
        if self.w_v.shape[0] != self.w_q.shape[0]:
            raise ValueError(
                f"w_v must read the same d_model as w_q: got w_v {self.w_v.shape} and w_q {self.w_q.shape}"
            )

    @property
    def d_model(self) -> int:
        return self.w_q.shape[0]

    @property
    def d_k(self) -> int:
        return self.w_q.shape[1]

    @property
    def d_v(self) -> int:
        return self.w_v.shape[1]

    @classmethod
    def random(cls, rng, d_model: int, d_k: int, d_v: int | None = None) -> Projections:
        """Draw the three matrices with entries N(0, 1/d_model).

        That variance makes each component of ``x @ w`` have variance 1 when
        ``x`` has unit-variance entries: the assumption behind the ``√d_k``
        argument. ``rng`` is a NumPy ``Generator`` or a seed for one.

        Examples
        --------
        >>> p = Projections.random(np.random.default_rng(0), d_model=8, d_k=4, d_v=3)
        >>> p.w_q.shape, p.w_k.shape, p.w_v.shape
        ((8, 4), (8, 4), (8, 3))
        """
        rng = np.random.default_rng(rng)  # a Generator is used as it is
        d_model = whole_number("d_model", d_model, minimum=1)
        d_k = whole_number("d_k", d_k, minimum=1)
        d_v = d_k if d_v is None else whole_number("d_v", d_v, minimum=1)
        std = 1.0 / np.sqrt(d_model)
        return cls(
            w_q=rng.normal(0.0, std, (d_model, d_k)),
            w_k=rng.normal(0.0, std, (d_model, d_k)),
            w_v=rng.normal(0.0, std, (d_model, d_v)),
        )


def checked_input(name: str, x, p: Projections) -> np.ndarray:
    """``x`` as a float array whose last axis is ``p.d_model``, or a ValueError."""
    if not isinstance(p, Projections):
        raise ValueError(f"p must be a qkv.Projections, got {type(p).__name__}")
    x = as_float_array(name, x)
    if x.shape[-1] != p.d_model:
        raise ValueError(
            f"{name} has d_model={x.shape[-1]} (shape {x.shape}) but the "
            f"projections expect d_model={p.d_model}"
        )
    return x


# --8<-- [start:project]
def project(x, p: Projections) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Compute ``Q = X W_Q``, ``K = X W_K``, ``V = X W_V``.

    Parameters
    ----------
    x : array_like, shape (..., T, d_model)
    p : Projections

    Returns
    -------
    (Q, K, V) with shapes (..., T, d_k), (..., T, d_k), (..., T, d_v)

    Examples
    --------
    The same input gives three different matrices, because the weights differ:

    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(5, 8))
    >>> Q, K, V = project(x, Projections.random(rng, d_model=8, d_k=4, d_v=2))
    >>> Q.shape, K.shape, V.shape
    ((5, 4), (5, 4), (5, 2))
    >>> bool(np.allclose(Q, K))
    False
    """
    x = checked_input("x", x, p)
    return x @ p.w_q, x @ p.w_k, x @ p.w_v


# --8<-- [end:project]


def self_attention(x, p: Projections, mask=None, scale=True) -> Attention:
    """Attention where queries, keys and values all come from the same sequence ``x``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(4, 8))
    >>> self_attention(x, Projections.random(rng, 8, 4)).weights.shape
    (4, 4)
    """
    q, k, v = project(x, p)
    return attention(q, k, v, mask=mask, scale=scale)


# --8<-- [start:cross_attention]
def cross_attention(x_q, x_kv, p: Projections, mask=None, scale=True) -> Attention:
    """Attention with queries from ``x_q`` and keys and values from ``x_kv``.

    Parameters
    ----------
    x_q : array_like, shape (..., Tq, d_model)
        The sequence that asks (a decoder).
    x_kv : array_like, shape (..., Tk, d_model)
        The sequence that is read (an encoder's output).

    Returns
    -------
    Attention with weights (..., Tq, Tk) and output (..., Tq, d_v)

    Examples
    --------
    Three decoder positions reading five encoder positions: the weights are 3
    x 5, and each decoder position spreads a total of 1 over the encoder.

    >>> rng = np.random.default_rng(0)
    >>> p = Projections.random(rng, d_model=8, d_k=4)
    >>> decoder, encoder = rng.normal(size=(3, 8)), rng.normal(size=(5, 8))
    >>> w = cross_attention(decoder, encoder, p).weights
    >>> w.shape, bool(np.allclose(w.sum(axis=-1), 1.0))
    ((3, 5), True)
    """
    x_q = checked_input("x_q", x_q, p)
    x_kv = checked_input("x_kv", x_kv, p)
    q = x_q @ p.w_q  # (..., Tq, d_k): the asking sequence only needs queries
    k, v = x_kv @ p.w_k, x_kv @ p.w_v  # (..., Tk, d_k), (..., Tk, d_v)
    return attention(q, k, v, mask=mask, scale=scale)


# --8<-- [end:cross_attention]
