"""The hand-built toy: named features and W_Q, W_K, W_V written by hand
(docs/where-qkv-come-from.md, keys-vs-values.md and why-three-projections.md).

Run: python snippets/hand_built.py
"""

# --8<-- [start:roles]
import numpy as np

import qkv
from qkv import toy

words, features = toy.SENTENCE, toy.FEATURES
x = toy.feature_embeddings()  # (6, 8): 1 where a word has a feature
p = toy.hand_built_projections()  # W_Q, W_K: (8, 8)   W_V: (8, 4)
Q, K, V = qkv.project(x, p)


def named(row, names):
    """The non-zero entries of a row, by name: 'liquid 8' or '-'."""
    return (
        ", ".join(f"{n} {v:g}" for n, v in zip(names, row, strict=True) if v)
        or "-"
    )


print(f"{'word':<6} {'query looks for':<20} {'key shows':<25} value hands over")
for i, word in enumerate(words):
    print(
        f"{word:<6} {named(Q[i], features):<20} {named(K[i], features):<25}",
        named(V[i], toy.VALUE_COLUMNS),
    )
# --8<-- [end:roles]

# --8<-- [start:weights]
weights, output = qkv.attention(Q, K, V)
print(" " * 6 + "".join(f"{w:>7}" for w in words))  # one column per key
for word, row in zip(words, weights, strict=True):
    print(f"{word:>6}" + "".join(f"{w:7.2f}" for w in row))
# --8<-- [end:weights]

# --8<-- [start:drank]
drank, milk, she = (words.index(w) for w in ("drank", "milk", "she"))
scores = Q[drank] @ K.T / np.sqrt(toy.D_K)  # drank's query against every key
print("drank's scaled scores:", scores.round(2))
print(
    f"drank -> milk {weights[drank, milk]:.2f},  "
    f"drank -> she {weights[drank, she]:.2f}"
)
print("drank's output:", named(output[drank].round(2), toy.VALUE_COLUMNS))
# --8<-- [end:drank]

# --8<-- [start:one_way]
import numpy as np

import qkv
from qkv import toy

words = toy.SENTENCE
Q, K, _ = qkv.project(toy.feature_embeddings(), toy.hand_built_projections())
S = Q @ K.T / np.sqrt(toy.D_K)  # every scaled score: (6, 6)
W = qkv.softmax(S)  # every row of weights
frm, cup = words.index("from"), words.index("cup")
for i, j in [(frm, cup), (cup, frm)]:
    print(
        f"{words[i]:>4} -> {words[j]:<4} score {S[i, j]:.2f}   "
        f"weight {W[i, j]:.2f}"
    )
# --8<-- [end:one_way]
