"""Input checks shared by the public functions.

Every check raises ``ValueError`` with the shapes it got and the shapes it wanted,
so a reader who passes the wrong thing learns what to change instead of getting NaN.
"""

from __future__ import annotations

import numpy as np


def as_float_array(name: str, x, min_ndim: int = 2) -> np.ndarray:
    """Return ``x`` as a floating-point array, refusing NaN, inf and too few dims."""
    arr = np.asarray(x)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number):
        raise ValueError(f"{name} must hold numbers, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise ValueError(f"{name} must be real, got dtype {arr.dtype}")
    if not np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float64)
    if arr.ndim < min_ndim:
        raise ValueError(
            f"{name} must have at least {min_ndim} dimensions (..., T, d), "
            f"got shape {arr.shape}"
        )
    if not np.isfinite(arr).all():
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise ValueError(
            f"{name} contains NaN or inf (first at index {tuple(int(i) for i in bad)}); "
            f"attention needs finite queries, keys and values"
        )
    return arr


def check_mask(mask, scores_shape: tuple[int, ...]) -> np.ndarray:
    """Return ``mask`` broadcast to ``scores_shape``, or raise naming both shapes."""
    mask = np.asarray(mask)
    if mask.dtype != bool:
        raise ValueError(
            f"mask must be boolean (True where a query may attend), got dtype {mask.dtype}"
        )
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
