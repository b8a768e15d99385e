"""Rotary position embedding (RoPE): position enters queries and keys by rotation.

Attention as defined in :mod:`qkv.dot_product` is blind to order: shuffle the tokens and
each one gets the same output, shuffled. RoPE (Su et al., 2021, "RoFormer") fixes that by
rotating each query and key before the dot product, by an angle proportional to its
position. Values are never rotated, so position changes *where a token looks*, not *what
it is handed*.

The last axis is read as ``d/2`` pairs of adjacent numbers, ``(0, 1), (2, 3), ...``; pair
``i`` at position ``m`` is turned by the angle ``m * base**(-2i/d)``. Because a rotation by
``a`` followed by the inverse of a rotation by ``b`` is a rotation by ``a - b``, the score
``rope(q, m) · rope(k, n)`` depends on the positions only through the offset ``m - n``.

(Hugging Face's Llama code pairs dimension ``i`` with ``i + d/2`` instead; the two are
the same rotation after a fixed reordering of each head's dimensions, which is how the
GGUF files of llama.cpp store their query and key weights.)
"""

from __future__ import annotations

import numpy as np

from qkv._checks import as_float_array, real_array, whole_number

# --8<-- [start:rope]


def rope_angles(positions, d: int, base: float = 10_000.0) -> np.ndarray:
    """The rotation angle of every pair at every position, shape ``(T, d/2)``.

    Pair ``i`` turns by ``position * base**(-2i/d)``: the first pair turns by one radian
    per position, the last one almost not at all.

    Examples
    --------
    >>> rope_angles([0, 1, 2], d=4, base=100.0).round(3).tolist()
    [[0.0, 0.0], [1.0, 0.1], [2.0, 0.2]]
    """
    if whole_number("d", d, minimum=2) % 2:
        raise ValueError(f"RoPE rotates pairs of dimensions, so d must be even; got d={d}")
    if not (isinstance(base, int | float | np.number) and np.isfinite(base) and base > 0):
        raise ValueError(f"base must be a positive finite number, got {base!r}")
    positions = real_array("positions", positions).astype(np.float64)
    if positions.ndim != 1 or not np.isfinite(positions).all():
        raise ValueError(f"positions must be one finite number per token (shape (T,)); got {positions!r}")
    frequencies = base ** (-np.arange(0, d, 2) / d)  # (d/2,)
    return positions[:, None] * frequencies[None, :]  # (T, d/2)


def rope(x: np.ndarray, positions=None, base: float = 10_000.0) -> np.ndarray:
    """Rotate each adjacent pair of ``x``'s last axis by its position's angle.

    Parameters
    ----------
    x : array, shape ``(..., T, d)``
        Queries or keys (never values), ``d`` even.
    positions : sequence of T ints, optional
        The position of each row; ``0, 1, ..., T-1`` when omitted. A KV cache passes the
        absolute positions of the new tokens.
    base : float
        Sets the slowest rotation; Llama 2 uses 10,000, SmolLM2 uses 100,000.

    Returns
    -------
    array, shape ``(..., T, d)``: same norms as ``x``, pairs turned.

    Examples
    --------
    The score depends on the two positions only through the signed offset ``m - n``:
    the same offset anywhere gives the same score, but a key 3 before the query and one
    3 after it are told apart (it is not the distance ``|m - n|``):

    >>> rng = np.random.default_rng(0)
    >>> q, k = rng.normal(size=(2, 1, 8))
    >>> def score(m, n):
    ...     return (rope(q, [m]) @ rope(k, [n]).T).item()
    >>> bool(np.isclose(score(5, 2), score(13, 10)))
    True
    >>> bool(np.isclose(score(5, 2), score(5, 8)))
    False
    >>> bool(np.isclose(np.linalg.norm(rope(q, [7])), np.linalg.norm(q)))
    True
    """
    x = as_float_array("x", x)  # (..., T, d)
    t, d = x.shape[-2], x.shape[-1]
    positions = np.arange(t) if positions is None else positions
    angles = rope_angles(positions, d, base)  # (T, d/2)
    if angles.shape[0] != t:
        raise ValueError(f"got {angles.shape[0]} positions for {t} tokens (x has shape {x.shape})")
    cos, sin = np.cos(angles), np.sin(angles)
    even, odd = x[..., 0::2], x[..., 1::2]  # the two halves of each pair, (..., T, d/2)
    out = np.empty(np.broadcast_shapes(x.shape), dtype=np.result_type(x, np.float32))
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


# --8<-- [end:rope]
