"""The KV cache measured: earlier keys and values through a causal stack,
how far the cache's equality holds, and the work decoding does with and
without it.

Shown on docs/kv-cache-in-depth.md.
Run it as `python snippets/kv_cache_checks.py`.
"""

# --8<-- [start:setup]
import numpy as np

import qkv

rng = np.random.default_rng(0)
d_model, n_heads = 32, 4
w = qkv.MultiHeadWeights.random(rng, d_model=d_model, n_heads=n_heads)
# --8<-- [end:setup]

# --8<-- [start:unchanged]
layers = [qkv.MultiHeadWeights.random(rng, d_model, n_heads) for _ in range(3)]


def keys_and_values(layers, x, causal=True):
    """The keys and values each layer of a residual stack computes."""
    per_layer = []
    for layer in layers:
        per_layer.append((x @ layer.w_k, x @ layer.w_v))
        mask = qkv.causal_mask(len(x)) if causal else None
        x = x + qkv.multi_head_attention(x, x, layer, mask=mask).output
    return per_layer


tokens = rng.normal(size=(7, d_model))
print("largest change in the first six tokens' keys and values")
print("when a seventh token arrives:")
for causal in (True, False):
    before = keys_and_values(layers, tokens[:6], causal)  # six so far
    after = keys_and_values(layers, tokens, causal)  # a seventh arrives
    moved = [
        max(np.abs(ka[:6] - kb).max(), np.abs(va[:6] - vb).max())
        for (kb, vb), (ka, va) in zip(before, after, strict=True)
    ]
    print(
        f"  {'causal' if causal else 'no mask':<8}",
        "  ".join(f"layer {i}: {m:.1e}" for i, m in enumerate(moved, 1)),
    )
# --8<-- [end:unchanged]


# --8<-- [start:decode_variations]
def as_type(w, dtype):
    """The same weights, stored as ``dtype``."""
    return qkv.MultiHeadWeights(
        *(a.astype(dtype) for a in (w.w_q, w.w_k, w.w_v, w.w_o)),
        w.n_heads,
        w.n_kv_heads,
    )


print(
    "key/value heads  type        T   "
    "largest gap, in units of eps x largest output"
)
for n_kv in (4, 2, 1):  # multi-head, grouped-query, multi-query
    for dtype in (np.float64, np.float32):
        for t in (10, 200):
            wv = qkv.MultiHeadWeights.random(
                rng, d_model, n_heads, n_kv_heads=n_kv
            )
            wv, xv = (
                as_type(wv, dtype),
                rng.normal(size=(t, d_model)).astype(dtype),
            )
            cached = qkv.decode_with_cache(xv, wv)
            uncached = qkv.decode_without_cache(xv, wv)
            one_pass = qkv.multi_head_attention(
                xv, xv, wv, mask=qkv.causal_mask(t)
            ).output
            gap = max(
                np.abs(cached - uncached).max(), np.abs(cached - one_pass).max()
            )
            unit = np.finfo(dtype).eps * np.abs(one_pass).max()
            print(f"{n_kv:15}  {dtype.__name__:<7}  {t:4}   {gap / unit:.1f}")
# --8<-- [end:decode_variations]

# --8<-- [start:work]
print(f"{'':>5} {'K/V projections':>20}   {'query-key scores':>25}")
print(f"{'T':>5} {'cache':>9} {'no cache':>10}   {'cache':>10} {'no cache':>14}")
for T in (4, 16, 64, 256):
    x = rng.normal(size=(T, d_model))
    cache, no_cache = qkv.WorkCounter(), qkv.WorkCounter()
    qkv.decode_with_cache(x, w, cache)
    qkv.decode_without_cache(x, w, no_cache)
    print(
        f"{T:>5} {cache.total_kv_projections:>9,}"
        f" {no_cache.total_kv_projections:>10,}"
        f"   {cache.total_scores:>10,} {no_cache.total_scores:>14,}"
    )
print(
    f"the last token alone at T={T}:"
    f" projections {cache.kv_projections[-1]} vs"
    f" {no_cache.kv_projections[-1]},"
    f" scores {cache.scores[-1]:,} vs {no_cache.scores[-1]:,}"
)
# --8<-- [end:work]
