"""Where in SmolLM2 is what the sentence adds?
Activation patching on the coreference pairs.

Shown on docs/coreference.md. Run it as `python snippets/coreference_patching.py`
(it needs the model). Everything it chooses (pairs, layers, head window, null, k,
draws, seed) is in the section "patching" of snippets/coreference_pairs.py, fixed
before its first run.
"""

# As a script: the design's names from the pairs file beside this one (the page
# runs that file itself, shown above) and one BLAS thread (the page's code runs
# with one already).
# first: the limit applies to the BLAS library NumPy loads
import numpy  # noqa: F401
from coreference_pairs import (
    HEAD_WINDOW,
    NULL_QUANTILE,
    PAIRS,
    PATCH_LAYERS,
    PATCH_PAIRS,
    RANDOM_DRAWS,
    SEED,
    SHUFFLES,
    TOP_K,
    TOP_K_VARIATION,
    Pair,
)
from threadpoolctl import threadpool_limits

threadpool_limits(1)

# --8<-- [start:setup]
import numpy as np

from qkv import smollm2
from qkv.lab import interventions, patching

model = smollm2.load()
config = model.config
KINDS = {"sentence": Pair.substituted, "clause alone": Pair.alone}


class Texts:
    """One pair, one kind of text: sentence k with noun j in the pronoun's place,
    and the tokens scored (the rest from the deciding word on)."""

    def __init__(self, pair, make):
        self.pair = pair
        prompts = [
            [model.encode(make(pair, k, j)[0]) for j in (0, 1)] for k in (0, 1)
        ]
        rests = [model.encode(make(pair, k, 0)[1]) for k in (0, 1)]
        self.ids = [
            [np.concatenate([p, rests[k]]) for p in prompts[k]] for k in (0, 1)
        ]
        word = next(  # the first token where the two sentences' rests differ
            t for t, (a, b) in enumerate(zip(*rests, strict=False)) if a != b
        )
        self.rows = [
            len(prompts[k][0]) - 1 + np.arange(word, len(r))
            for k, r in enumerate(rests)
        ]
        self.next = [r[word:] for r in rests]
        a, b = self.ids[0]
        self.aligned = len(a) == len(b) and len(prompts[0][0]) == len(
            prompts[0][1]
        )
        differ = np.flatnonzero(a != b) if self.aligned else [0]
        self.noun, self.after = differ[0], len(prompts[0][0])  # the nouns' tokens
        self.runs, self.scores = {}, {}

    def score(self, k, j):
        if (k, j) not in self.scores:
            run = self.runs[k, j]
            self.scores[k, j] = patching.log_prob(
                model, run, self.rows[k], self.next[k]
            ).sum()
        return self.scores[k, j]

    def moved(self):
        """Towards the meant noun: sentence k's preference for noun k, summed."""
        return sum(self.score(k, k) - self.score(k, 1 - k) for k in (0, 1))

    def restored(self, patch):
        """What patch(clean, corrupt, k) (variants, rows) gives back, summed,
        (variants,)."""
        total = 0.0
        for k in (0, 1):
            clean, corrupt = self.runs[k, k], self.runs[k, 1 - k]
            got = patch(clean, corrupt, k).sum(axis=1)
            total = total + got - self.score(k, 1 - k)
        return total


def record(candidates):
    """Run every text of these pairs, texts of one length as one batch."""
    by_length = {}
    for c in candidates:
        for t in c.values():
            for k in (0, 1):
                for j in (0, 1):
                    by_length.setdefault(len(t.ids[k][j]), []).append((t, k, j))
    for todo in by_length.values():
        runs = patching.record_batch(
            model, np.stack([t.ids[k][j] for t, k, j in todo])
        )
        for (t, k, j), run in zip(todo, runs, strict=True):
            t.runs[k, j] = run


candidates = [
    {name: Texts(pair, make) for name, make in KINDS.items()} for pair in PAIRS
]
candidates = [c for c in candidates if all(t.aligned for t in c.values())]
chosen, start = [], 0
while len(chosen) < PATCH_PAIRS and start < len(candidates):  # in file order
    batch = candidates[start : start + PATCH_PAIRS]
    record(batch)
    for c in batch:
        if c["sentence"].moved() - c["clause alone"].moved() > 0:
            chosen.append(c)
    start += PATCH_PAIRS
chosen = chosen[:PATCH_PAIRS]
n = len(chosen)
moved = {name: np.array([c[name].moved() for c in chosen]) for name in KINDS}
adds = moved["sentence"] - moved["clause alone"]
print(
    f"{n} pairs (of the {len(candidates)} whose two nouns have as many tokens); "
    "towards the meant noun, mean over them:"
)
for name in KINDS:
    print(f"  {name:<13} {moved[name].mean():+.2f} nats")
print(f"  the sentence adds {adds.mean():+.2f} nats")
# --8<-- [end:setup]


# --8<-- [start:stream]
def stream_scan(t):
    """(layers, 2) nats restored by copying the clean stream entering a layer, at
    the noun and at every position after it: one batch, every layer and both
    places."""
    length, half = len(t.ids[0][0]), len(PATCH_LAYERS) // 2
    restored = []
    for layers in (PATCH_LAYERS[:half], PATCH_LAYERS[half:]):  # two batches
        where = np.zeros((2 * len(layers), length), dtype=bool)
        where[0::2, t.noun : t.after], where[1::2, t.after :] = True, True
        restored.append(
            t.restored(
                lambda clean, corrupt, k, layers=layers, where=where: (
                    patching.patch_stream(
                        model,
                        clean,
                        corrupt,
                        np.repeat(layers, 2),
                        where,
                        t.rows[k],
                        t.next[k],
                    )
                )
            )
        )
    return np.concatenate(restored).reshape(len(PATCH_LAYERS), 2)


def share(restored, total):
    """Restored over what there is to restore, pairs pointing either way:
    (layers, 2)."""
    sign = np.sign(total)[:, None, None]
    return (restored * sign).sum(axis=0) / np.abs(total).sum()


scan = {name: np.array([stream_scan(c[name]) for c in chosen]) for name in KINDS}
adds_scan = scan["sentence"] - scan["clause alone"]
shares = {name: share(scan[name], moved[name]) for name in KINDS}
shares["adds"] = share(adds_scan, adds)
print(
    "share restored by copying the clean stream entering a layer, "
    "at the noun / after it"
)
print("layer       sentence        clause alone     what the sentence adds")
for i, layer in enumerate(PATCH_LAYERS):
    cells = [f"{shares[s][i, 0]:6.3f} / {shares[s][i, 1]:6.3f}" for s in shares]
    print(f"{layer + 1:5d}   " + "    ".join(cells))
# --8<-- [end:stream]

# --8<-- [start:heads]
# where the share after the noun rises most: the heads just before carry it there
rise = np.diff(shares["sentence"][:, 1], prepend=0.0)
top_layer = PATCH_LAYERS[int(np.argmax(rise))]
window = list(range(max(0, top_layer - HEAD_WINDOW), top_layer))
heads = [(layer, h) for layer in window for h in range(config.n_heads)]
which = np.zeros((len(heads), config.n_layers, config.n_heads), dtype=bool)
for b, (layer, h) in enumerate(heads):
    which[b, layer, h] = True
# (pairs, heads): nats restored, one head at a time, all heads in one batch
effect = np.array(
    [
        c["sentence"].restored(
            lambda clean, corrupt, k, t=c["sentence"]: patching.patch_heads(
                model, clean, corrupt, which, t.rows[k], t.next[k]
            )
        )
        for c in chosen
    ]
)
rng = np.random.default_rng(SEED)
signs = rng.choice([-1.0, 1.0], size=(SHUFFLES, n))
# the largest |mean effect| over heads, per random flip of the pairs' signs
null = np.abs(signs @ effect / n).max(axis=1)
threshold = np.quantile(null, NULL_QUANTILE)
mean = effect.mean(axis=0)
order = np.argsort(-mean)
print(
    f"heads of layers {window[0] + 1}-{window[-1] + 1}, "
    "each patched alone, restore"
    f" (of the sentence's {moved['sentence'].mean():+.2f} nats):"
)
for i in order[:TOP_K]:
    layer, h = heads[i]
    print(f"  layer {layer + 1:2d} head {h + 1}: {mean[i]:+.3f} nats")
print(
    f"max-statistic threshold ({NULL_QUANTILE:.0%} of {SHUFFLES} sign flips): "
    f"{threshold:.4f}; heads above it: {int((mean > threshold).sum())}"
)
for name, part in (("first", effect[: n // 2]), ("last", effect[n // 2 :])):
    best = np.argsort(-part.mean(axis=0))[:2]  # the pairs apart: the same heads?
    strongest = ", ".join(
        f"layer {heads[i][0] + 1} head {heads[i][1] + 1} "
        f"({part[:, i].mean():+.2f})"
        for i in best
    )
    print(f"  {name} {len(part)} pairs alone, strongest: {strongest}")
# --8<-- [end:heads]


# --8<-- [start:ablation]
def off_sets():
    """The heads switched off, per variant:
    top k, top k (mean), top 3, random k."""
    top = [heads[i] for i in order[:TOP_K]]
    draws = [
        [heads[i] for i in rng.choice(len(heads), TOP_K, replace=False)]
        for _ in range(RANDOM_DRAWS)
    ]
    small = [heads[i] for i in order[:TOP_K_VARIATION]]
    return [top, top, small, *draws]


sets = off_sets()
fill = np.zeros((len(sets), config.n_layers, config.n_heads, config.d_head))
outputs = [
    r.heads[:, :, t.noun :]
    for c in chosen
    for t in c.values()
    for r in t.runs.values()
]
# variant 1: mean ablation, each head's mean output at the positions rerun
fill[1] = np.mean([o.mean(axis=2) for o in outputs], axis=0)
edits = interventions.heads_off(
    config, sets + sets, fill=np.concatenate([fill, fill])
)
first, v = min(edits), len(sets)


def ablated(t):
    """(variants,): towards the meant noun with the heads off at the noun and
    after; both nouns of a sentence in one batch (the tokens before the noun are
    the same)."""
    total = 0.0
    for k in (0, 1):
        x = np.concatenate(
            [
                np.broadcast_to(
                    t.runs[k, j].streams[first, t.noun :],
                    (v, len(t.ids[k][j]) - t.noun, config.d_model),
                )
                for j in (0, 1)
            ]
        )
        got = patching.rerun(
            model, t.runs[k, 0], first, x, t.noun, t.rows[k], t.next[k], edits
        ).sum(axis=1)
        total = total + (got[:v] - got[v:]) * (1 if k == 0 else -1)
    return total


after = {name: np.array([ablated(c[name]) for c in chosen]) for name in KINDS}
lost = {name: moved[name].mean() - after[name].mean(axis=0) for name in KINDS}
lost["adds"] = lost["sentence"] - lost["clause alone"]  # (variants,)
print(
    "heads off at the noun and after it: nats lost by the sentence "
    f"({moved['sentence'].mean():+.2f}), the clause alone "
    f"({moved['clause alone'].mean():+.2f}), "
    f"what the sentence adds ({adds.mean():+.2f})"
)
names = [
    f"top {TOP_K} (zero)",
    f"top {TOP_K} (mean)",
    f"top {TOP_K_VARIATION} (zero)",
]
for b, name in enumerate(names):
    cells = "  ".join(f"{lost[s][b]:+6.2f}" for s in lost)
    print(f"  {name:<22} {cells}")
cells = "  ".join(f"{lost[s][3:].mean():+6.2f}" for s in lost)
label = f"{RANDOM_DRAWS} random sets of {TOP_K}"
print(f"  {label:<22} {cells}  (mean)")
print(
    f"  what the sentence adds, random sets: {lost['adds'][3:].min():+.2f} to "
    f"{lost['adds'][3:].max():+.2f}"
)
# --8<-- [end:ablation]


# --8<-- [start:every_pair]
number = [PAIRS.index(c["sentence"].pair) + 1 for c in chosen]  # counted from 1
print("each patched pair, towards the meant noun (nats):")
print(f"{'pair':>4} {'sentence':>12} {'clause alone':>12} {'adds':>12}")
for i, pair_number in enumerate(number):
    with_it, without = moved["sentence"][i], moved["clause alone"][i]
    print(
        f"{pair_number:4d} {with_it:+12.4f} {without:+12.4f}"
        f" {with_it - without:+12.4f}"
    )
print(
    f"\neach head patched alone in the sentence: nats restored, mean and per pair"
    f" (threshold {threshold:.4f})"
)
print(
    f"{'layer':>5} {'head':>4} {'mean':>7}" + "".join(f"{i:7d}" for i in number)
)
for b, (layer, h) in enumerate(heads):
    cells = "".join(f"{e:+7.3f}" for e in effect[:, b])
    print(f"{layer + 1:5d} {h + 1:4d} {mean[b]:+7.4f}{cells}")
print(
    "\nheads off at the noun and after it (layer.head): "
    "nats lost by the sentence, the clause alone, what the sentence adds"
)
labels = [*names, *(f"random set {d + 1}" for d in range(RANDOM_DRAWS))]
for b, (label, off) in enumerate(zip(labels, sets, strict=True)):
    cells = " ".join(f"{lost[s][b]:+8.4f}" for s in lost)
    which_heads = " ".join(f"{layer + 1}.{h + 1}" for layer, h in off)
    print(f"  {label:<15} {cells}   {which_heads}")
# --8<-- [end:every_pair]

# As a script: the held-out design's names (the page runs the pairs file).
from coreference_pairs import (
    ALPHA,
    HEAD_LAYERS,
    HELD_OUT_SEED,
    NAMED_HEADS,
    RANDOM_HEADS,
    RANDOM_SETS,
    TOP_SET,
)

from qkv.lab import stats

# --8<-- [start:heldout]
# (a) every aligned pair the heads were not found on,
# whatever the sentence does in it
held_out = [c for c in candidates if not any(c is d for d in chosen)]
record([c for c in held_out if not c["sentence"].runs])
draw = np.random.default_rng(HELD_OUT_SEED)
others = [
    (layer, h)
    for layer in HEAD_LAYERS
    for h in range(config.n_heads)
    if (layer, h) not in TOP_SET
]
picked = draw.choice(len(others), RANDOM_HEADS, replace=False)
variants = [[head] for head in NAMED_HEADS] + [list(TOP_SET)]
variants += [[others[i]] for i in picked]
variants += [
    [others[i] for i in draw.choice(len(others), len(TOP_SET), replace=False)]
    for _ in range(RANDOM_SETS)
]
marks = np.zeros((len(variants), config.n_layers, config.n_heads), dtype=bool)
for b, patched in enumerate(variants):
    for layer, h in patched:
        marks[b, layer, h] = True
# the variants: the 2 heads, the top set, random heads, random sets
one_head = slice(3, 3 + RANDOM_HEADS)
head_sets = slice(3 + RANDOM_HEADS, None)


def head_effects(c, marks):
    """(kinds, variants): nats towards the meant noun restored by each patch, in
    the sentence and in the clause alone; the layers rerun from the first patched
    one."""
    return np.array(
        [
            c[name].restored(
                lambda clean, corrupt, k, t=c[name]: patching.patch_heads(
                    model, clean, corrupt, marks, t.rows[k], t.next[k]
                )
            )
            for name in KINDS
        ]
    )


def both_tests(x):
    """Positive in how many pairs; sign-test p, signed-rank p (one-sided)."""
    up = int((x > 0).sum())
    return up, stats.sign_test(up, len(x)), stats.signed_rank_test(x)


def p_of(p):
    return f"{p:.3f}" if p >= 0.001 else "< 0.001"


def name_of(t):
    """ "trophy/suitcase big/small": the two nouns, then the deciding words."""
    nouns = [model.decode(t.ids[0][j][t.noun : t.after]).strip() for j in (0, 1)]
    words = [model.decode(t.next[k][:1]).strip() for k in (0, 1)]
    return "/".join(nouns) + " " + "/".join(words)


def label(patched):
    if len(patched) > 1:
        return f"top {len(patched)} together"
    return f"layer {patched[0][0] + 1} head {patched[0][1] + 1}"


# (pairs, kinds, variants)
held = np.array([head_effects(c, marks) for c in held_out])
m = len(held_out)
moves = {name: np.array([c[name].moved() for c in held_out]) for name in KINDS}
gain = moves["sentence"] - moves["clause alone"]
print(
    f"{m} held-out pairs (aligned, not patched before, all of them): "
    "the sentence prefers the meant noun in "
    f"{int((moves['sentence'] > 0).sum())}, what it adds is positive in "
    f"{int((gain > 0).sum())} ({gain.mean():+.2f} nats on average)"
)
print(f"{'pair':<32} sentence   adds  L17H6  L18H1  top 5  (nats restored)")
for c, effect, moved_, gained in zip(
    held_out, held, moves["sentence"], gain, strict=True
):
    cells = "  ".join(f"{e:+5.2f}" for e in effect[0, :3])
    print(f"{name_of(c['sentence']):<32} {moved_:+6.2f} {gained:+6.2f}  {cells}")
need = stats.chance_threshold(m, ALPHA)
print(
    f"nats restored, mean over the {m} pairs (the sign test needs {need} of {m};"
    f" alpha {ALPHA}):"
)
for name, part in (
    ("sentence", held[:, 0]),
    ("minus clause alone", held[:, 0] - held[:, 1]),
):
    print(f" {name}:")
    for b, v in enumerate(variants[:3]):
        base = (part[:, one_head] if len(v) == 1 else part[:, head_sets]).mean(
            axis=0
        )
        up, p_sign, p_rank = both_tests(part[:, b])
        rule = (
            p_sign < ALPHA and p_rank < ALPHA and part[:, b].mean() > base.max()
        )
        print(
            f"  {label(v):<16} {part[:, b].mean():+.2f}, positive in {up} of {m},"
            f" sign p {p_of(p_sign)}, signed-rank p {p_of(p_rank)}:"
            f" {'replicates' if rule else 'does not replicate'}"
        )
    for what, base in (
        ("heads", part[:, one_head]),
        ("sets", part[:, head_sets]),
    ):
        means = base.mean(axis=0)
        print(f"  random {what:<9} {means.min():+.2f} to {means.max():+.2f}")

# (b) the 16 patched pairs: the same patches in the clause alone, with no pronoun
# (pairs, kinds, 3): the two heads and the top set; no random ones needed here
found = np.array([head_effects(c, marks[:3]) for c in chosen])
direction = {name: np.sign(moved[name]) for name in KINDS}
print(
    f"the {n} patched pairs, each patch in the sentence and in the clause alone:"
)
for b, v in enumerate(variants[:3]):
    s, a = found[:, 0, b], found[:, 1, b]
    share_s = (direction["sentence"] * s).sum() / np.abs(moved["sentence"]).sum()
    a_sum = np.abs(moved["clause alone"]).sum()
    share_a = (direction["clause alone"] * a).sum() / a_sum
    up_a, p_sign_a, p_rank_a = both_tests(direction["clause alone"] * a)
    up_d, p_sign_d, p_rank_d = both_tests(s - a)
    fit = p_sign_a < ALPHA and p_rank_a < ALPHA
    more = p_sign_d < ALPHA and p_rank_d < ALPHA
    print(
        f"  {label(v)}: sentence {s.mean():+.2f} (share {share_s:.2f}), clause"
        f" alone {a.mean():+.2f} (share {share_a:.2f})"
    )
    print(
        f"    follows the clause alone's own preference in {up_a} of {n}"
        f" (sign p {p_of(p_sign_a)}, signed-rank p {p_of(p_rank_a)})"
    )
    print(
        f"    larger in the sentence in {up_d} of {n}"
        f" (sign p {p_of(p_sign_d)}, signed-rank p {p_of(p_rank_d)})"
    )
    print(
        f"    carries the clause alone's fit: {'yes' if fit else 'no'};"
        " as much as the sentence's:"
        f" {'yes' if share_a >= share_s / 2 else 'no'};"
        f" more of the sentence: {'yes' if more else 'no'}"
    )
# --8<-- [end:heldout]


# --8<-- [start:reader_imports]
# what the held-out tests need beside the pairs file
from qkv.lab import stats

# --8<-- [end:reader_imports]
