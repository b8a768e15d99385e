"""docs/where-qkv-come-from.md: Q = X W_Q, K = X W_K, V = X W_V,
and the widths that must or need not agree."""

# --8<-- [start:project]
import numpy as np

import qkv
from qkv import toy

x = toy.embeddings()  # X: a row per word of "she drank milk from a cup"
p = toy.projections(d_k=8, d_v=4)  # W_Q, W_K: (16, 8)   W_V: (16, 4)
Q, K, V = qkv.project(x, p)  # Q = X W_Q,  K = X W_K,  V = X W_V

print("X  ", x.shape)
print("W_Q", p.w_q.shape, "  W_K", p.w_k.shape, "  W_V", p.w_v.shape)
print("Q  ", Q.shape, "   K  ", K.shape, "   V  ", V.shape)
# --8<-- [end:project]

# --8<-- [start:same_word]
milk = toy.SENTENCE.index("milk")
print("embedding:", x[milk, :4].round(2), "...")
print("as query: ", Q[milk].round(2))
print("as key:   ", K[milk].round(2))
print("as value: ", V[milk].round(2))
# --8<-- [end:same_word]

# --8<-- [start:parameters]
import inspect

head = toy.projections(d_k=8, d_v=4)  # the random toy's head, as above
learned = head.w_q.size + head.w_k.size + head.w_v.size
print("learned numbers in W_Q, W_K, W_V:", learned)
print(
    "d_model * (2 d_k + d_v)         :", head.d_model * (2 * head.d_k + head.d_v)
)
print("qkv.attention takes:", inspect.signature(qkv.attention))
# --8<-- [end:parameters]

# --8<-- [start:dk_must_match]
import textwrap

try:
    qkv.attention(Q, K[:, :5], V)  # keys cut to 5 of their 8 numbers
except ValueError as error:
    print(textwrap.fill(f"ValueError: {error}", width=70))
# --8<-- [end:dk_must_match]

# --8<-- [start:key_bias]
# One bias vector b, added to every row of K, then to every row of Q.
b = np.random.default_rng(0).normal(size=p.d_k)
plain = qkv.attention(Q, K, V).weights
key_bias = qkv.attention(Q, K + b, V).weights
query_bias = qkv.attention(Q + b, K, V).weights
change = np.abs(key_bias - plain).max()
print(f"bias on the keys:    weights change by {change:.1e}")
change = np.abs(query_bias - plain).max()
print(f"bias on the queries: weights change by {change:.3f}")
# --8<-- [end:key_bias]

# --8<-- [start:exercise_params]
head = qkv.Projections.random(
    np.random.default_rng(0), d_model=512, d_k=64, d_v=64
)
print("W_Q, W_K, W_V:", head.w_q.shape, head.w_k.shape, head.w_v.shape)
print("learned numbers:", head.w_q.size + head.w_k.size + head.w_v.size)
# --8<-- [end:exercise_params]

# --8<-- [start:exercise_she]
f = toy.FEATURES.index
hand = toy.hand_built_projections()
w_q = hand.w_q.copy()
w_q[f("person"), f("liquid")] = (
    8.0  # a person now also looks for something to drink
)
mine = qkv.Projections(w_q, hand.w_k, hand.w_v)
she = toy.SENTENCE.index("she")
row = qkv.self_attention(toy.feature_embeddings(), mine).weights[she]
print(
    "she ->",
    ", ".join(f"{w} {x:.2f}" for w, x in zip(toy.SENTENCE, row, strict=True)),
)
# --8<-- [end:exercise_she]


# --8<-- [start:write_step_skeleton]
from qkv.exercises import check_gradient_step


def step(w_q, w_k, x, i, j, lr):
    """One gradient step on W_Q, (d_model, d_k), that lowers the loss
    -log weights[i, j] (query i's weight on key j); return the new W_Q."""
    raise NotImplementedError("your code here")


print(check_gradient_step(step))
# --8<-- [end:write_step_skeleton]


# --8<-- [start:write_step]
import numpy as np

import qkv
from qkv.exercises import check_gradient_step


def step(w_q, w_k, x, i, j, lr):
    k, root = x @ w_k, np.sqrt(w_k.shape[1])  # every key; √d_k
    weights = qkv.softmax(x[i] @ w_q @ k.T / root)  # query i's row
    d_scores = weights - np.eye(len(weights))[j]  # minus 1 at the target
    d_q = k.T @ d_scores / root  # the score is q · k / √d_k
    return w_q - lr * np.outer(x[i], d_q)  # q = x_i @ W_Q: downhill


print(check_gradient_step(step))
# --8<-- [end:write_step]
