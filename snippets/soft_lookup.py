"""docs/soft-lookup.md: attention as a weighted average of values,
on a palette of four colours."""

# --8<-- [start:soft]
import numpy as np

import qkv

palette = {  # what each entry holds: an RGB colour
    "red": (1.0, 0.0, 0.0),
    "orange": (1.0, 0.5, 0.0),
    "blue": (0.0, 0.0, 1.0),
    "white": (1.0, 1.0, 1.0),
}
names = list(palette)
# what each entry is scored by: (warm, bright) of red, orange, blue and white
keys = np.array([[1.0, 0.2], [0.8, 0.8], [-1.0, 0.0], [0.0, 1.0]])
values = np.array(list(palette.values()))  # what gets averaged
query = np.array([[1.0, 0.0]])  # what we ask for: "something warm"

weights, answer = qkv.attention(query, keys, values)

print("scores:", keys @ query[0])
for name, w in zip(names, weights[0], strict=True):
    print(f"  weight on {name:<6} {w:.3f}")
print("sum of weights:", weights.sum().round(6))
print("answer:", answer[0].round(3), " an RGB colour no entry holds")
# --8<-- [end:soft]


# --8<-- [start:sharpen]
for factor in (1, 4, 16, 64):
    w, a = qkv.attention(query * factor, keys, values)
    red = w[0, names.index("red")]
    print(f"x{factor:<3} weight on red {red:.4f}  answer", a[0].round(3))
# --8<-- [end:sharpen]


# --8<-- [start:underflow]
w = qkv.attention(query * 64, keys, values).weights  # the warm query, 64 times
blue = w[0, names.index("blue")]
print(
    f"weight on blue at x64: {blue:.2g} in float64,",
    f"{np.float32(blue):.2g} as float32, {np.float16(blue)} as float16",
)
# --8<-- [end:underflow]


# --8<-- [start:hard]
print("palette['orange'] ->", palette["orange"])
print("'warm' in palette ->", "warm" in palette)
best = names[np.argmax(keys @ query[0])]  # hard attention: always some row
print("(1, 0) among the keys ->", any((keys == query[0]).all(axis=1)))
print("best match for (1, 0) ->", best, palette[best])
# --8<-- [end:hard]


# --8<-- [start:nudge]
def best_match(q):  # the value of the one best-scoring key: an argmax
    return values[np.argmax(keys @ q[0])]


before = np.array([[1.0, 0.30]])
after = np.array([[1.0, 0.36]])  # a small step in the query
print("best match:", best_match(before), "->", best_match(after))
soft_before = qkv.attention(before, keys, values).output[0]
soft_after = qkv.attention(after, keys, values).output[0]
print("average:   ", soft_before.round(3), "->", soft_after.round(3))
# --8<-- [end:nudge]


# --8<-- [start:kernel]
def kernel_weights(q, keys, variance):
    """Nadaraya-Watson: a Gaussian of the distance to each key, normalised;
    ``variance`` is the Gaussian's variance, the square of its width."""
    w = np.exp(-((q - keys) ** 2).sum(axis=-1) / (2 * variance))  # (n_keys,)
    return w / w.sum()


unit_keys = keys / np.linalg.norm(keys, axis=1, keepdims=True)  # all of norm 1
softmax_w = qkv.attention(query, unit_keys, values, scale=False).weights[0]
kernel_w = kernel_weights(query[0], unit_keys, variance=1.0)
print("softmax of q·k, keys of norm 1:", softmax_w.round(4))
print("Gaussian kernel of |q - k|:    ", kernel_w.round(4))
print(f"  largest difference {np.abs(softmax_w - kernel_w).max():.0e}")
own_w = qkv.attention(query, keys, values, scale=False).weights[0]
gap = np.abs(own_w - kernel_weights(query[0], keys, variance=1.0)).max()
print(f"the palette's own keys (norms differ): differ by up to {gap:.2f}")
for variance in (1.0, 0.1, 0.01):  # narrower: nearer to nearest-neighbour
    w = kernel_weights(query[0], unit_keys, variance)
    print(
        f"kernel variance {variance:<4}: nearest key ({names[w.argmax()]}) "
        f"gets {w.max():.4f}"
    )
# --8<-- [end:kernel]


# --8<-- [start:additive]
rng = np.random.default_rng(0)
hidden = 8  # the small network's width
w_q, w_k = rng.normal(size=(2, 2, hidden))  # (d_k, hidden) each
w_out = rng.normal(size=hidden)  # (hidden,)


def additive_scores(q, k):
    """Bahdanau et al.: w · tanh(q W_q + k W_k) for every query-key pair."""
    both = (q @ w_q)[:, None, :] + (k @ w_k)[None, :, :]  # (Tq, Tk, hidden)
    return np.tanh(both) @ w_out  # (Tq, Tk)


def dot_scores(q, k):
    """Transformers: q · k for every pair, one matrix product."""
    return q @ k.T  # (Tq, Tk)


bound = np.abs(w_out).sum()  # |tanh| <= 1, so no score passes this
for factor in (1, 10, 1000):
    add = additive_scores(query * factor, keys)[0]
    dot = dot_scores(query * factor, keys)[0]
    print(f"x{factor:<5} additive {add.round(2)}  dot {dot.round(1)}")
print(f"additive scores never pass sum|w| = {bound:.2f}")
print("additive builds", (len(query), len(keys), hidden), "before its scores")
# --8<-- [end:additive]


# --8<-- [start:exercise_bright]
bright = np.array([[0.0, 1.0]])  # "something bright"
w = qkv.attention(bright, keys, values).weights[0]
print("scores:", keys @ bright[0], "  weights:", w.round(3))
# --8<-- [end:exercise_bright]


# --8<-- [start:exercise_factor]
factor = 1
while (
    qkv.attention(query * factor, keys, values).weights[0, names.index("red")]
    <= 0.99
):
    factor += 1
print("smallest whole factor with red above 0.99:", factor)
# --8<-- [end:exercise_factor]


# --8<-- [start:exercise_blue]
# a long query pointing straight at blue
at_blue = 64 * keys[names.index("blue")][None]
w, a = qkv.attention(at_blue, keys, values)
print(f"weight on blue {w[0, names.index('blue')]:.6f}   answer {a[0]}")
print(
    f"weight left for the other three: {1 - w[0, names.index('blue')]:.2g}",
    f"(summed: {np.delete(w[0], names.index('blue')).sum():.2g})",
)
print("red channel above zero:", a[0, 0] > 0)
# longer still: the other weights fall below the smallest number the type holds
for factor, dtype in [(2000, np.float64), (200, np.float32)]:
    far = (factor * keys[names.index("blue")][None]).astype(dtype)
    w, a = qkv.attention(far, keys.astype(dtype), values.astype(dtype))
    print(
        f"x{factor} in {np.dtype(dtype).name}: weights {w[0]}, answer {a[0]},",
        "exactly blue:",
        bool((a[0] == [0.0, 0.0, 1.0]).all()),
    )
# --8<-- [end:exercise_blue]


# --8<-- [start:write_softmax_skeleton]
from qkv.exercises import check_softmax


def softmax(z, axis=-1):
    """Weights of the same shape as the scores z: positive, summing to 1
    along `axis`, and finite even when the scores are huge."""
    raise NotImplementedError("your code here")


print(check_softmax(softmax))
# --8<-- [end:write_softmax_skeleton]


# --8<-- [start:write_softmax]
import numpy as np

from qkv.exercises import check_softmax


def softmax(z, axis=-1):
    # each row's largest score becomes 0, so exp cannot overflow
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)  # keepdims: one sum per row


print(check_softmax(softmax))
# --8<-- [end:write_softmax]
