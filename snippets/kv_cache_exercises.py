"""Solutions to the exercises of docs/kv-cache.md.

Run it as `python snippets/kv_cache_exercises.py`.
"""

# --8<-- [start:score_count]
import numpy as np

import qkv

rng = np.random.default_rng(0)
w = qkv.MultiHeadWeights.random(rng, d_model=16, n_heads=8)
x = rng.normal(size=(100, 16))  # 100 tokens, fed one at a time
cached, recomputed = qkv.WorkCounter(), qkv.WorkCounter()
qkv.decode_with_cache(x, w, cached)
qkv.decode_without_cache(x, w, recomputed)
print(f"scores with the cache:    {cached.total_scores:>9,}")
print(f"scores without the cache: {recomputed.total_scores:>9,}")
print(f"ratio: {recomputed.total_scores / cached.total_scores:.0f}")
# --8<-- [end:score_count]

# --8<-- [start:write_step_skeleton]
from qkv.exercises import check_kv_cache_step


def decode_step(x_new, w, cache):
    """The newest token's input x_new (1, d_model), the layer's weights w
    (a qkv.MultiHeadWeights) and the qkv.KVCache of the tokens before it:
    append the new key and value, then attend over the whole cache. Return
    (weights of shape (n_heads, 1, T), output of shape (1, d_model))."""
    raise NotImplementedError("your code here")


print(check_kv_cache_step(decode_step))
# --8<-- [end:write_step_skeleton]

# --8<-- [start:write_step]
import numpy as np

from qkv import attention, merge_heads, split_heads
from qkv.exercises import check_kv_cache_step


def decode_step(x_new, w, cache):
    q = split_heads(x_new @ w.w_q, w.n_heads)  # (heads, 1, d_head)
    k_new = split_heads(x_new @ w.w_k, w.n_kv_heads)  # (kv_heads, 1, d_head)
    v_new = split_heads(x_new @ w.w_v, w.n_kv_heads)
    cache.append(k_new, v_new)  # first: the new token attends to itself too
    group = w.n_heads // w.n_kv_heads  # query heads per key/value head
    k = np.repeat(cache.keys, group, axis=0)  # (heads, T, d_head)
    v = np.repeat(cache.values, group, axis=0)
    weights, out = attention(q, k, v)  # (heads, 1, T), (heads, 1, d_head)
    return weights, merge_heads(out) @ w.w_o  # (1, d_model)


print(check_kv_cache_step(decode_step))
# --8<-- [end:write_step]
