"""Solutions to the exercises of docs/kv-cache-in-depth.md.

Run it as `python snippets/kv_cache_in_depth_exercises.py`.
"""

# --8<-- [start:cache_size]
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

# --8<-- [start:latent_128k]
v3 = next(m for m in qkv.LATENT_MODELS if m.name == "DeepSeek-V3")
llama3 = next(m for m in qkv.MODELS if m.name == "Llama 3 8B")
tokens = 131_072  # 128k
latent = v3.cache_bytes(tokens)
grouped = qkv.kv_cache_bytes(
    llama3.n_layers, llama3.n_kv_heads, llama3.d_head, tokens
)
print(f"DeepSeek-V3 per token: {v3.cache_bytes(1):,} bytes")
print(f"at 131,072 tokens: DeepSeek-V3 {latent / 2**30:.2f} GiB,")
print(f"Llama 3 8B {grouped / 2**30:.2f} GiB")
# --8<-- [end:latent_128k]
