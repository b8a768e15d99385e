"""docs/keys-vs-values.md: keys decide who is read, values decide what is read
(the hand-built toy)."""

# --8<-- [start:setup]
import numpy as np

import qkv
from qkv import toy

Q, K, V = qkv.project(toy.feature_embeddings(), toy.hand_built_projections())
base = qkv.attention(Q, K, V)
words, hands_over = toy.SENTENCE, toy.VALUE_COLUMNS  # value columns, by name
drank, milk = words.index("drank"), words.index("milk")


def named(row, names):  # 'she 0.16, drank 0.04, ...'
    return ", ".join(f"{n} {x:.2f}" for n, x in zip(names, row, strict=True))


print("drank reads:    ", named(base.weights[drank], words))
print("drank receives: ", named(base.output[drank], hands_over))
# --8<-- [end:setup]

# --8<-- [start:change_value]
V_new = V.copy()
V_new[milk] = [0, 0, 0, 1]  # milk now hands over "container" instead of "dairy"
after = qkv.attention(Q, K, V_new)
print("weights identical:", np.array_equal(after.weights, base.weights))
print("drank receives: ", named(after.output[drank], hands_over))
# --8<-- [end:change_value]

# --8<-- [start:change_key]
K_new = K.copy()
K_new[milk] = 0  # milk's key stops showing "liquid"; its value still says "dairy"
after = qkv.attention(Q, K_new, V)
print(
    f"drank -> milk: {base.weights[drank, milk]:.2f} -> "
    f"{after.weights[drank, milk]:.2f}"
)
print("drank receives: ", named(after.output[drank], hands_over))
changed = ~np.isclose(after.weights, base.weights).all(axis=-1)
print(
    "rows of weights that changed:",
    [w for w, c in zip(words, changed, strict=True) if c],
)
# --8<-- [end:change_key]

# --8<-- [start:exercise_double]
V_twice = V.copy()
V_twice[milk] *= 2  # milk hands over twice as much dairy
after = qkv.attention(Q, K, V_twice)
print(
    f"drank -> milk: {base.weights[drank, milk]:.2f} -> "
    f"{after.weights[drank, milk]:.2f}"
)
print("drank receives: ", named(after.output[drank], hands_over))
# --8<-- [end:exercise_double]

# --8<-- [start:exercise_cup]
cup = words.index("cup")
K_cup = K.copy()
K_cup[cup, toy.FEATURES.index("liquid")] = 1  # cup's key now shows "liquid" too
after = qkv.attention(Q, K_cup, V)
print("drank reads:    ", named(after.weights[drank], words))
print("drank receives: ", named(after.output[drank], hands_over))
# --8<-- [end:exercise_cup]

# --8<-- [start:write_one_query_skeleton]
from qkv.exercises import check_one_query_attention


def one_query_attention(q, k, v):
    """q (d_k,) against k (T, d_k) and v (T, d_v): return the pair
    (weights of shape (T,), output of shape (d_v,)). qkv.softmax is allowed."""
    raise NotImplementedError("your code here")


print(check_one_query_attention(one_query_attention))
# --8<-- [end:write_one_query_skeleton]

# --8<-- [start:write_one_query]
import numpy as np

import qkv
from qkv.exercises import check_one_query_attention


def one_query_attention(q, k, v):
    weights = qkv.softmax(k @ q / np.sqrt(len(q)))  # the keys: where it goes
    return weights, weights @ v  # the values: what arrives


print(check_one_query_attention(one_query_attention))
# --8<-- [end:write_one_query]
