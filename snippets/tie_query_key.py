"""Chapter 4: what breaks when two of the three projections are tied."""

# --8<-- [start:setup]
import numpy as np

import qkv
from qkv import toy

words = toy.SENTENCE  # ("she", "drank", "milk", "from", "a", "cup")
x = toy.embeddings()
p = toy.projections(d_k=8)  # separate W_Q, W_K, W_V, each (16, 8)
milk, frm = words.index("milk"), words.index("from")


def scores(p):
    """The scaled scores Q Kᵀ / √d_k of the sentence under p: (T, T)."""
    q, k, _ = qkv.project(x, p)
    return q @ k.T / np.sqrt(p.d_k)


def show_pair(S, W):
    """Print the scores and weights of milk -> from and from -> milk."""
    for i, j in [(milk, frm), (frm, milk)]:
        s, w = S[i, j], W[i, j]
        print(f"{words[i]} -> {words[j]}: score {s:+.3f}   weight {w:.3f}")
# --8<-- [end:setup]

# --8<-- [start:asymmetric]
S = scores(p)
W = qkv.self_attention(x, p).weights
print("largest |S - Sᵀ|:", np.abs(S - S.T).max().round(3))
show_pair(S, W)
# --8<-- [end:asymmetric]

# --8<-- [start:symmetric]
tied_qk = qkv.Projections(w_q=p.w_k, w_k=p.w_k, w_v=p.w_v)  # W_Q = W_K
S_tied = scores(tied_qk)
W_tied = qkv.self_attention(x, tied_qk).weights
print("largest |S - Sᵀ|:", np.abs(S_tied - S_tied.T).max())
show_pair(S_tied, W_tied)
totals = np.exp(S_tied).sum(axis=-1)  # what softmax divides each row by
print(f"row totals: milk {totals[milk]:.1f}, from {totals[frm]:.1f}")
# --8<-- [end:symmetric]

# --8<-- [start:self_score]
on_itself = np.arange(len(words))
for name, s in [("separate", S), ("tied", S_tied)]:
    tops = int((s.argmax(axis=-1) == on_itself).sum())
    print(f"{name:<8} with itself {np.diag(s).round(2)}  top: {tops} of 6")
# --8<-- [end:self_score]

# --8<-- [start:tie_kv]
tied_kv = qkv.Projections(w_q=p.w_q, w_k=p.w_k, w_v=p.w_k)  # W_V = W_K
full, kv = qkv.self_attention(x, p), qkv.self_attention(x, tied_kv)
print("weights identical:", np.array_equal(kv.weights, full.weights))
change = np.abs(kv.output - full.output).max()
print(f"largest change in the output: {change:.3f}")
# --8<-- [end:tie_kv]

# --8<-- [start:dk_dv]
for d_k, d_v in [(8, 8), (2, 8), (8, 2), (64, 3)]:
    w, out = qkv.self_attention(x, toy.projections(d_k, d_v))
    print(f"d_k={d_k:<2} d_v={d_v}:  weights {w.shape}  output {out.shape}")
# --8<-- [end:dk_dv]
