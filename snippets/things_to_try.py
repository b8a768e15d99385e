"""The numbers behind the five experiments of docs/things-to-try.md,
from the explorer's own data.

Every state comes from qkv.toy.query_state, the function that also fills the
attention explorer page, so the text and the explorer show the same numbers.
"""

# --8<-- [start:setup]
import numpy as np

import qkv
from qkv.toy import SENTENCE, query_state

WORDS = SENTENCE  # she drank milk from a cup
# --8<-- [end:setup]


# --8<-- [start:end_to_end]
def row(label, numbers):
    """One line of a table: a label, then one number per key word."""
    print(f"{label:<16}" + "".join(f"{x:>9.4f}" for x in numbers))


def header(label=""):
    print(f"{label:<16}" + "".join(f"{w:>9}" for w in WORDS))


she = query_state("she", d_k=16, scale=True)
header("query 'she'")
row("1 raw q·k", she.raw)
row("2 divided by 4", she.scaled)  # √16 = 4
row("3 weights", she.weights)
print("4 output (d_v = 4):", np.round(she.output, 4))
# --8<-- [end:end_to_end]


# --8<-- [start:one_dimension]
def ranking(state):
    """The key words from highest to lowest score."""
    return [WORDS[j] for j in np.argsort(-state.raw)]


she_order = ranking(query_state("she", 1, scale=True))
orders, same = {}, []
for word in WORDS:
    on, off = query_state(word, 1, scale=True), query_state(word, 1, scale=False)
    orders[word] = ranking(on)
    same.append(np.array_equal(on.weights, off.weights))  # exactly, not roughly
reverse = next(w for w in WORDS if orders[w] != she_order)
for word in ("she", "drank", reverse):
    print(f"{word:<6} ranks the keys: {' > '.join(orders[word])}")
one_way = all(o in (she_order, she_order[::-1]) for o in orders.values())
print(f"d_k=1: all six in she's order or its reverse {one_way},", end=" ")
print(f"same weights unscaled {all(same)} (scale {qkv.scale_factor(True, 1)})")
# --8<-- [end:one_dimension]


# --8<-- [start:who_asks]
for word in ("she", "drank"):
    keys = " > ".join(ranking(query_state(word, 16, scale=True)))
    print(f"d_k=16 {word:>5} ranks the keys: {keys}")
# --8<-- [end:who_asks]


# --8<-- [start:break_scaling]
def summary(d_k, scale):
    """Per query: best key, top two scores, largest weight, entropy."""
    print("query   top key  top score  runner-up  largest w  entropy", end="")
    print(f"   (d_k = {d_k}, scaling {'on' if scale else 'off'})")
    for word in WORDS:
        s = query_state(word, d_k, scale)
        first, second = np.sort(s.scaled)[::-1][:2]  # scores reaching softmax
        top = WORDS[int(np.argmax(s.weights))]
        print(
            f"{word:<7}{top:>8}{first:>11.3f}{second:>11.3f}"
            f"{s.max_weight:>11.4f}{s.entropy:>9.4f}"
        )


summary(64, scale=False)

# the spread (std) of all 36 scores reaching softmax, against d_k = 16 scaled
spread = [
    np.std([query_state(w, d, s).scaled for w in WORDS])
    for d, s in [(64, False), (16, True)]
]
ratio = spread[0] / spread[1]
print(f"spread of the scores: {ratio:.1f} times that at d_k = 16, scaled")
# --8<-- [end:break_scaling]


# --8<-- [start:gradient]
for scale in (False, True):
    w = query_state("she", 64, scale).weights
    largest = np.abs(qkv.softmax_jacobian(w)).max()  # d weight / d score
    print(
        f"she, d_k=64, scaling {'on ' if scale else 'off'}: "
        f"largest softmax gradient entry {largest:.6f}"
    )
# --8<-- [end:gradient]


# --8<-- [start:fix_scaling]
on = [query_state(w, 64, scale=True) for w in WORDS]
largest, lowest = max(s.max_weight for s in on), min(s.entropy for s in on)
print(f"d_k = 64, scaling on: largest weight {largest:.3f},", end=" ")
print(f"lowest entropy {lowest:.3f}")
# --8<-- [end:fix_scaling]


# --8<-- [start:near_ties]
print("query   gap of the top two   runner-up / leader   exp(-gap)")
for word in (
    "milk",
    "cup",
    "she",
):  # the two split queries, and one that collapsed
    s = query_state(word, 64, scale=False)
    first, second = np.argsort(-s.scaled)[:2]
    gap = s.scaled[first] - s.scaled[second]
    print(
        f"{word:<7}{gap:>15.3f}"
        f"{s.weights[second] / s.weights[first]:>21.4f}{np.exp(-gap):>12.4f}"
    )
# --8<-- [end:near_ties]


# --8<-- [start:exercise_first_dk]
d_k = 1
while query_state("she", d_k, scale=False).max_weight <= 0.9:
    d_k += 1
now, before = (
    query_state("she", d, scale=False).max_weight for d in (d_k, d_k - 1)
)
print(
    f"she, scaling off: largest weight first above 0.9 at d_k = {d_k}",
    f"({now:.3f}; {before:.3f} at d_k = {d_k - 1})",
)
# --8<-- [end:exercise_first_dk]


# --8<-- [start:exercise_gap]
import numpy as np

print(f"a gap of 2.3: runner-up / leader = exp(-2.3) = {np.exp(-2.3):.3f}")
# --8<-- [end:exercise_gap]


# --8<-- [start:write_one_query_skeleton]
from qkv.exercises import check_one_query_attention


def one_query_attention(q, k, v):
    """q (d_k,), k (T, d_k), v (T, d_v) -> (weights (T,), output (d_v,))."""
    raise NotImplementedError("your code here")


print(check_one_query_attention(one_query_attention))
# --8<-- [end:write_one_query_skeleton]


# --8<-- [start:write_one_query]
import numpy as np

from qkv.exercises import check_one_query_attention


def one_query_attention(q, k, v):
    scores = k @ q / np.sqrt(len(q))  # (T,): one scaled score per key
    e = np.exp(scores - scores.max())  # the largest becomes exp(0) = 1
    weights = e / e.sum()  # (T,), summing to 1
    return weights, weights @ v  # (d_v,): the weighted average of the values


print(check_one_query_attention(one_query_attention))
# --8<-- [end:write_one_query]
