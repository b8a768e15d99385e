"""The contributor guide's example: a snippet in two named sections,
run in order on one page."""

# --8<-- [start:setup]
import numpy as np

import qkv
from qkv import toy

x = toy.embeddings()  # (6, 16): one row per word of the toy sentence
print("sentence:", " ".join(toy.SENTENCE), " x:", x.shape)
# --8<-- [end:setup]

# --8<-- [start:weights]
weights = qkv.self_attention(x, toy.projections(d_k=8)).weights  # (6, 6)
print("largest weight in each row:", np.round(weights.max(axis=-1), 3))
# --8<-- [end:weights]
