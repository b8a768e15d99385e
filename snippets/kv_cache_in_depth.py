"""What a KV cache costs in memory: published models, shared key/value heads,
sliding windows and latent caches.

Shown on docs/kv-cache-in-depth.md.
Run it as `python snippets/kv_cache_in_depth.py`.
"""

# --8<-- [start:memory]
import numpy as np

import qkv

context = 4096  # tokens; 2 bytes per number (float16 / bfloat16)
print(
    f"{'model':<13}{'layers':>7}{'heads':>6}{'KV heads':>9}{'d_head':>7}"
    f"{'per token':>11}{'4,096 tokens':>14}"
)
for m in qkv.MODELS:
    token = qkv.kv_cache_bytes(m.n_layers, m.n_kv_heads, m.d_head, 1)
    full = qkv.kv_cache_bytes(m.n_layers, m.n_kv_heads, m.d_head, context)
    print(
        f"{m.name:<13}{m.n_layers:>7}{m.n_heads:>6}{m.n_kv_heads:>9}"
        f"{m.d_head:>7}{token / 2**10:>7,.0f} KiB"
        f"{full / 2**20:>10,.0f} MiB"
    )
# --8<-- [end:memory]

# --8<-- [start:shrink]
for m in qkv.MODELS:
    as_multi_head = qkv.kv_cache_bytes(m.n_layers, m.n_heads, m.d_head, 1)
    actual = qkv.kv_cache_bytes(m.n_layers, m.n_kv_heads, m.d_head, 1)
    print(
        f"{m.name:<13}{m.kind:<14}{m.n_heads:>3} query heads,"
        f"{m.n_kv_heads:>3} KV heads: cache / {as_multi_head / actual:.0f}"
    )
# --8<-- [end:shrink]

# --8<-- [start:grouped]
rng = np.random.default_rng(0)
x = rng.normal(size=(16, 64))
for n_kv in (8, 2, 1):  # multi-head, grouped-query, multi-query
    w_g = qkv.MultiHeadWeights.random(rng, 64, n_heads=8, n_kv_heads=n_kv)
    cache = qkv.KVCache.empty(n_kv, w_g.d_head)
    cache.append(
        qkv.split_heads(x @ w_g.w_k, n_kv), qkv.split_heads(x @ w_g.w_v, n_kv)
    )
    # float64
    formula = qkv.kv_cache_bytes(1, n_kv, w_g.d_head, len(x), bytes_per_value=8)
    work = qkv.WorkCounter()
    qkv.decode_with_cache(x, w_g, work)
    print(
        f"n_kv_heads={n_kv}: keys {cache.keys.shape},"
        f" {cache.nbytes():>6,} bytes (formula {formula:>6,}),"
        f" scores {work.total_scores:,}"
    )
# --8<-- [end:grouped]

# --8<-- [start:window]
print(
    f"{'model':<12}{'local layers':>13}{'4,096':>10}{'8,192':>10}{'32,768':>10}"
)
# local layers keep a rolling cache of `window` tokens, the others every token
for m in qkv.WINDOWED_MODELS:
    sizes = [m.cache_bytes(n) / 2**20 for n in (4096, 8192, 32768)]
    print(
        f"{m.name:<12}{m.local_layers:>6} of {m.n_layers:<5}",
        "".join(f"{s:>6,.0f} MiB" for s in sizes),
    )
mistral, gemma = qkv.WINDOWED_MODELS[:2]
# every token kept, as without a window
full = qkv.kv_cache_bytes(
    mistral.n_layers, mistral.n_kv_heads, mistral.d_head, 32768
)
print(
    "Mistral 7B at 32,768 tokens: "
    f"{full / mistral.cache_bytes(32768):.0f}x smaller"
)
everything = qkv.kv_cache_bytes(
    gemma.n_layers, gemma.n_kv_heads, gemma.d_head, 8192
)
print(
    f"Gemma 2 9B at 8,192 tokens: {gemma.cache_bytes(8192) / 2**20:,.0f} MiB",
    f"of {everything / 2**20:,.0f} without windows",
)
# --8<-- [end:window]

# --8<-- [start:latent]
for m in qkv.LATENT_MODELS:
    token = m.cache_bytes(1)  # latent + RoPE key, per layer, 2 bytes each
    as_mha = qkv.kv_cache_bytes(m.n_layers, m.n_heads, m.d_head, 1)
    width = m.kv_lora_rank + m.qk_rope_head_dim  # numbers per token and layer
    print(
        f"{m.name}: {m.n_layers} layers x ({m.kv_lora_rank} + "
        f"{m.qk_rope_head_dim}) x 2 bytes = {token:,} bytes per token"
    )
    print(
        f"  MHA with {m.n_heads} heads of {m.d_head} would keep "
        f"{as_mha / token:.1f}x more; "
        f"GQA with {width / (2 * m.d_head):.2f} KV heads as much"
    )
v2, dense = qkv.LATENT_MODELS[0], qkv.DEEPSEEK_67B
dense_token = qkv.kv_cache_bytes(
    dense.n_layers, dense.n_kv_heads, dense.d_head, 1
)
print(f"DeepSeek LLM 67B (GQA, 16-bit): {dense_token:,} bytes/token")
print(f"reduction, both 16-bit:        {1 - v2.cache_bytes(1) / dense_token:.1%}")
six_bits = v2.cache_bytes(1) / 2 * 6 / 8  # the same numbers at 6 bits each
print(f"reduction, DeepSeek-V2 6-bit:  {1 - six_bits / dense_token:.1%}")
# --8<-- [end:latent]
