"""Self-, cross- and masked (causal, padding) attention: one formula.

Run: python snippets/three_kinds.py
"""

# --8<-- [start:setup]
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


print("X", X.shape, " W_Q, W_K", p.w_q.shape, " W_V", p.w_v.shape)
# --8<-- [end:setup]


# --8<-- [start:self]
self_att = qkv.self_attention(X, p)  # Q, K and V all from X
print("self-attention weights:", self_att.weights.shape)
show(self_att.weights, words, words)
# --8<-- [end:self]


# --8<-- [start:causal]
causal = qkv.causal_mask(len(words))  # True where a query may attend
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
# Three positions of another sequence, random vectors like the toy's, labelled
# by position (t: target, s: source): random weights align no words.
target = ("t1", "t2", "t3")
source = tuple(f"s{i + 1}" for i in range(len(words)))  # the toy sentence's rows
decoder = toy.embeddings(target, seed=7)  # (3, 16)
cross = qkv.cross_attention(decoder, X, p)  # Q from decoder; K, V from X
print(
    "cross-attention weights:",
    cross.weights.shape,
    " output:",
    cross.output.shape,
)
show(cross.weights, target, source)
print("row sums:", cross.weights.sum(axis=-1).round(6))
# --8<-- [end:cross]


# --8<-- [start:cross_widths]
# A decoder 10 wide reading the toy sentence, 16 wide; one head, d_k 8, d_v 4
rng = np.random.default_rng(5)
d_dec, d_enc = 10, X.shape[-1]
narrow_decoder = rng.normal(size=(3, d_dec))
w_q = rng.normal(size=(d_dec, 8)) / np.sqrt(d_dec)  # reads the decoder's rows
w_k = rng.normal(size=(d_enc, 8)) / np.sqrt(d_enc)  # reads the encoder's rows
w_v = rng.normal(size=(d_enc, 4)) / np.sqrt(d_enc)  # reads the encoder's rows
w_o = rng.normal(size=(4, d_dec)) / 2  # back to the decoder's width
for name, m in (("W_Q", w_q), ("W_K", w_k), ("W_V", w_v), ("W_O", w_o)):
    print(name, m.shape)
both_widths = qkv.attention(narrow_decoder @ w_q, X @ w_k, X @ w_v)
print("weights", both_widths.weights.shape, " output", both_widths.output.shape)
print("after W_O", (both_widths.output @ w_o).shape, "- the decoder's width")
# --8<-- [end:cross_widths]
