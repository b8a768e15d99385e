"""Boolean masks: ``True`` where a query may attend, as in PyTorch's SDPA."""

from __future__ import annotations

import numpy as np

from qkv._checks import whole_number


# --8<-- [start:causal_mask]
def causal_mask(t_q: int, t_k: int | None = None) -> np.ndarray:
    """Mask that lets each position attend to itself and earlier ones only.

    With ``t_k > t_q`` the queries are the *last* ``t_q`` positions of a
    sequence of length ``t_k`` (what a decoder with ``t_k - t_q`` earlier
    tokens cached sees).

    Parameters
    ----------
    t_q : int
        Number of query positions.
    t_k : int, optional
        Number of key positions; defaults to ``t_q``. Must be at least
        ``t_q``.

    Returns
    -------
    ndarray of bool, shape (t_q, t_k)

    Examples
    --------
    >>> causal_mask(3).astype(int)
    array([[1, 0, 0],
           [1, 1, 0],
           [1, 1, 1]])
    >>> causal_mask(1, 4).astype(int)  # the newest token sees all before it
    array([[1, 1, 1, 1]])
    """
    t_q = whole_number("t_q", t_q, minimum=1)
    t_k = t_q if t_k is None else whole_number("t_k", t_k)
    if t_k < t_q:
        raise ValueError(f"causal_mask needs t_q <= t_k, got t_q={t_q}, t_k={t_k}")
    offset = t_k - t_q  # query i sits at absolute position offset + i
    return np.tril(np.ones((t_q, t_k), dtype=bool), k=offset)


# --8<-- [end:causal_mask]


# --8<-- [start:padding_mask]
def padding_mask(lengths, t: int) -> np.ndarray:
    """Mask that hides the padding at the end of each sequence in a batch.

    Parameters
    ----------
    lengths : array_like of int, shape (batch,)
        The real length of each sequence; positions at and after it are
        padding.
    t : int
        The padded length.

    Returns
    -------
    ndarray of bool, shape (batch, 1, t)
        ``True`` on real tokens. The middle axis of size 1 broadcasts over
        queries, so the mask fits scores of shape ``(batch, Tq, t)``.

    Examples
    --------
    >>> padding_mask([2, 4], 4).astype(int)
    array([[[1, 1, 0, 0]],
    <BLANKLINE>
           [[1, 1, 1, 1]]])
    """
    t = whole_number("t", t, minimum=1)
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or not np.issubdtype(lengths.dtype, np.integer):
        raise ValueError(f"lengths must be a 1-D array of ints, got {lengths!r}")
    if (lengths < 1).any() or (lengths > t).any():
        raise ValueError(f"every length must be between 1 and t={t}, got {lengths.tolist()}")
    positions = np.arange(t)  # (t,)
    return (positions[None, :] < lengths[:, None])[:, None, :]  # (batch, 1, t)


# --8<-- [end:padding_mask]


# --8<-- [start:sliding_window_mask]
def sliding_window_mask(t: int, window: int) -> np.ndarray:
    """Causal mask that also hides keys more than ``window - 1`` positions back.

    Query ``i`` may attend to key ``j`` when ``i - window < j <= i``: itself and the
    ``window - 1`` keys just before it, ``window`` keys in all (fewer near the start).
    This is the convention of Hugging Face's Mistral and Gemma 2 code
    (``sliding_window`` in their ``config.json``), and it is what a rolling cache of
    ``window`` entries holds (Jiang et al., 2023, "Mistral 7B"). Some kernels count
    the window without the query itself (FlashAttention's ``window_size=(w, 0)``
    admits ``w + 1`` keys): check which one an implementation uses.

    Parameters
    ----------
    t : int
        Number of positions (queries and keys alike).
    window : int
        Keys each query may see, itself included; ``window >= t`` gives
        :func:`causal_mask`.

    Returns
    -------
    ndarray of bool, shape (t, t)

    Examples
    --------
    >>> sliding_window_mask(5, 3).astype(int)
    array([[1, 0, 0, 0, 0],
           [1, 1, 0, 0, 0],
           [1, 1, 1, 0, 0],
           [0, 1, 1, 1, 0],
           [0, 0, 1, 1, 1]])
    >>> bool((sliding_window_mask(4, 4) == causal_mask(4)).all())
    True
    """
    t = whole_number("t", t, minimum=1)
    window = whole_number("window", window, minimum=1)
    i = np.arange(t)[:, None]  # query positions, (t, 1)
    j = np.arange(t)[None, :]  # key positions, (1, t)
    return (j <= i) & (j > i - window)  # (t, t)


# --8<-- [end:sliding_window_mask]
