"""Self-, cross- and masked (causal, padding) attention: one formula.

Run: python snippets/three_kinds.py
"""

# --8<-- [start:self]
import textwrap

import numpy as np

import qkv
from qkv import toy

words = toy.SENTENCE  # ("she", "drank", "milk", "from", "a", "cup")
X = toy.embeddings(words)  # (6, 16)
p = toy.projections(toy.D_K, toy.D_V)  # W_Q, W_K (16, 8); W_V (16, 4)


def show(weights, rows, cols):
    """Print a weight matrix with a label on every row and column."""
    print(" " * 6 + "".join(f"{c:>7}" for c in cols))
    for label, row in zip(rows, weights, strict=True):
        print(f"{label:>6}" + "".join(f"{x:7.3f}" for x in row))


self_att = qkv.self_attention(X, p)  # Q, K and V all from X
print("self-attention weights:", self_att.weights.shape)
show(self_att.weights, words, words)
# --8<-- [end:self]


# --8<-- [start:causal]
causal = qkv.causal_mask(len(words))  # True where a query may attend
print(causal.astype(int))

masked = qkv.self_attention(X, p, mask=causal)
show(masked.weights, words, words)
future = ~causal  # the pairs above the diagonal
exact = bool((masked.weights[future] == 0).all())
print("weights on future tokens all exactly 0:", exact)
print("row sums:", masked.weights.sum(axis=-1).round(6))
# --8<-- [end:causal]


# --8<-- [start:padding]
# A batch of two sequences: all six words, and the first four padded to six.
rng = np.random.default_rng(1)
junk = rng.normal(size=(2, 16))  # whatever the padding holds
batch = np.stack([X, np.vstack([X[:4], junk])])  # (2, 6, 16)
lengths = [6, 4]
pad = qkv.padding_mask(lengths, t=6)  # (2, 1, 6): broadcasts over queries
print("padding mask", pad.shape, "- the keys each sequence may use:")
print(pad[:, 0].astype(int))

padded = qkv.self_attention(batch, p, mask=pad)
labels = (*words[:4], "<pad>", "<pad>")
show(padded.weights[1], labels, labels)
on_pad = padded.weights[1][:, 4:]  # every query's weight on the two pads
print("weights on padding all exactly 0:", bool((on_pad == 0).all()))

short = qkv.self_attention(X[:4], p)  # the four words alone, unpadded
print(
    "real tokens' outputs equal the unpadded ones:",
    np.allclose(padded.output[1, :4], short.output),
)

both = qkv.causal_mask(6) & pad  # (6, 6) & (2, 1, 6) -> (2, 6, 6)
print("causal and padding together:", both.shape)
# --8<-- [end:padding]


# --8<-- [start:cross]
decoder_words = ("elle", "a", "bu")  # three positions of another sequence
decoder = toy.embeddings(decoder_words, seed=7)  # (3, 16)
cross = qkv.cross_attention(decoder, X, p)  # Q from decoder; K, V from X
print(
    "cross-attention weights:",
    cross.weights.shape,
    " output:",
    cross.output.shape,
)
show(cross.weights, decoder_words, words)
print("row sums:", cross.weights.sum(axis=-1).round(6))
# --8<-- [end:cross]


# --8<-- [start:masked_numpy]
Q, K, V = qkv.project(X, p)
mask = qkv.causal_mask(len(words))  # (6, 6) booleans, True = may attend
weights, output = qkv.attention(Q, K, V, mask=mask)
print("weights", weights.shape, " output", output.shape)
# --8<-- [end:masked_numpy]


# --8<-- [start:fully_masked]
blocked = qkv.causal_mask(len(words))
blocked[0, 0] = False  # the first query may now attend to nothing at all
try:
    qkv.attention(Q, K, V, mask=blocked)
except ValueError as error:
    print(textwrap.fill(f"qkv: {error}", 72))
# --8<-- [end:fully_masked]
