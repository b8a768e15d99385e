"""Word order: without a mask attention cannot see it; a causal mask leaks some of
it; RoPE writes it into the queries and keys.

Run: python snippets/position.py
"""

# --8<-- [start:shuffle]
import numpy as np

import qkv
from qkv import toy

x, p = toy.feature_embeddings(), toy.hand_built_projections()  # hand-built
order = [5, 4, 3, 2, 1, 0]  # "cup a from milk drank she"
plain = qkv.self_attention(x, p)
shuffled = qkv.self_attention(x[order], p)  # the same words in another order
back = np.argsort(order)  # undoes the shuffle
print("shuffled:", " ".join(toy.SENTENCE[i] for i in order))
same_w = np.abs(shuffled.weights[back][:, back] - plain.weights).max()
same_out = np.abs(shuffled.output[back] - plain.output).max()
print(f"weights, unshuffled, differ by {same_w:.1e}; outputs by {same_out:.1e}")
# --8<-- [end:shuffle]


# --8<-- [start:causal_shuffle]
import numpy as np

import qkv
from qkv import toy

x, p = toy.feature_embeddings(), toy.hand_built_projections()  # hand-built
order, back = [5, 4, 3, 2, 1, 0], [5, 4, 3, 2, 1, 0]  # reversed; undone
causal = qkv.causal_mask(6)  # each word reads itself and the words before it
in_order = qkv.self_attention(x, p, mask=causal)
backwards = qkv.self_attention(x[order], p, mask=causal).output[back]
print(f"{'':>6}  output in order          output reversed")
for i, word in enumerate(toy.SENTENCE):
    forwards = in_order.output[i].round(2)
    print(f"{word:>6}  {forwards!s:<24} {backwards[i].round(2)}")
# --8<-- [end:causal_shuffle]


# --8<-- [start:counting]
import qkv
from qkv import toy

x, p = toy.feature_embeddings(), toy.hand_built_projections()  # hand-built
causal = qkv.causal_mask(6)
she, milk = toy.SENTENCE.index("she"), toy.SENTENCE.index("milk")
copies = x[[she] + [milk] * 5]  # "she milk milk milk milk milk"
unmasked = qkv.self_attention(copies, p).output[1:]  # the five copies
masked = qkv.self_attention(copies, p, mask=causal).output[1:]
print("the person column (she's) of each copy's output:")
print("  no mask:    ", unmasked[:, 0].round(3))
print("  causal mask:", masked[:, 0].round(3))
# --8<-- [end:counting]


# --8<-- [start:rotate]
def attention_with_rope(x, p):  # queries and keys turned; values untouched
    q, k, v = qkv.project(x, p)
    return qkv.attention(qkv.rope(q), qkv.rope(k), v)  # positions 0, 1, ..., T-1


in_order = attention_with_rope(x, p)  # no mask: order comes from RoPE
unshuffled = attention_with_rope(x[order], p).weights[back][:, back]
moved = np.abs(unshuffled - in_order.weights).max()
print(f"with RoPE, the shuffled sentence's weights differ by up to {moved:.2f}")
she_out = in_order.output[0].round(2)
print("she's output (person, verb, dairy, container):", she_out)
# --8<-- [end:rotate]


# --8<-- [start:layer_two]
import numpy as np

import qkv
from qkv import toy

# Two layers on the random toy, RoPE in both; each adds its output back.
x2 = toy.embeddings()  # (6, 16)
layer1, layer2 = (toy.projections(d_k=8, d_v=16, seed=s) for s in (2, 3))
order, milk = [5, 4, 3, 2, 1, 0], toy.SENTENCE.index("milk")  # reversed


def values_per_layer(tokens):
    """The values of layers 1 and 2; layer 1 adds its output back first."""
    q, k, v = qkv.project(tokens, layer1)
    after_1 = tokens + qkv.attention(qkv.rope(q), qkv.rope(k), v).output
    return v, after_1 @ layer2.w_v


first, second = values_per_layer(x2)
first_rev, second_rev = values_per_layer(x2[order])
at = order.index(milk)  # where milk stands in the reversed sentence
gap_1 = np.abs(first[milk] - first_rev[at]).max()
gap_2 = np.abs(second[milk] - second_rev[at]).max()
print(
    f"milk's value, in order vs reversed: layer 1 {gap_1:.1f} apart,",
    f"layer 2 {gap_2:.2f}",
)
# --8<-- [end:layer_two]


# --8<-- [start:offset]
import numpy as np

import qkv
from qkv import toy

rng = np.random.default_rng(0)
q, k = rng.normal(size=(2, 1, toy.D_K))  # one query and one key, 8 wide


def score(m, n):
    """The query at position m dotted with the key at position n, both rotated."""
    return (qkv.rope(q, [m]) @ qkv.rope(k, [n]).T).item()


for m, n in [(3, 0), (10, 7), (500, 497), (3, 1), (10, 9), (0, 3)]:
    print(
        f"query at {m:>3}, key at {n:>3} (offset {m - n}):",
        f"score {score(m, n):+.6f}",
    )
# --8<-- [end:offset]


# --8<-- [start:exercise_long]
she, milk = toy.SENTENCE.index("she"), toy.SENTENCE.index("milk")
long = x[[she] + [milk] * 99]  # she, then 99 copies of milk
last = qkv.self_attention(long, p, mask=qkv.causal_mask(100)).weights[-1]
print(f"the last copy's weight on she: {last[0]:.4f}")
# --8<-- [end:exercise_long]


# --8<-- [start:exercise_self]
import qkv
from qkv import toy

# the random toy (in the hand-built one, every own-key score is 0)
random_head = toy.projections(toy.D_K, toy.D_V)
queries, keys, _ = qkv.project(toy.embeddings(), random_head)
plain_self = (queries * keys).sum(axis=-1)  # each word's query with its own key
rotated_self = (qkv.rope(queries) * qkv.rope(keys)).sum(axis=-1)
print("own-key scores, plain:  ", plain_self.round(4))
print("own-key scores, rotated:", rotated_self.round(4))
# --8<-- [end:exercise_self]


# --8<-- [start:write_rope_skeleton]
import numpy as np

from qkv.exercises import check_rope


def rope(x, positions):
    """Turn pair i, (x[..., 2i], x[..., 2i + 1]), of the row at position m by
    the angle m * 10000 ** (-2i / d), counter-clockwise; d = x.shape[-1]."""
    raise NotImplementedError("your code here")


print(check_rope(rope))
# --8<-- [end:write_rope_skeleton]


# --8<-- [start:write_rope]
import numpy as np

from qkv.exercises import check_rope


def rope(x, positions):
    d = x.shape[-1]
    angle = np.outer(positions, 10000.0 ** (-np.arange(0, d, 2) / d))  # (T, d/2)
    z = (x[..., 0::2] + 1j * x[..., 1::2]) * np.exp(1j * angle)  # pairs, turned
    out = np.empty(x.shape)
    out[..., 0::2], out[..., 1::2] = z.real, z.imag
    return out


print(check_rope(rope))
# --8<-- [end:write_rope]
