"""The checker of multi-head attention (the multi-head chapter's second exercise)."""

from __future__ import annotations

import numpy as np

from qkv.dot_product import attention
from qkv.exercises._verdict import (
    RANDOM_CASES,
    CheckResult,
    Wrong,
    as_pair,
    call,
    close,
    first_match,
    verdict,
    worst,
)
from qkv.masks import causal_mask
from qkv.multihead import MultiHeadWeights, merge_heads, multi_head_attention, split_heads


def _mha_cases(rng):
    """(x_q, x_kv, w, mask, description), every case with n_kv_heads == n_heads."""
    w = MultiHeadWeights.random(rng, d_model=12, n_heads=3)
    x = rng.normal(size=(5, 12))
    yield x, x, w, causal_mask(5), "5 tokens, d_model = 12, 3 heads of d_head = 4, a causal mask"
    x = rng.normal(size=(2, 4, 12))
    yield x, x, w, causal_mask(4), "a batch of 2 sequences of 4 tokens, 3 heads, a causal mask"
    x_q, x_kv = rng.normal(size=(3, 12)), rng.normal(size=(6, 12))
    yield (
        x_q,
        x_kv,
        w,
        np.ones((3, 6), bool),
        "cross-attention: 3 queries from x_q, 6 keys and values from x_kv",
    )
    for _ in range(RANDOM_CASES // 4):
        n_heads, d_head = int(rng.integers(1, 5)), int(rng.integers(1, 5))
        d_model = int(rng.integers(2, 9))
        w = MultiHeadWeights.random(rng, d_model=d_model, n_heads=n_heads, d_head=d_head)
        lead = tuple(int(n) for n in rng.integers(1, 3, size=rng.integers(0, 2)))
        t = int(rng.integers(1, 6))
        x = rng.normal(size=(*lead, t, d_model))
        yield (
            x,
            x,
            w,
            causal_mask(t),
            f"x of shape {x.shape}, {n_heads} heads of d_head = {d_head}, d_model = {d_model}, causal",
        )


def _mha_case(fn, x_q, x_kv, w: MultiHeadWeights, mask, what: str) -> None:
    batched = x_q.ndim > 2
    fix = (
        "it passes on one sequence, so split and merge the heads on the last axes only "
        "(qkv.split_heads and qkv.merge_heads keep the leading axes)"
        if batched
        else "queries come from x_q, keys and values from x_kv (the same array in self-attention)"
        if x_q is not x_kv
        else ""
    )
    weights, output = as_pair(
        call(fn, f"with {what}", x_q.copy(), x_kv.copy(), w, mask.copy(), hint=fix), f"with {what}"
    )
    want = multi_head_attention(x_q, x_kv, w, mask=mask)
    h, d_head = w.n_heads, w.d_head
    lead, t_q, t_k = x_q.shape[:-2], x_q.shape[-2], x_kv.shape[-2]
    if weights.shape != want.weights.shape:
        if t_q != t_k and weights.shape == (*lead, h, t_q, t_q):
            raise Wrong(
                f"With {what}, your weights have shape {weights.shape}: each query attends to the "
                f"{t_q} positions of x_q, not the {t_k} of x_kv.",
                "Queries come from x_q, keys and values from x_kv (the same array in self-attention).",
            )
        if weights.shape == (*lead, t_q, t_k):
            raise Wrong(
                f"With {what}, your weights have shape {weights.shape}, one map for the whole layer, "
                f"not one per head, {want.weights.shape}.",
                "Split the queries, keys and values into heads (qkv.split_heads), then attend in "
                "every head at once: the head axis comes before T.",
            )
        raise Wrong(
            f"With {what}, your weights have shape {weights.shape}, not (..., n_heads, T_q, T_k) = "
            f"{want.weights.shape}.",
            "One attention map per head: split into heads before attending.",
        )
    if output.shape != want.output.shape:
        if output.shape == (*lead, h, t_q, d_head):
            raise Wrong(
                f"With {what}, your output has shape {output.shape}, the heads still apart, not "
                f"(..., T_q, d_model) = {want.output.shape}.",
                "Merge the heads (qkv.merge_heads), then multiply by w.w_o.",
            )
        raise Wrong(
            f"With {what}, your output has shape {output.shape}, not (..., T_q, d_model) = "
            f"{want.output.shape}.",
            "Merge the heads, then project with w.w_o.",
        )
    q = split_heads(x_q @ w.w_q, h)
    k = split_heads(x_kv @ w.w_k, h)
    v = split_heads(x_kv @ w.w_v, h)
    head_mask = np.asarray(mask)[..., None, :, :]

    def straight(y):  # reshaped to (..., heads, T, d_head) without the swap
        return y.reshape(*y.shape[:-2], h, y.shape[-2], d_head)

    def interleaved(y):
        return np.moveaxis(y.reshape(*y.shape[:-1], d_head, h), -1, -3)

    if not close(weights, want.weights):
        first_match(
            weights,
            [
                (
                    f"With {what}, your attention maps are not the heads' own: your reshape deals "
                    f"each token's numbers out to several heads, so a head's rows mix tokens.",
                    "Reshape to (..., T, n_heads, d_head) first, then swap the T and head axes "
                    "(qkv.split_heads); reshaping straight to (..., n_heads, T, d_head) splits "
                    "along the wrong axis.",
                    lambda: (
                        attention(
                            straight(x_q @ w.w_q),
                            straight(x_kv @ w.w_k),
                            straight(x_kv @ w.w_v),
                            mask=head_mask,
                        ).weights
                        if h > 1
                        else None
                    ),
                ),
                (
                    f"With {what}, your head 0 reads every n_heads-th column of the queries and keys "
                    f"(columns 0, {h}, ...), not a block of d_head = {d_head} neighbouring ones.",
                    "Head h is columns h*d_head to (h+1)*d_head: reshape to (..., T, n_heads, "
                    "d_head), as qkv.split_heads does.",
                    lambda: (
                        attention(
                            interleaved(x_q @ w.w_q),
                            interleaved(x_kv @ w.w_k),
                            interleaved(x_kv @ w.w_v),
                            mask=head_mask,
                        ).weights
                        if h > 1 and d_head > 1
                        else None
                    ),
                ),
                (
                    f"With {what}, your weights are those of scores divided by nothing, not by "
                    f"√d_head = {np.sqrt(d_head):.4g}.",
                    "Each head divides its scores by the square root of its own width, d_head.",
                    lambda: attention(q, k, v, mask=head_mask, scale=False).weights if d_head > 1 else None,
                ),
                (
                    f"With {what}, your weights are those of scores divided by √d_model = "
                    f"{np.sqrt(w.d_model):.4g}, not by √d_head = {np.sqrt(d_head):.4g}: the width of "
                    f"the whole layer, not of a head.",
                    "Each head divides its scores by the square root of its own width, d_head.",
                    lambda: (
                        attention(q, k, v, mask=head_mask, scale=w.d_model**-0.5).weights
                        if w.d_model != d_head
                        else None
                    ),
                ),
                (
                    f"With {what}, your weights ignore the mask.",
                    "Pass the mask to every head (it broadcasts over the head axis with a new axis "
                    "before T_q, mask[..., None, :, :]).",
                    lambda: attention(q, k, v).weights,
                ),
            ],
        )
        gap, where = worst(weights, want.weights)
        raise Wrong(
            f"With {what}, your weights differ from qkv's by up to {gap:.3g} (at index {where}).",
            "q = split_heads(x_q @ w.w_q), k and v likewise from x_kv, then attention in every "
            "head: softmax(q @ kᵀ / √d_head), masked.",
        )
    if not close(output, want.output):
        heads_out = attention(q, k, v, mask=head_mask).output
        first_match(
            output,
            [
                (
                    f"With {what}, your weights are right, and your output is the merged heads "
                    f"before the output projection.",
                    "Multiply the merged heads by w.w_o, which mixes what the heads found.",
                    lambda: merge_heads(heads_out) if w.d_model == h * d_head else None,
                ),
                (
                    f"With {what}, your weights are right, but your heads' outputs are merged in the "
                    f"wrong order: the numbers of one token's heads are interleaved.",
                    "merge_heads puts head 0's d_head numbers first, then head 1's; swap the head "
                    "and T axes back before reshaping.",
                    lambda: np.swapaxes(heads_out, -1, -3).reshape(*lead, t_q, -1) @ w.w_o if h > 1 else None,
                ),
            ],
        )
        gap, where = worst(output, want.output)
        raise Wrong(
            f"With {what}, your weights are right but your output is off by up to {gap:.3g} (at "
            f"index {where}).",
            "The output is merge_heads(weights @ v) @ w.w_o.",
        )


def check_multi_head_attention(fn, hint: bool = False) -> CheckResult:
    """Check your ``fn(x_q, x_kv, w, mask) -> (weights, output)`` against :func:`qkv.multi_head_attention`.

    ``x_q`` of shape ``(..., T_q, d_model)`` gives the queries, ``x_kv`` ``(..., T_k,
    d_model)`` the keys and values, ``w`` is a :class:`~qkv.MultiHeadWeights` with
    ``n_kv_heads == n_heads``, and ``mask`` a boolean ``(T_q, T_k)`` array, ``True``
    where a query may attend, shared by every head. The weights have shape ``(...,
    n_heads, T_q, T_k)`` and the output ``(..., T_q, d_model)``.

    Parameters
    ----------
    fn : callable
        Your function, called as ``fn(x_q, x_kv, w, mask)``.
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
    >>> from qkv import multi_head_attention
    >>> check_multi_head_attention(multi_head_attention)
    Passed: your multi-head attention matches qkv.multi_head_attention on 25 random
    layers, on a batch, with a causal mask and in cross-attention.
    """
    return verdict(
        "check_multi_head_attention",
        fn,
        lambda f: [_mha_case(f, *case) for case in _mha_cases(np.random.default_rng(9))],
        f"Passed: your multi-head attention matches qkv.multi_head_attention on {RANDOM_CASES // 4} "
        "random layers, on a batch, with a causal mask and in cross-attention.",
        hint=hint,
    )
