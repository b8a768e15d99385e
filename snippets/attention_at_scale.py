"""Attention without the T × T matrix: overflow, the online softmax by hand, tiled
attention against qkv.attention, and linear attention's cost.

Run: python snippets/attention_at_scale.py
"""

# --8<-- [start:overflow]
import numpy as np

import qkv

scores = np.array([1000.0, 999.0, 998.0])
with np.errstate(over="ignore", invalid="ignore"):
    naive = np.exp(scores) / np.exp(scores).sum()  # exp(1000) is inf
print("naive:     ", naive)
print("qkv.softmax:", qkv.softmax(scores).round(4))
shifted = scores - scores.max()  # [0, -1, -2]: the same weights, no overflow
print("shifted:   ", (np.exp(shifted) / np.exp(shifted).sum()).round(4))
# --8<-- [end:overflow]


# --8<-- [start:by_hand]
import math

m, s = -math.inf, 0.0  # running maximum, running sum of exp(score - m)
for z in [1.0, 3.0, 2.0]:
    m_new = max(m, z)
    s = s * math.exp(m - m_new) + math.exp(z - m_new)  # rescale, then add
    m = m_new
    print(f"read {z:.0f}: m = {m:.0f}, s = {s:.4f}")
weights = [math.exp(z - m) / s for z in [1.0, 3.0, 2.0]]
print("online: ", [round(w, 4) for w in weights])
print("softmax:", qkv.softmax([1.0, 3.0, 2.0]).round(4).tolist())
# --8<-- [end:by_hand]


# --8<-- [start:tiled]
rng = np.random.default_rng(0)
q, k, v = rng.normal(size=(3, 50, 16))  # T = 50, d = 16
mask = qkv.causal_mask(50)
full = qkv.attention(q, k, v, mask=mask)
for block_q, block_k in [(7, 6), (50, 50), (1, 1)]:
    tiled = qkv.tiled_attention(q, k, v, mask, block_q=block_q, block_k=block_k)
    gap = np.abs(tiled.output - full.output).max()
    print(f"blocks {block_q:>2} x {block_k:>2}: largest difference {gap:.1e}")
# the log-sum-exp per row gives back any weight: exp(score - lse)
row = (q[9] @ k[:10].T / 4.0) - tiled.logsumexp[9]
print("row 9 rebuilt from lse:", np.allclose(np.exp(row), full.weights[9, :10]))
# --8<-- [end:tiled]


# --8<-- [start:float32]
q32, k32, v32 = (a.astype(np.float32) for a in (q, k, v))
tiled32 = qkv.tiled_attention(q32, k32, v32, mask, block_q=7, block_k=6)
full32 = qkv.attention(q32, k32, v32, mask=mask)
print("float32, blocks 7 x 6:", np.abs(tiled32.output - full32.output).max())
# --8<-- [end:float32]


# --8<-- [start:memory_variations]
import tracemalloc


def peak_mib(fn, *args, **kwargs):
    """The most memory NumPy held at once while fn ran, in MiB (inputs not
    counted)."""
    tracemalloc.start()
    try:
        fn(*args, **kwargs)
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


t = 2048
print(f"T = {t}, peak MiB        attention   tiled_attention")
tried = [  # (what changes, d, float type, causal mask, block_q, block_k)
    ("blocks 128 x 128", 64, np.float32, False, 128, 128),
    ("blocks 256 x 256", 64, np.float32, False, 256, 256),
    ("default, 1024 x 2048", 64, np.float32, False, 1024, 2048),
    ("one block, 2048 x 2048", 64, np.float32, False, 2048, 2048),
    ("256 x 256, float64", 64, np.float64, False, 256, 256),
    ("256 x 256, causal mask", 64, np.float32, True, 256, 256),
    ("256 x 256, d = 128", 128, np.float32, False, 256, 256),
]
for name, d, dtype, causal, bq, bk in tried:
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((t, d)).astype(dtype) for _ in range(3))
    m = qkv.causal_mask(t) if causal else None  # made before: an input
    full = peak_mib(qkv.attention, q, k, v, mask=m)
    tiled = peak_mib(qkv.tiled_attention, q, k, v, m, block_q=bq, block_k=bk)
    print(f"{name:<24} {full:12.1f}   {tiled:15.1f}")
# --8<-- [end:memory_variations]


# --8<-- [start:linear]
d = 64
for t in [16, 65, 256, 4096]:
    soft = qkv.attention_flops(t, t, d, d)
    linear = qkv.linear_attention_flops(t, d, d)
    print(f"T = {t:>4}: softmax {soft:>13,} flops, linear {linear:>11,}")

# one score far above the rest: softmax gives it nearly everything
q1 = np.array([[1.0, 0.0]])
k3 = np.array([[20.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
print(
    "softmax weights:",
    qkv.attention(q1, k3, np.eye(3), scale=False).output.round(4),
)
print("linear weights: ", qkv.linear_attention(q1, k3, np.eye(3)).round(4))
# --8<-- [end:linear]
