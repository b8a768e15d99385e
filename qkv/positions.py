"""Position written in without rotation: sinusoids added to the embeddings, and ALiBi's
distance penalty added to the scores.

:mod:`qkv.rope` rotates queries and keys. The two older schemes here do something else:

- ``sinusoidal_positions`` is the fixed pattern the original transformer adds to each
  token's embedding before the first layer (Vaswani et al., 2017, "Attention is all you
  need");
- ``alibi_bias`` is the penalty ALiBi adds to every score, a slope per head times the
  distance between query and key (Press, Smith and Lewis, 2022, "Train short, test long:
  attention with linear biases enables input length extrapolation").
"""

from __future__ import annotations

import math

import numpy as np

from qkv._checks import whole_number


# --8<-- [start:sinusoidal_positions]
def sinusoidal_positions(t: int, d: int, base: float = 10_000.0) -> np.ndarray:
    """The original transformer's position vectors, one row per position.

    Pair ``i`` (dimensions ``2i`` and ``2i + 1``) holds ``sin(p ω_i)`` and
    ``cos(p ω_i)`` with the frequency ``ω_i = base**(-2i/d)``: the first pair turns
    once every 2π positions, the last almost not at all.

    Parameters
    ----------
    t : int
        Number of positions, ``0, 1, ..., t - 1``.
    d : int
        Width of the vectors (the model width, to add them to the embeddings); even.
    base : float
        10,000 in Vaswani et al. (2017).

    Returns
    -------
    ndarray, shape (t, d)

    Examples
    --------
    >>> sinusoidal_positions(3, 4).round(4)
    array([[ 0.    ,  1.    ,  0.    ,  1.    ],
           [ 0.8415,  0.5403,  0.01  ,  1.    ],
           [ 0.9093, -0.4161,  0.02  ,  0.9998]])
    """
    t = whole_number("t", t, minimum=1)
    if whole_number("d", d, minimum=2) % 2:
        raise ValueError(f"sinusoidal positions come in (sin, cos) pairs, so d must be even; got d={d}")
    if not (isinstance(base, int | float | np.number) and np.isfinite(base) and base > 1):
        raise ValueError(f"base must be a finite number > 1, got {base!r}")
    frequencies = base ** (-np.arange(0, d, 2) / d)  # ω_i, (d/2,)
    angles = np.arange(t)[:, None] * frequencies[None, :]  # p ω_i, (t, d/2)
    out = np.empty((t, d))
    out[:, 0::2] = np.sin(angles)  # even dimensions
    out[:, 1::2] = np.cos(angles)  # odd dimensions
    return out


# --8<-- [end:sinusoidal_positions]


# --8<-- [start:alibi_bias]
def alibi_slopes(n_heads: int) -> np.ndarray:
    """ALiBi's slope of every head, steepest first, shape ``(n_heads,)``.

    For ``n`` heads, ``n`` a power of two, the slopes are the geometric sequence
    ``2**(-8/n), 2**(-16/n), ..., 2**(-8)``. For other ``n``, Press et al. (2022)
    take the ``m`` slopes of the largest power of two ``m < n`` and fill the other
    ``n - m`` heads with every other slope of the sequence for ``2m`` heads
    (its 1st, 3rd, 5th, ...), which falls between them.

    Examples
    --------
    >>> alibi_slopes(4).tolist()
    [0.25, 0.0625, 0.015625, 0.00390625]
    >>> (np.log2(alibi_slopes(6)) * 2).tolist()  # in halves of a power of two
    [-4.0, -8.0, -12.0, -16.0, -2.0, -6.0]
    """
    n_heads = whole_number("n_heads", n_heads, minimum=1)
    m = 2 ** math.floor(math.log2(n_heads))  # the largest power of two <= n_heads
    slopes = 2.0 ** (-8.0 * np.arange(1, m + 1) / m)  # (m,)
    if m == n_heads:
        return slopes
    between = 2.0 ** (-8.0 * np.arange(1, 2 * m + 1, 2) / (2 * m))  # odd terms for 2m, (m,)
    return np.concatenate([slopes, between[: n_heads - m]])  # (n_heads,)


def alibi_bias(t: int, n_heads: int) -> np.ndarray:
    """What ALiBi adds to each head's scores: minus its slope times the distance.

    ``bias[h, i, j] = -slopes[h] * |i - j|``. Press et al. (2022) use it in causal
    models, with a causal mask that removes the keys after the query, ``j > i``; the
    bias there is the symmetric choice and matters only without that mask.

    Parameters
    ----------
    t : int
        Number of positions (queries and keys alike).
    n_heads : int
        Number of heads; each gets its own slope (:func:`alibi_slopes`).

    Returns
    -------
    ndarray, shape (n_heads, t, t)
        Add it to the scores ``q kᵀ / √d_k`` before softmax; no position vector is
        added anywhere else.

    Examples
    --------
    >>> alibi_bias(3, 2)[0]  # slope 1/16: a sixteenth of a score per step back
    array([[ 0.    , -0.0625, -0.125 ],
           [-0.0625,  0.    , -0.0625],
           [-0.125 , -0.0625,  0.    ]])
    """
    t = whole_number("t", t, minimum=1)
    slopes = alibi_slopes(n_heads)  # (n_heads,)
    distance = np.abs(np.arange(t)[:, None] - np.arange(t)[None, :])  # |i - j|, (t, t)
    return 0.0 - slopes[:, None, None] * distance[None, :, :]  # (n_heads, t, t)


# --8<-- [end:alibi_bias]
