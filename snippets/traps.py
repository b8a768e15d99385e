"""Mistakes that run without an error: each one done wrong, measured,
and put right.

Run: python snippets/traps.py
"""

# --8<-- [start:setup]
import numpy as np

import qkv
from qkv import toy

words = toy.SENTENCE  # ("she", "drank", "milk", "from", "a", "cup")
X = toy.embeddings(words)  # (6, 16)
p = toy.projections(toy.D_K, toy.D_V)  # W_Q, W_K (16, 8); W_V (16, 4)
Q, K, V = qkv.project(X, p)
scores = Q @ K.T / np.sqrt(toy.D_K)  # (6, 6)
# --8<-- [end:setup]


# --8<-- [start:wrong_axis]
by_query = qkv.softmax(scores, axis=0)  # wrong: each key's column sums to 1
by_key = qkv.softmax(scores, axis=-1)  # right: each query's row sums to 1
print("row sums, axis=0: ", by_query.sum(axis=-1).round(3))
print("row sums, axis=-1:", by_key.sum(axis=-1).round(3))
print("mean row sum, axis=0:", by_query.sum(axis=-1).mean().round(12))
# --8<-- [end:wrong_axis]


# --8<-- [start:wrong_axis_variations]
rng = np.random.default_rng(0)
print(
    "keys  score spread   smallest (over 100 draws) of the largest |row sum - 1|"
)
for n_keys in (6, 64, 512):
    for spread in (1.0, 0.1, 0.01):
        worst = []
        for _ in range(100):
            q, k = rng.normal(size=(2, n_keys, 8))  # d_k = 8
            s = (
                spread * (q @ k.T) / np.sqrt(8)
            )  # standard deviation about `spread`
            rows = qkv.softmax(s, axis=0).sum(axis=-1)  # wrong axis again
            worst.append(np.abs(rows - 1).max())
        print(f"{n_keys:4}  {spread:12}   {min(worst):.2g}")
# --8<-- [end:wrong_axis_variations]


# --8<-- [start:forgot_values]
p6 = toy.projections(d_k=8, d_v=6)  # the value width happens to equal T = 6
Q6, K6, V6 = qkv.project(X, p6)
weights = qkv.softmax(Q6 @ K6.T / np.sqrt(8))
forgot = weights  # wrong: stopped after softmax
output = weights @ V6  # right: the weights applied to the values
print(
    "shapes:", forgot.shape, output.shape, " equal:", forgot.shape == output.shape
)
print("largest difference:", np.abs(forgot - output).max().round(3))
print("rows of the wrong one sum to 1:", forgot.sum(axis=-1).round(6))
# --8<-- [end:forgot_values]


# --8<-- [start:same_vector]
def favourites(weights):
    """The key each query gives its largest weight."""
    return [words[j] for j in weights.argmax(axis=-1)]


# Wrong: the embedding itself as query, key and value.
raw = qkv.attention(X, X, X)
symmetric = np.allclose(X @ X.T, (X @ X.T).T)
print("embeddings as Q, K, V: scores symmetric:", symmetric)
print("embeddings as Q, K, V: favourite keys:  ", favourites(raw.weights))

# What attention does: three projections give each token three different vectors.
projected = qkv.attention(Q, K, V)
symmetric = np.allclose(Q @ K.T, (Q @ K.T).T)
print("projected:             scores symmetric:", symmetric)
print("projected:             favourite keys:  ", favourites(projected.weights))
# --8<-- [end:same_vector]


# --8<-- [start:similarity]
twice = np.vstack([X, X[2]])  # "milk" appears twice: identical embeddings
labels = (*words, "milk'")
w = qkv.self_attention(twice, p).weights  # (7, 7)
milk, copy = 2, 6
print(
    "milk -> milk:",
    w[milk, milk].round(3),
    "  milk -> milk':",
    w[milk, copy].round(3),
)
favourite = w[milk].argmax()
print("milk's favourite key:", labels[favourite], w[milk, favourite].round(3))
same = np.allclose(w[:, milk], w[:, copy], rtol=1e-12, atol=0)
print("every query weighs milk and milk' equally:", same)
print(
    "words whose favourite key is themselves:",
    [labels[i] for i in range(7) if w[i].argmax() == i],
)
# --8<-- [end:similarity]


# --8<-- [start:twin_variations]
def self_share(q, k):
    """The share of queries whose largest score is on their own key."""
    return np.mean((q @ k.T).argmax(axis=-1) == np.arange(len(q)))


rng = np.random.default_rng(0)
print(
    "tokens  d_model  d_k   "
    "itself the favourite key, share of queries (200 draws)"
)
print("                       X as Q and K   W_Q = W_K   W_Q, W_K apart   1/T")
settings = [("toy", 16, 8), (6, 16, 8), (6, 64, 64), (32, 64, 16), (32, 256, 64)]
for n, d, dk in settings:
    shares = np.zeros(3)
    for _ in range(200):
        x = (
            X if n == "toy" else rng.normal(size=(n, d))
        )  # the toy sentence, or random
        w_q, w_k = rng.normal(size=(2, d, dk)) / np.sqrt(d)
        pairs = [(x, x), (x @ w_q, x @ w_q), (x @ w_q, x @ w_k)]
        shares += [self_share(q, k) / 200 for q, k in pairs]
    t = len(x)
    print(
        f"{n!s:>6}  {d:7}  {dk:3}   {shares[0]:12.2f}   {shares[1]:9.2f}   "
        f"{shares[2]:14.2f}   {1 / t:.2f}"
    )
# --8<-- [end:twin_variations]


# --8<-- [start:overflow]
def naive_softmax(z):
    """The formula as written: exp, then divide by the row's sum."""
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


q, k, _ = qkv.project(X, p)  # NumPy again (the PyTorch tab above reuses Q and K)
toy_scores = q @ k.T / np.sqrt(toy.D_K)  # (6, 6)
small = toy_scores.astype(np.float32)  # the toy's scores: all is well
large = (toy_scores * 50).astype(np.float32)  # the same scores, 50 times wider
with np.errstate(over="ignore", invalid="ignore"):
    for name, z in [("small", small), ("large", large)]:
        w = naive_softmax(z)
        print(
            f"{name} scores: max {z.max():7.1f}, rows with NaN:",
            int(np.isnan(w).any(axis=-1).sum()),
            "of",
            len(z),
        )
stable = qkv.softmax(large)  # subtracts each row's maximum first
print(
    "qkv.softmax on the large scores, rows with NaN:",
    np.isnan(stable).any(-1).sum(),
)
# --8<-- [end:overflow]
