"""The home page's first run: attention over a six-word sentence with qkv."""

# --8<-- [start:attend]
import qkv
from qkv import toy

# 6 words x 8 named features: "she drank milk from a cup"
x = toy.feature_embeddings()
q, k, v = qkv.project(x, toy.hand_built_projections())  # X W_Q, X W_K, X W_V
weights, output = qkv.attention(q, k, v)  # softmax(q kᵀ / √8), then @ v

print("weights:", weights.shape, "  output:", output.shape)
print("row sums:", weights.sum(axis=-1).round(6))
drank = toy.SENTENCE.index("drank")
for word, w in zip(toy.SENTENCE, weights[drank], strict=True):
    print(f"  drank -> {word:<5} {w:.3f}")
# --8<-- [end:attend]
