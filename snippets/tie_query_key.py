"""docs/why-three-projections.md: what the three matrices pin down,
and what tying two of them breaks."""

# --8<-- [start:setup]
import numpy as np

import qkv
from qkv import toy

words = toy.SENTENCE  # ("she", "drank", "milk", "from", "a", "cup")
x, p = toy.embeddings(), toy.projections(d_k=8)  # W_Q, W_K, W_V: (16, 8)
milk, frm = words.index("milk"), words.index("from")


def scores(p):
    """The scaled scores Q Kᵀ / √d_k of the sentence under p: (T, T)."""
    q, k, _ = qkv.project(x, p)
    return q @ k.T / np.sqrt(p.d_k)


# --8<-- [end:setup]

# --8<-- [start:products]
rng = np.random.default_rng(1)
A = rng.normal(size=(p.d_k, p.d_k))  # any invertible d_k x d_k matrix
moved = qkv.Projections(w_q=p.w_q @ A, w_k=p.w_k @ np.linalg.inv(A).T, w_v=p.w_v)
product, product_moved = p.w_q @ p.w_k.T, moved.w_q @ moved.w_k.T
print(f"largest change in W_Q:      {np.abs(moved.w_q - p.w_q).max():.2f}")
print(f"largest change in W_Q W_Kᵀ: {np.abs(product_moved - product).max():.1e}")
print(
    f"largest change in a score:  {np.abs(scores(moved) - scores(p)).max():.1e}"
)
# --8<-- [end:products]

# --8<-- [start:products_value]
rng = np.random.default_rng(1)
W_O = rng.normal(size=(p.d_v, x.shape[1]))  # an output matrix, back to x's width
# another invertible matrix, on the value side
B = rng.normal(size=(p.d_v, p.d_v))
added = qkv.self_attention(x, p).output @ W_O  # what the head adds to the stream
with_b = qkv.Projections(p.w_q, p.w_k, p.w_v @ B)
added_b = qkv.self_attention(x, with_b).output @ (np.linalg.inv(B) @ W_O)
print(
    f"largest change in what the head adds: {np.abs(added_b - added).max():.1e}"
)
# --8<-- [end:products_value]

# --8<-- [start:asymmetric]
S = scores(p)
W = qkv.self_attention(x, p).weights
print("largest |S - Sᵀ|:", np.abs(S - S.T).max().round(3))
for i, j in [(milk, frm), (frm, milk)]:  # the pair, both ways
    s, w = S[i, j], W[i, j]
    print(f"{words[i]} -> {words[j]}: score {s:+.3f}   weight {w:.3f}")
# --8<-- [end:asymmetric]

# --8<-- [start:symmetric]
tied_qk = qkv.Projections(w_q=p.w_k, w_k=p.w_k, w_v=p.w_v)  # W_Q = W_K
S_tied = scores(tied_qk)
W_tied = qkv.self_attention(x, tied_qk).weights
print("largest |S - Sᵀ|:", np.abs(S_tied - S_tied.T).max())
for i, j in [(milk, frm), (frm, milk)]:  # the pair, both ways
    s, w = S_tied[i, j], W_tied[i, j]
    print(f"{words[i]} -> {words[j]}: score {s:+.3f}   weight {w:.3f}")
# --8<-- [end:symmetric]

# --8<-- [start:row_totals]
tied_qk = qkv.Projections(w_q=p.w_k, w_k=p.w_k, w_v=p.w_v)  # W_Q = W_K
S_tied, W_tied = scores(tied_qk), qkv.self_attention(x, tied_qk).weights
print(f"score of milk and from, either way: {S_tied[milk, frm]:+.3f}")
w_mf, w_fm = W_tied[milk, frm], W_tied[frm, milk]
print(f"weights: milk -> from {w_mf:.3f}, from -> milk {w_fm:.3f}")
totals = np.exp(S_tied).sum(axis=-1)  # what softmax divides each row by
print(f"row totals: milk {totals[milk]:.1f}, from {totals[frm]:.1f}")
ratio = W_tied[milk, frm] / W_tied[frm, milk]
print(f"weight milk -> from over from -> milk: {ratio:.1f}")
print(f"row total of from over that of milk:   {totals[frm] / totals[milk]:.1f}")
# --8<-- [end:row_totals]

# --8<-- [start:self_score]
S_tied = scores(qkv.Projections(w_q=p.w_k, w_k=p.w_k, w_v=p.w_v))  # W_Q = W_K
on_itself = np.arange(len(words))
for name, s in [("separate", S), ("tied", S_tied)]:
    tops = int((s.argmax(axis=-1) == on_itself).sum())
    print(f"{name:<8} with itself {np.diag(s).round(2)}  top: {tops} of 6")
# --8<-- [end:self_score]

# --8<-- [start:longer_key]
# add a seventh word: milk's embedding doubled, so its key is twice milk's key
x7 = np.vstack([x, 2 * x[milk]])
tied = qkv.Projections(w_q=p.w_k, w_k=p.w_k, w_v=p.w_v)  # W_Q = W_K
q7, k7, _ = qkv.project(x7, tied)
s7 = q7 @ k7.T  # raw tied scores, (7, 7)
print(f"milk with itself: {s7[milk, milk]:.2f}", end="   ")
print(f"with the doubled milk: {s7[milk, 6]:.2f}")
self_s = np.diag(s7)
# s_ii + s_jj - 2 s_ij is |k_i - k_j|², never negative
gap = self_s[:, None] + self_s - 2 * s7
pairs = ~np.eye(7, dtype=bool)  # i != j
print(f"smallest s_ii + s_jj - 2 s_ij over pairs: {gap[pairs].min():.2f}")
prefers_other = s7 > self_s[:, None]  # [i, j]: i scores j above itself
both = prefers_other & prefers_other.T
print("pairs in which each scores the other above itself:", int(both.sum()) // 2)
# --8<-- [end:longer_key]

# --8<-- [start:what_breaks]
k = x @ p.w_k  # tied: each word's query is its own key
# a bias, added to the queries only
b = np.random.default_rng(2).normal(size=p.d_k)


def asymmetry(q, k):
    """The largest |S - Sᵀ| of the raw scores q kᵀ."""
    s = q @ k.T
    return np.abs(s - s.T).max()


print(f"tied:                   {asymmetry(k, k):.1e}")
print(f"tied, turned by RoPE:   {asymmetry(qkv.rope(k), qkv.rope(k)):.1e}")
print(f"tied, with a query bias: {asymmetry(k + b, k):.2f}")
# --8<-- [end:what_breaks]

# --8<-- [start:tie_kv]
# hand-built toy
feats, hand = (
    toy.feature_embeddings(),
    toy.hand_built_projections(),
)
tied_kv = qkv.Projections(w_q=hand.w_q, w_k=hand.w_k, w_v=hand.w_k)  # W_V = W_K


def named(row, names):
    """The entries of a row that are not 0, with their column names."""
    pairs = zip(names, row, strict=True)
    return ", ".join(f"{n} {v:.2f}" for n, v in pairs if abs(v) >= 0.005)


drank, dairy = words.index("drank"), toy.FEATURES.index("dairy")
separate, tied = (
    qkv.self_attention(feats, hand),
    qkv.self_attention(feats, tied_kv),
)
print("weights identical:", np.array_equal(tied.weights, separate.weights))
print(
    "drank receives, W_V separate:",
    named(separate.output[drank], toy.VALUE_COLUMNS),
)
print("drank receives, W_V = W_K:   ", named(tied.output[drank], toy.FEATURES))
print("dairy received by any word, W_V = W_K:", tied.output[:, dairy].max())
# --8<-- [end:tie_kv]

# --8<-- [start:dk_dv]
for d_k, d_v in [(8, 8), (2, 8), (8, 2), (64, 3)]:
    pk = toy.projections(d_k, d_v)
    w, out = qkv.self_attention(x, pk)
    rank = np.linalg.matrix_rank(pk.w_q @ pk.w_k.T)  # of a (16, 16) matrix
    print(
        f"d_k={d_k:<2} d_v={d_v}:  weights {w.shape}  output {out.shape}  "
        f"rank {rank:>2}"
    )
# --8<-- [end:dk_dv]

# --8<-- [start:exercise_scale]
balanced = qkv.Projections(3 * p.w_q, p.w_k / 3, p.w_v)  # W_Q x 3, W_K / 3
only_q = qkv.Projections(3 * p.w_q, p.w_k, p.w_v)  # W_Q x 3 alone
S = scores(p)
change = np.abs(scores(balanced) - S).max()
print(f"W_Q x 3, W_K / 3: largest change in a score {change:.1e}")
print(f"W_Q x 3 alone:    every score times {np.median(scores(only_q) / S):.3f}")
# --8<-- [end:exercise_scale]

# --8<-- [start:exercise_rank]
product = p.w_q @ p.w_k.T  # what the scores depend on: (d_model, d_model)
print("W_Q W_Kᵀ:", product.shape, "  rank", np.linalg.matrix_rank(product))
print("numbers in W_Q and W_K:", p.w_q.size + p.w_k.size)
print("numbers in the product: ", product.size)
# --8<-- [end:exercise_rank]

# --8<-- [start:write_merged_skeleton]
from qkv.exercises import check_merged_scores


def merged_scores(x, w_q, w_k):
    """The scores (T, T) of x (T, d_model), through w_q @ w_k.T."""
    raise NotImplementedError("your code here")


print(check_merged_scores(merged_scores))
# --8<-- [end:write_merged_skeleton]


# --8<-- [start:write_merged]
import numpy as np

from qkv.exercises import check_merged_scores


def merged_scores(x, w_q, w_k):
    merged = w_q @ w_k.T  # (d_model, d_model): all the scores depend on
    d_k = w_q.shape[1]  # the width of the dot products, not of merged
    return x @ merged @ x.T / np.sqrt(d_k)  # (T, T)


print(check_merged_scores(merged_scores))
# --8<-- [end:write_merged]
