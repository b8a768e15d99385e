"""Why a KV cache changes no output of a causal decoder.

Shown on docs/kv-cache.md. Run it as `python snippets/kv_cache.py`.
"""

# --8<-- [start:setup]
import numpy as np

import qkv

rng = np.random.default_rng(0)
d_model, n_heads = 32, 4
w = qkv.MultiHeadWeights.random(rng, d_model=d_model, n_heads=n_heads)
# --8<-- [end:setup]

# --8<-- [start:decode]
x = rng.normal(size=(10, d_model))
cached = qkv.decode_with_cache(x, w)
uncached = qkv.decode_without_cache(x, w)
mask = qkv.causal_mask(len(x))
one_pass = qkv.multi_head_attention(x, x, w, mask=mask).output
print(f"max |cached - uncached| = {np.abs(cached - uncached).max():.1e}")
print(f"max |cached - one pass| = {np.abs(cached - one_pass).max():.1e}")
# --8<-- [end:decode]
