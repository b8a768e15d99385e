"""Chapter 3: keys decide who is read, values decide what is read."""

# --8<-- [start:setup]
import numpy as np

import qkv
from qkv import toy

Q, K, V = qkv.project(toy.embeddings(), toy.projections(d_k=8))
base = qkv.attention(Q, K, V)
drank, milk = toy.SENTENCE.index("drank"), toy.SENTENCE.index("milk")
for word, w in zip(toy.SENTENCE, base.weights[drank], strict=True):
    print(f"drank -> {word:<5} {w:.3f}")
# --8<-- [end:setup]

# --8<-- [start:change_value]
V_new = V.copy()
V_new[milk] = -V[milk]  # milk now hands over the opposite vector
after = qkv.attention(Q, K, V_new)
print("weights identical:", np.array_equal(after.weights, base.weights))
change = np.abs(after.output - base.output).max()
print(f"largest change in the output: {change:.3f}")
# --8<-- [end:change_value]

# --8<-- [start:change_key]
K_new = K.copy()
K_new[milk] = Q[drank]  # milk's key now points where drank's query does
after = qkv.attention(Q, K_new, V)
before_w, after_w = base.weights[drank, milk], after.weights[drank, milk]
print(f"drank -> milk: {before_w:.3f} -> {after_w:.3f}")
changed = ~np.isclose(after.weights, base.weights).all(axis=-1)
print(f"rows of weights that changed: {changed.sum()} of {len(changed)}")
# --8<-- [end:change_key]
