"""Input checks shared by the public functions.

Every check raises ``ValueError`` with the shapes it got and the shapes it wanted,
so a reader who passes the wrong thing learns what to change instead of getting NaN.
"""

from __future__ import annotations

import numpy as np


def whole_number(name: str, value, minimum: int = 0) -> int:
    """Return ``value`` as an ``int``, refusing floats, bools, strings and values below ``minimum``.

    >>> whole_number("n_heads", np.int64(4), minimum=1)
    4
    """
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"{name} must be a whole number >= {minimum}, got {value!r}")
    return int(value)


def position_in(position, n_tokens: int) -> int:
    """``position`` in a text of ``n_tokens`` tokens (from 0, or negative from the end) as an
    index from 0; a ValueError naming the range otherwise."""
    if isinstance(position, bool | np.bool_) or not isinstance(position, int | np.integer):
        raise ValueError(f"position must be an int, got {position!r}")
    if not -n_tokens <= position < n_tokens:
        raise ValueError(
            f"position {position} is outside a text of {n_tokens} tokens: "
            f"give 0..{n_tokens - 1}, or -{n_tokens}..-1 from the end"
        )
    return int(position) % n_tokens


def real_array(name: str, x) -> np.ndarray:
    """Return ``x`` as an array of real numbers (ints become float64); NaN and inf pass."""
    try:
        arr = np.asarray(x)
    except ValueError as error:  # ragged nested lists
        raise ValueError(f"{name} must be an array of numbers: {error}") from None
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number):
        raise ValueError(f"{name} must hold numbers, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise ValueError(f"{name} must be real, got dtype {arr.dtype}")
    if not np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float64)
    return arr


def as_float_array(name: str, x, min_ndim: int = 2, width: int | None = None) -> np.ndarray:
    """Return ``x`` as a floating-point array, refusing NaN, inf and too few dims.

    With ``min_ndim >= 2`` the array is read as ``(..., T, d)`` and must have at least one
    position and one feature; ``width`` is the ``d`` it must have, when one is required.
    """
    arr = real_array(name, x)
    if arr.ndim < min_ndim:
        raise ValueError(
            f"{name} must have at least {min_ndim} dimensions (..., T, d), got shape {arr.shape}"
        )
    if min_ndim >= 2 and 0 in arr.shape[-2:]:
        raise ValueError(
            f"{name} has shape {arr.shape}: it needs at least one position (T) and "
            f"one feature (d) in its last two dimensions"
        )
    if width is not None and arr.shape[-1] != width:
        raise ValueError(f"{name} must be (..., T, {width}), got shape {arr.shape}")
    if not np.isfinite(arr).all():
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise ValueError(
            f"{name} contains NaN or inf (first at index {tuple(int(i) for i in bad)}); "
            f"attention needs finite numbers"
        )
    return arr


def check_mask(mask, scores_shape: tuple[int, ...]) -> np.ndarray:
    """Return ``mask`` broadcast to ``scores_shape``, or raise naming both shapes."""
    mask = np.asarray(mask)
    if mask.dtype != bool:
        raise ValueError(f"mask must be boolean (True where a query may attend), got dtype {mask.dtype}")
    try:
        # Leading dims may broadcast either way (as in PyTorch); (Tq, Tk) must fit.
        target = np.broadcast_shapes(mask.shape, scores_shape)
        if target[-2:] != scores_shape[-2:]:
            raise ValueError
        mask = np.broadcast_to(mask, target)
    except ValueError:
        raise ValueError(
            f"mask of shape {mask.shape} does not broadcast to the scores' shape "
            f"(..., Tq, Tk) = {scores_shape}"
        ) from None
    allowed = mask.any(axis=-1)
    if not allowed.all():
        row = tuple(int(i) for i in np.argwhere(~allowed)[0])
        raise ValueError(
            f"mask allows no key for query row {row} (index into (..., Tq)); "
            f"every query must be allowed to attend to at least one key"
        )
    return mask
