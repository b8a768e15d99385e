"""The checker of full attention: every query at once, with a mask and batch axes."""

from __future__ import annotations

import numpy as np

from qkv.dot_product import attention, softmax
from qkv.exercises._verdict import (
    RANDOM_CASES,
    CheckResult,
    Wrong,
    as_pair,
    call,
    close,
    divisor_found,
    first_match,
    no_divisor,
    overflow,
    verdict,
    worst,
)
from qkv.masks import causal_mask, padding_mask


def _attention_cases(rng):
    """(q, k, v, mask, description): the unbatched causal case first, then batches."""

    def qkv_of(lead, t_q, t_k, d_k, d_v):
        return (
            rng.normal(size=(*lead, t_q, d_k)),
            rng.normal(size=(*lead, t_k, d_k)),
            rng.normal(size=(*lead, t_k, d_v)),
        )

    yield (*qkv_of((), 5, 5, 4, 3), causal_mask(5), "5 tokens, d_k = 4, d_v = 3, a causal mask")
    yield (
        *qkv_of((), 5, 5, 4, 3),
        np.ones((5, 5), bool),
        "5 tokens, d_k = 4, d_v = 3, a mask that hides nothing",
    )
    yield (
        *qkv_of((2,), 5, 5, 4, 3),
        causal_mask(5),
        "a batch of 2 sequences of 5 tokens (q of shape (2, 5, 4)), one causal mask for both",
    )
    lengths = [6, 3]
    yield (
        *qkv_of((2,), 3, 6, 4, 2),
        padding_mask(lengths, 6)[:, None, :],
        "a batch of 2: 3 queries, 6 keys, the second padded after 3 keys (a mask of shape (2, 1, 6))",
    )
    yield (
        *qkv_of((2, 3), 4, 4, 2, 5),
        causal_mask(4),
        "q of shape (2, 3, 4, 2): 2 sequences, 3 heads, 4 tokens, d_k = 2, d_v = 5",
    )
    for _ in range(RANDOM_CASES // 2):
        lead = tuple(int(n) for n in rng.integers(1, 4, size=rng.integers(0, 3)))
        t_q, t_k = (int(n) for n in rng.integers(1, 7, size=2))
        d_k, d_v = (int(n) for n in rng.integers(1, 7, size=2))
        mask = rng.random((*lead, t_q, t_k)) < 0.7
        mask[..., 0] = True  # every query may attend to at least one key
        yield (
            *qkv_of(lead, t_q, t_k, d_k, d_v),
            mask,
            f"q of shape {(*lead, t_q, d_k)}, k {(*lead, t_k, d_k)}, v {(*lead, t_k, d_v)} and a random mask",
        )
    q, k, v = qkv_of((), 4, 4, 4, 2)
    q[1], k[1] = 40.0, 40.0  # query 1 may read key 1 under the causal mask: 6400 / √4
    yield q, k, v, causal_mask(4), "a score of 3200 (a query and a key of 40s), a causal mask"


def _attention_case(fn, q, k, v, mask, what: str) -> None:
    lead, t_q, d_k = q.shape[:-2], q.shape[-2], q.shape[-1]
    t_k, d_v = k.shape[-2], v.shape[-1]
    batched = bool(q.ndim > 2)
    batch_fix = (
        "it passes without batch axes, so transpose only the last two axes of k "
        "(np.swapaxes(k, -1, -2), not k.T) and let @ broadcast over the leading axes"
        if batched
        else ""
    )
    weights, output = as_pair(
        call(fn, f"with {what}", q.copy(), k.copy(), v.copy(), mask.copy(), hint=batch_fix),
        f"with {what}",
    )
    want = attention(q, k, v, mask=mask)
    shape = want.weights.shape
    if weights.shape != shape:
        n = int(np.prod(lead)) if lead else 1
        if batched and weights.shape == (n * t_q, n * t_k):
            raise Wrong(
                f"With {what}, your weights have shape {weights.shape}, not {shape}: the batch was "
                f"flattened into the positions, so each query attends to the keys of every sequence "
                f"in the batch.",
                "Keep the leading axes: q @ np.swapaxes(k, -1, -2) is (..., T_q, T_k) for each "
                "sequence on its own.",
            )
        if weights.shape == (*lead, t_k, t_q) and t_k != t_q:
            raise Wrong(
                f"With {what}, your weights have shape {weights.shape}, keys by queries, not "
                f"{shape}, queries by keys.",
                "Score with q @ kᵀ (row i is query i), not k @ qᵀ.",
            )
        raise Wrong(
            f"With {what}, your weights have shape {weights.shape}, not (..., T_q, T_k) = {shape}.",
            "One row per query and one column per key, the leading axes kept.",
        )
    if output.shape != want.output.shape:
        if d_k != d_v and output.shape == (*lead, t_q, d_k):
            raise Wrong(
                f"With {what}, your output has shape {output.shape}, d_k = {d_k} numbers a query, "
                f"not d_v = {d_v}: your output averages the keys, not the values.",
                "The output is weights @ v.",
            )
        raise Wrong(
            f"With {what}, your output has shape {output.shape}, not (..., T_q, d_v) = {want.output.shape}.",
            "The output is weights @ v: one row per query, one column per value dimension.",
        )
    full = np.broadcast_to(mask, shape)
    if close(weights, want.weights):
        if not close(output, want.output):
            gap, where = worst(output, want.output)
            first_match(
                output,
                [
                    (
                        f"With {what}, your weights are right, and your output averages the keys, "
                        f"not the values.",
                        "The output is weights @ v.",
                        lambda: weights @ k if d_k == d_v else None,
                    )
                ],
            )
            raise Wrong(
                f"With {what}, your weights are right but your output is off by up to {gap:.3g} "
                f"(at index {where}).",
                "The output is weights @ v, the weighted average of the value rows.",
            )
        return
    finite = np.nan_to_num(weights, nan=0.0, posinf=0.0, neginf=0.0)
    seen = np.abs(finite) > 1e-12
    if (seen & ~full).any():
        where = tuple(int(n) for n in np.argwhere(seen & ~full)[0])
        i, j = where[-2], where[-1]
        shown = f"{float(weights[where]):.3g}"
        if not (seen & full).any():
            raise Wrong(
                f"With {what}, your weights are 0 wherever the mask is True and positive where it "
                f"is False (query {i} puts {shown} on key {j}, which it may not see): the mask is "
                f"read the wrong way round.",
                "In qkv, as in PyTorch's scaled_dot_product_attention, True means 'may attend': "
                "keep the scores where the mask is True, np.where(mask, scores, -np.inf).",
            )
        first_match(
            weights,
            [
                (
                    f"With {what}, your weights ignore the mask: query {i} puts {shown} on key {j}, "
                    f"which the mask hides.",
                    "Set the scores where the mask is False to -inf before softmax.",
                    lambda: attention(q, k, v).weights,
                ),
                (
                    f"With {what}, your hidden keys keep a weight: query {i} puts {shown} on key "
                    f"{j}, as if its score were 0 rather than gone.",
                    "Multiplying the scores by the mask makes a hidden score 0, which still gets a "
                    "weight; set it to -inf instead, np.where(mask, scores, -np.inf).",
                    lambda: softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(d_k) * full),
                ),
            ],
        )
        raise Wrong(
            f"With {what}, query {i} puts {shown} on key {j}, where the mask is False.",
            "A key the mask hides (False) gets exactly 0 weight: its score is -inf before softmax.",
        )
    with np.errstate(all="ignore"):
        if not np.isfinite(weights).all():
            scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_k)
            if np.abs(scores).max() > 700:
                raise overflow(float(np.max(np.where(full, scores, -np.inf))))
            i = np.argwhere(~np.isfinite(weights))[0]
            raise Wrong(
                f"With {what}, your weights hold nan or inf (at index {tuple(int(n) for n in i)}), "
                f"though every query may attend to at least one key.",
                "Set the masked scores to -inf before softmax (np.where(mask, scores, -np.inf)), "
                "so exp gives them exactly 0.",
            )
    sums = weights.sum(axis=-1)
    if np.abs(sums - 1).max() > 1e-9:
        row = tuple(int(n) for n in np.unravel_index(int(np.argmax(np.abs(sums - 1))), sums.shape))
        first_match(
            weights,
            [
                (
                    f"With {what}, your hidden keys get 0 but the rows no longer sum to 1: row "
                    f"{row} sums to {float(sums[row]):.4g}, the weight the softmax gave the hidden "
                    f"keys is lost (the mask was applied after softmax).",
                    "Mask the scores before softmax (masked scores -inf), so that softmax shares "
                    "the whole weight among the keys a query may see.",
                    lambda: attention(q, k, v).weights * full,
                ),
                (
                    f"With {what}, your weights sum to 1 down each column (over the queries), not "
                    f"along each row: row {row} sums to {float(sums[row]):.4g}.",
                    "Softmax along the last axis, the keys (axis=-1): each query shares its weight "
                    "among the keys.",
                    lambda: _masked_softmax(q, k, full, axis=-2),
                ),
            ],
        )
        raise Wrong(
            f"With {what}, row {row} of your weights sums to {float(sums[row]):.4g}, not 1.",
            "Each query's weights are a softmax along the keys, which sums to 1.",
        )
    divisor_found(weights, lambda c: attention(q, k, v, mask=mask, scale=1.0 / c).weights, d_k, d_v, t_k)
    gap, where = worst(weights, want.weights)
    raise Wrong(
        f"With {what}, your weight at index {where} is off by {gap:.3g}, and {no_divisor(d_k, d_v, t_k)}.",
        "The weights are softmax(q @ kᵀ / √d_k) along the keys, with the hidden scores -inf.",
    )


def _masked_softmax(q, k, keep, axis=-1):
    scores = np.where(keep, q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]), -np.inf)
    e = np.exp(scores - scores.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def check_attention(fn, hint: bool = False) -> CheckResult:
    """Check your attention, ``fn(q, k, v, mask) -> (weights, output)``, against :func:`qkv.attention`.

    Every query at once: ``q`` of shape ``(..., T_q, d_k)``, ``k`` ``(..., T_k, d_k)``,
    ``v`` ``(..., T_k, d_v)``, with any number of leading (batch, head) axes, and a
    boolean ``mask`` broadcastable to ``(..., T_q, T_k)``, ``True`` where a query may
    attend (qkv's convention, and PyTorch's ``scaled_dot_product_attention``'s). The
    weights have shape ``(..., T_q, T_k)`` and the output ``(..., T_q, d_v)``. Every
    query may attend to at least one key.

    Parameters
    ----------
    fn : callable
        Your function, called as ``fn(q, k, v, mask)``.
    hint : bool
        ``True`` adds the fix to a failure's message; without it the message names
        the mistake only (``result.hint()`` gives the fix afterwards).

    Returns
    -------
    CheckResult

    Raises
    ------
    ValueError
        If ``fn`` cannot be called.

    Examples
    --------
    >>> from qkv import attention
    >>> check_attention(attention)
    Passed: your attention matches qkv.attention with and without batch and head axes, with
    causal, padding and random masks, on 50 random inputs and a score of 3200.
    >>> def unmasked(q, k, v, mask):
    ...     return attention(q, k, v)
    >>> check_attention(unmasked)
    With 5 tokens, d_k = 4, d_v = 3, a causal mask, your weights ignore the mask:
    query 0 puts 0.26 on key 1, which the mask hides. Run the check again with
    hint=True for the fix.
    """
    return verdict(
        "check_attention",
        fn,
        lambda f: [_attention_case(f, *case) for case in _attention_cases(np.random.default_rng(7))],
        "Passed: your attention matches qkv.attention with and without batch and head axes, with "
        f"causal, padding and random masks, on {RANDOM_CASES // 2} random inputs and a score of 3200.",
        hint=hint,
    )
