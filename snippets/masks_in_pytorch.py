"""Masks in PyTorch: the masked function checked against qkv, and a query that
may read nothing.

Run: python snippets/masks_in_pytorch.py
"""

# --8<-- [start:masked_numpy]
import textwrap

import qkv
from qkv import toy

X = toy.embeddings()  # the toy sentence, (6, 16)
p = toy.projections(toy.D_K, toy.D_V)  # W_Q, W_K (16, 8); W_V (16, 4)
Q, K, V = qkv.project(X, p)
mask = qkv.causal_mask(len(X))  # (6, 6) booleans, True = may attend
weights, output = qkv.attention(Q, K, V, mask=mask)
print("weights", weights.shape, " output", output.shape)
# --8<-- [end:masked_numpy]


# --8<-- [start:fully_masked]
blocked = qkv.causal_mask(len(X))
blocked[0, 0] = False  # the first query may now attend to nothing at all
try:
    qkv.attention(Q, K, V, mask=blocked)
except ValueError as error:
    print(textwrap.fill(f"qkv: {error}", 72))
# --8<-- [end:fully_masked]
