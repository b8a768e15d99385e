"""The checker of one decoding step with a key/value cache (the KV-cache chapter's exercise)."""

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
from qkv.kvcache import KVCache
from qkv.multihead import MultiHeadWeights, merge_heads, split_heads


def _decode_step(x_new, w: MultiHeadWeights, cache: KVCache):
    """One step of :func:`qkv.decode_with_cache`'s loop: the answer the checker compares with."""
    q = split_heads(x_new @ w.w_q, w.n_heads)  # (heads, 1, d_head)
    cache.append(split_heads(x_new @ w.w_k, w.n_kv_heads), split_heads(x_new @ w.w_v, w.n_kv_heads))
    group = w.n_heads // w.n_kv_heads  # query heads per key/value head
    k = np.repeat(cache.keys, group, axis=0)  # (heads, T, d_head)
    v = np.repeat(cache.values, group, axis=0)
    weights, out = attention(q, k, v)  # (heads, 1, T), (heads, 1, d_head)
    return weights, merge_heads(out) @ w.w_o  # (1, d_model)


def _step_cases(rng):
    """(weights, earlier tokens' inputs, new token's input, description)."""
    w = MultiHeadWeights.random(rng, d_model=8, n_heads=2)
    x = rng.normal(size=(4, 8))
    yield w, x[:3], x[3:], "3 cached tokens, 2 heads"
    for t in range(4):  # a sequence from its first token: the cache starts empty
        yield w, x[:t], x[t : t + 1], f"{t} cached tokens, 2 heads"
    for n_heads, n_kv in ((4, 2), (4, 1)):
        w = MultiHeadWeights.random(rng, d_model=16, n_heads=n_heads, n_kv_heads=n_kv)
        x = rng.normal(size=(5, 16))
        yield w, x[:4], x[4:], f"{n_heads} query heads sharing {n_kv} key/value head{'s' * (n_kv > 1)}"
    for _ in range(RANDOM_CASES // 4):
        n_kv = int(rng.integers(1, 3))
        n_heads = n_kv * int(rng.integers(1, 4))
        d_model = n_heads * int(rng.integers(1, 5))
        w = MultiHeadWeights.random(rng, d_model=d_model, n_heads=n_heads, n_kv_heads=n_kv)
        t = int(rng.integers(0, 7))
        x = rng.normal(size=(t + 1, d_model))
        yield (
            w,
            x[:t],
            x[t:],
            f"{t} cached tokens, {n_heads} heads, {n_kv} key/value heads, d_model = {d_model}",
        )


def _filled_cache(w: MultiHeadWeights, earlier: np.ndarray) -> KVCache:
    cache = KVCache.empty(w.n_kv_heads, w.d_head)
    if len(earlier):  # a first step starts from the empty cache
        cache.append(split_heads(earlier @ w.w_k, w.n_kv_heads), split_heads(earlier @ w.w_v, w.n_kv_heads))
    return cache


def _step_case(fn, w: MultiHeadWeights, earlier: np.ndarray, x_new: np.ndarray, what: str) -> None:
    before = len(earlier)
    mine, theirs = _filled_cache(w, earlier), _filled_cache(w, earlier)
    old_keys, old_values = mine.keys.copy(), mine.values.copy()
    want_weights, want_output = _decode_step(x_new, w, theirs)
    shared = w.n_kv_heads < w.n_heads
    repeat_fix = (
        "repeat each cached key/value head n_heads // n_kv_heads times along the head axis "
        "(np.repeat, axis=0) before attending, so that every query head has one"
        if shared
        else ""
    )
    weights, output = as_pair(
        call(fn, f"with {what}", x_new.copy(), w, mine, hint=repeat_fix), f"with {what}"
    )
    grown = len(mine) - before
    if grown == 0:
        raise Wrong(
            f"Your step did not add the new token to the cache: with {what} it still holds {before} "
            f"positions after the step.",
            "Append the new token's key and value with cache.append(k_new, v_new).",
        )
    if grown != 1:
        raise Wrong(
            f"Your step added {grown} positions to the cache, with {what}.",
            "One step adds one position, the new token's.",
        )
    if not (
        np.array_equal(mine.keys[:, :before], old_keys)
        and np.array_equal(mine.values[:, :before], old_values)
    ):
        raise Wrong(
            f"Your step changed the cached keys or values of earlier tokens, with {what}.",
            "The earlier tokens' keys and values never change: only append.",
        )
    new_k, new_v = theirs.keys[:, -1], theirs.values[:, -1]
    if not (close(mine.keys[:, -1], new_k) and close(mine.values[:, -1], new_v)):
        if close(mine.keys[:, -1], new_v) and close(mine.values[:, -1], new_k):
            raise Wrong(
                "The key you appended is the new token's value, and the value its key.",
                "cache.append takes the key first.",
            )
        raise Wrong(
            f"The key or value you appended is not the new token's, with {what}.",
            "They are split_heads(x_new @ w.w_k, w.n_kv_heads) and split_heads(x_new @ w.w_v, w.n_kv_heads).",
        )
    if weights.shape != want_weights.shape:
        if weights.shape[-1:] == (before,) and before:
            raise Wrong(
                f"Your new token does not attend to itself: its weights cover the {before} earlier "
                f"positions only.",
                "Append its key and value first, then attend over the whole cache.",
            )
        if weights.shape[-1:] == (1,) and before:
            raise Wrong(
                f"Your new token attends only to itself, with {what}: its weights have one column.",
                "Attend over every position in the cache, cache.keys and cache.values.",
            )
        raise Wrong(
            f"With {what}, your weights have shape {weights.shape}, not (n_heads, 1, T) = "
            f"{want_weights.shape}.",
            "One query per head, against all T cached positions.",
        )
    if output.shape != want_output.shape:
        raise Wrong(
            f"With {what}, your output has shape {output.shape}, not (1, d_model) = {want_output.shape}.",
            "Merge the heads, then project with w.w_o.",
        )
    group = w.n_heads // w.n_kv_heads
    q = split_heads(x_new @ w.w_q, w.n_heads)
    k, v = np.repeat(theirs.keys, group, axis=0), np.repeat(theirs.values, group, axis=0)
    if not close(weights, want_weights):
        first_match(
            weights,
            [
                (
                    f"Your scores are not divided by √d_head = {np.sqrt(w.d_head):.4g}, with {what}: "
                    f"your weights are those of the raw scores.",
                    "Attend with qkv.attention, or divide q @ kᵀ by √d_head.",
                    lambda: attention(q, k, v, scale=False).weights if w.d_head > 1 else None,
                ),
                (
                    f"Your query heads are paired with the wrong key/value heads, with {what}: query "
                    f"head 1 reads key/value head 1, not head 0.",
                    "Consecutive query heads share one key/value head, so use "
                    "np.repeat(cache.keys, n_heads // n_kv_heads, axis=0), not np.tile.",
                    lambda: attention(q, np.tile(theirs.keys, (group, 1, 1)), v).weights if shared else None,
                ),
            ],
        )
        gap, _ = worst(weights, want_weights)
        raise Wrong(
            f"With {what}, your weights differ from qkv's by up to {gap:.3g}.",
            "The new token's query, split into heads, attends over the cached keys with "
            "softmax(q @ kᵀ / √d_head).",
        )
    if not close(output, want_output):
        out = attention(q, k, v).output
        first_match(
            output,
            [
                (
                    f"Your weights are right, and your output is the merged heads before the output "
                    f"projection, with {what}.",
                    "Merge the heads, then multiply by w.w_o.",
                    lambda: merge_heads(out),
                ),
                (
                    f"Your weights are right, but your heads' outputs are merged in the wrong order, "
                    f"with {what}.",
                    "merge_heads(out) puts head 0's numbers first, then head 1's, before w.w_o.",
                    lambda: np.swapaxes(out, -1, -3).reshape(1, -1) @ w.w_o if w.n_heads > 1 else None,
                ),
            ],
        )
        raise Wrong(
            f"Your weights are right but your output is not, with {what}.",
            "It is merge_heads(weights @ v) @ w.w_o, with the values repeated for the heads that share them.",
        )


def check_kv_cache_step(fn, hint: bool = False) -> CheckResult:
    """Check your decoding step, ``fn(x_new, w, cache) -> (weights, output)``.

    One step of :func:`qkv.decode_with_cache`'s loop: the newest token's input
    ``x_new``, of shape ``(1, d_model)``, is projected with the
    :class:`~qkv.MultiHeadWeights` ``w``; its key and value are appended to the
    :class:`~qkv.KVCache` ``cache`` (which holds the earlier tokens'); then its query
    attends over every cached position, the new one included. ``weights`` has shape
    ``(n_heads, 1, T)`` and ``output`` ``(1, d_model)``, as in ``decode_with_cache``.

    Parameters
    ----------
    fn : callable
        Your step, called as ``fn(x_new, w, cache)``; it must append to ``cache``.
    hint : bool
        ``True`` adds the fix to a failure\'s message; without it the message names
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
    A step that attends before appending leaves the new token out of its own view:

    >>> from qkv import attention, merge_heads, split_heads
    >>> def step(x_new, w, cache):
    ...     q = split_heads(x_new @ w.w_q, w.n_heads)
    ...     weights, out = attention(q, cache.keys, cache.values)
    ...     cache.append(split_heads(x_new @ w.w_k, w.n_kv_heads), split_heads(x_new @ w.w_v, w.n_kv_heads))
    ...     return weights, merge_heads(out) @ w.w_o
    >>> check_kv_cache_step(step)
    Your new token does not attend to itself: its weights cover the 3 earlier
    positions only. Run the check again with hint=True for the fix.
    >>> check_kv_cache_step(step).hint()
    Append its key and value first, then attend over the whole cache.
    """
    return verdict(
        "check_kv_cache_step",
        fn,
        lambda f: [_step_case(f, *case) for case in _step_cases(np.random.default_rng(5))],
        f"Passed: your step matches qkv's cached decoding on {RANDOM_CASES // 4} random steps, on a "
        "sequence from an empty cache, and with query heads sharing key/value heads.",
        hint=hint,
    )
