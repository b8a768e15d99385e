"""Attention step by step: scores, scaling, softmax, mixing,
and the shape at each step.

The six tokens of the random toy (d_k = 8, d_v = 4): here the arithmetic is the
point, not what the words mean. Run: python snippets/step_by_step.py
"""

# --8<-- [start:inputs]
import numpy as np

import qkv
from qkv import toy

words = toy.SENTENCE  # ("she", "drank", "milk", "from", "a", "cup")
X = toy.embeddings(words)  # one 16-wide embedding per token
p = toy.projections(d_k=toy.D_K, d_v=toy.D_V)  # W_Q, W_K: (16, 8)  W_V: (16, 4)
Q, K, V = qkv.project(X, p)  # Q = X W_Q, K = X W_K, V = X W_V
d_k = K.shape[-1]

print("X", X.shape, "-> Q", Q.shape, " K", K.shape, " V", V.shape)
# --8<-- [end:inputs]


# --8<-- [start:scores]
scores = Q @ K.T  # one dot product per (query, key) pair
print("scores = Q @ K.T:", Q.shape, "@", K.T.shape, "->", scores.shape)
print("typical size (std) of a raw score:", scores.std().round(2))
# --8<-- [end:scores]


# --8<-- [start:scale]
scaled = scores / np.sqrt(d_k)  # same shape, sqrt(8) = 2.83 times smaller
print("scaled = scores / sqrt(d_k):", scaled.shape)
print("typical size (std) of a scaled score:", scaled.std().round(2))
# --8<-- [end:scale]


# --8<-- [start:spread]
# Redo steps 1-2 on 2,000 fresh draws of six embeddings and projections, keeping
# the scores of a query with another token's key (the case the theory is about).
rng = np.random.default_rng(0)
other = ~np.eye(len(words), dtype=bool)  # (6, 6): True off the diagonal
raw = []
for _ in range(2000):
    x = rng.normal(size=X.shape)
    q, k, _ = qkv.project(x, qkv.Projections.random(rng, p.d_model, d_k, p.d_v))
    raw.append((q @ k.T)[other])  # 30 scores per draw
raw = np.concatenate(raw)
print(
    f"{raw.size:,} scores: std raw {raw.std():.2f}",
    f"(theory sqrt(8) = {np.sqrt(d_k):.2f}),",
    f"scaled {(raw / np.sqrt(d_k)).std():.2f} (theory 1)",
)
# --8<-- [end:spread]


# --8<-- [start:softmax]
weights = qkv.softmax(scaled, axis=-1)  # along each row: over the keys
print("weights = softmax(scaled):", weights.shape)
print(" " * 7 + "".join(f"{w:>7}" for w in words))  # one column per key
for word, row in zip(words, weights, strict=True):
    print(f"{word:>7}" + "".join(f"{x:7.3f}" for x in row))
print("row sums:   ", weights.sum(axis=-1).round(6))
print("column sums:", weights.sum(axis=0).round(3))
# --8<-- [end:softmax]


# --8<-- [start:mix]
output = weights @ V  # row i = sum over j of weights[i, j] * V[j]
print("output = weights @ V:", weights.shape, "@", V.shape, "->", output.shape)
milk = words.index("milk")
mixture = sum(w * v for w, v in zip(weights[milk], V, strict=True))
same = np.allclose(output[milk], mixture)  # its weighted sum of value rows
print("output for 'milk' equals its weighted sum of value rows:", same)
# --8<-- [end:mix]


# --8<-- [start:residual]
W_O = np.random.default_rng(2).normal(0.0, 0.5, (4, 16))  # 0.5 = 1 / sqrt(d_v)
update = output @ W_O  # (6, 4) @ (4, 16) -> (6, 16)
X_next = X + update  # added to the residual stream; X itself is kept
print("output", output.shape, "@ W_O", W_O.shape, "->", update.shape)
print("X_next = X + output @ W_O:", X_next.shape)
# --8<-- [end:residual]


# --8<-- [start:numpy]
result = qkv.attention(Q, K, V)  # the four steps in one call
print("weights match the steps above:", np.allclose(result.weights, weights))
print("output matches the steps above:", np.allclose(result.output, weights @ V))
# --8<-- [end:numpy]


# --8<-- [start:exercise_by_hand]
q = np.array([[2.0, 0.0, 2.0, 0.0]])  # one query, d_k = 4, so sqrt(d_k) = 2
k = np.array(
    [
        [1.0, 0.0, 1.0, 0.0],  # k_1
        [0.0, 1.0, 0.0, 1.0],  # k_2
        [1.0, 0.0, 0.0, 0.0],  # k_3
    ]
)
v = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
w, out = qkv.attention(q, k, v)
print("scaled scores:", (q @ k.T / 2).round(3))
print("weights:      ", w.round(3))
print("output:       ", out.round(3))
# --8<-- [end:exercise_by_hand]


# --8<-- [start:exercise_shapes]
rng = np.random.default_rng(5)
q3, k10, v10 = (rng.normal(size=s) for s in [(3, 8), (10, 8), (10, 4)])
w, out = qkv.attention(q3, k10, v10)
print("weights:", w.shape, "  output:", out.shape)
# --8<-- [end:exercise_shapes]


# --8<-- [start:exercise_wrong_axis]
# normalised over the queries: the wrong axis
by_column = qkv.softmax(scaled, axis=0)
print("row sums:   ", by_column.sum(axis=-1).round(3))
print("column sums:", by_column.sum(axis=0).round(3))
other = Q.copy()
other[words.index("cup")] *= 3  # change only cup's query
moved = qkv.softmax(other @ K.T / np.sqrt(d_k), axis=0)
print(
    "she's row moves when cup's query changes:",
    not np.allclose(moved[0], by_column[0]),
)
# --8<-- [end:exercise_wrong_axis]


# --8<-- [start:exercise_order]
same_order = (np.argsort(scores, axis=-1) == np.argsort(scaled, axis=-1)).all()
unscaled = qkv.softmax(scores, axis=-1)
print("each row ranks the keys the same, raw or scaled:", same_order)
print(f"largest weight per row, raw:    {unscaled.max(axis=-1).round(2)}")
print(f"largest weight per row, scaled: {weights.max(axis=-1).round(2)}")
# --8<-- [end:exercise_order]


# --8<-- [start:write_attention_skeleton]
from qkv.exercises import check_attention


def attention(q, k, v, mask):
    """q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v), and a
    boolean mask, True where a query may attend: return (weights, output)."""
    raise NotImplementedError("your code here")


print(check_attention(attention))
# --8<-- [end:write_attention_skeleton]


# --8<-- [start:write_attention]
import numpy as np

from qkv.exercises import check_attention


def attention(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])  # not k.T
    scores = np.where(mask, scores, -np.inf)  # a hidden key: exp(-inf) = 0
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)  # each row sums to 1
    return weights, weights @ v  # (..., T_q, d_v)


print(check_attention(attention))
# --8<-- [end:write_attention]
