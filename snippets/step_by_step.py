"""Attention step by step: scores, scaling, softmax, mixing, and the shape at each step.

Four tokens, d_k = 64. Run: python snippets/step_by_step.py
"""

# --8<-- [start:inputs]
import numpy as np

import qkv
from qkv import toy

words = toy.SENTENCE[:4]  # ("she", "drank", "milk", "from")
X = toy.embeddings(words)  # one 16-wide embedding per token
p = toy.projections(d_k=64)  # W_Q, W_K, W_V: (16, 64) each
Q, K, V = qkv.project(X, p)  # Q = X W_Q, K = X W_K, V = X W_V
d_k = K.shape[-1]

print("X", X.shape, "-> Q", Q.shape, " K", K.shape, " V", V.shape)
# --8<-- [end:inputs]


# --8<-- [start:scores]
scores = Q @ K.T  # one dot product per (query, key) pair
print("scores = Q @ K.T:", Q.shape, "@", K.T.shape, "->", scores.shape)
print("typical size (std) of a raw score:", scores.std().round(1))
# --8<-- [end:scores]


# --8<-- [start:scale]
scaled = scores / np.sqrt(d_k)  # same shape, sqrt(64) = 8 times smaller
print("sqrt(d_k) =", np.sqrt(d_k))
print("scaled = scores / sqrt(d_k):", scaled.shape)
print("typical size (std) of a scaled score:", scaled.std().round(1))
# --8<-- [end:scale]


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
print("output = weights @ V:", weights.shape, "@", V.shape, "->",
      output.shape)

i = words.index("milk")
mixture = sum(weights[i, j] * V[j] for j in range(len(words)))
print(f"output for {words[i]!r} equals its weighted sum of value rows:",
      np.allclose(output[i], mixture))
# --8<-- [end:mix]


# --8<-- [start:numpy]
result = qkv.attention(Q, K, V)  # the four steps in one call
print("weights match the steps above:", np.allclose(result.weights, weights))
print("output matches the steps above:", np.allclose(result.output, output))
# --8<-- [end:numpy]

