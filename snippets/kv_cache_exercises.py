"""Solutions to the exercises of docs/kv-cache.md (chapter 12).

Run it as `python snippets/kv_cache_exercises.py`.
"""

# --8<-- [start:cache_size]
import numpy as np

import qkv

layers, query_heads, kv_heads, d_head = 24, 16, 4, 64
tokens, bytes_per_number = 8192, 2  # 16-bit numbers

shared = qkv.kv_cache_bytes(layers, kv_heads, d_head, tokens, bytes_per_number)
unshared = qkv.kv_cache_bytes(
    layers, query_heads, d_head, tokens, bytes_per_number
)
print(f"4 key/value heads:  {shared:,} bytes = {shared / 2**20:g} MiB")
print(f"16 key/value heads: {unshared:,} bytes = {unshared / 2**20:g} MiB")
# --8<-- [end:cache_size]

# --8<-- [start:score_count]
heads, T = 8, 100
w = qkv.MultiHeadWeights.random(
    np.random.default_rng(0), d_model=16, n_heads=heads
)
x = np.random.default_rng(1).normal(size=(T, 16))  # 100 tokens, fed one at a time
cached, recomputed = qkv.WorkCounter(), qkv.WorkCounter()
qkv.decode_with_cache(x, w, cached)
qkv.decode_without_cache(x, w, recomputed)
print(f"scores with the cache:    {cached.total_scores:>9,}")
print(f"scores without the cache: {recomputed.total_scores:>9,}")
print(f"ratio: {recomputed.total_scores / cached.total_scores:.0f}")
# --8<-- [end:score_count]
