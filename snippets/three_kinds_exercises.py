"""Solutions to the exercises of docs/three-kinds.md.

Run it as `python snippets/three_kinds_exercises.py`.
"""

# --8<-- [start:causal_count]
import qkv
from qkv import toy

mask = qkv.causal_mask(5)  # True = may attend
print("pairs forced to weight 0:", int((~mask).sum()))
X = toy.embeddings()[:5]  # the first five toy words
p = toy.projections(toy.D_K, toy.D_V)  # the site's toy head: d_k = 8, d_v = 4
weights = qkv.self_attention(X, p, mask=mask).weights
print("first token's weight on itself:", weights[0, 0])
# --8<-- [end:causal_count]

# --8<-- [start:cross_shapes]
import numpy as np

import qkv
from qkv import toy

p = toy.projections(toy.D_K, toy.D_V)  # the site's toy head: d_k = 8, d_v = 4
# 5 positions that ask
reader = np.random.default_rng(3).normal(size=(5, toy.D_MODEL))
words = toy.embeddings()  # the 6 toy words, read
cross = qkv.cross_attention(reader, words, p)
print("weights", cross.weights.shape, " output", cross.output.shape)
# --8<-- [end:cross_shapes]

# --8<-- [start:end_padding]
import numpy as np

import qkv
from qkv import toy

p = toy.projections(toy.D_K, toy.D_V)  # the site's toy head
# (2, 6, 16): two copies of the sentence
batch = toy.embeddings()[None].repeat(2, axis=0)
batch[0, 4:] = (
    99.0  # the first sequence has 4 real words; its padding holds anything
)
pad = qkv.padding_mask([4, 6], 6)  # (2, 1, 6)
causal = qkv.causal_mask(6)
both = qkv.self_attention(batch, p, mask=causal & pad).output
causal_only = qkv.self_attention(batch, p, mask=causal).output
gap = np.abs(both[0, :4] - causal_only[0, :4]).max()
print(f"real tokens, causal + padding vs causal alone: max difference {gap}")
# --8<-- [end:end_padding]

# --8<-- [start:write_causal_mask_skeleton]
from qkv.exercises import check_causal_mask


def causal_mask(t_q, t_k=None):
    """A (t_q, t_k) boolean array, True where a query may attend. With
    t_k > t_q the queries are the last t_q of t_k positions."""
    raise NotImplementedError("your code here")


print(check_causal_mask(causal_mask))
# --8<-- [end:write_causal_mask_skeleton]

# --8<-- [start:write_causal_mask]
import numpy as np

from qkv.exercises import check_causal_mask


def causal_mask(t_q, t_k=None):
    t_k = t_q if t_k is None else t_k
    # query i sits at position t_k - t_q + i: it sees the keys up to there
    return np.tril(np.ones((t_q, t_k), dtype=bool), k=t_k - t_q)


print(check_causal_mask(causal_mask))
# --8<-- [end:write_causal_mask]
