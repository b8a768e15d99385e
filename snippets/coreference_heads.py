"""The sceptic's next runs on the two coreference heads: the nouns' roles swapped,
the heads patched one position at a time, and the neutral context as a control.

Shown on docs/coreference-heads.md, which runs it after the pairs file and the
section "setup" of snippets/coreference_patching.py (their names: model, config,
Texts, record, chosen, KINDS). Its design is the section "sceptic" of
snippets/coreference_pairs.py, fixed before its first run.
"""

# As a script: the design's names. The page has run the pairs file and
# coreference_patching.py's "setup" before this file.
from typing import TYPE_CHECKING

from coreference_pairs import ALPHA, NAMED_HEADS, POSITION_SHARE, TOP_SET

if TYPE_CHECKING:  # for the linter: the names those two sections left
    from coreference_patching import (
        PAIRS,
        Pair,
        Texts,
        chosen,
        config,
        model,
        np,
        record,
        smollm2,
    )

# --8<-- [start:swap]
import re

from qkv.lab import patching, scoring, stats


def swapped(pair):
    """The pair with its two nouns' words exchanged in the context, or None when a
    noun's word is not in the context exactly once."""
    a, b = (noun.removeprefix("the ") for noun in pair.nouns)
    word = re.compile(rf"\b({re.escape(a)}|{re.escape(b)})\b")
    if sorted(word.findall(pair.context)) != sorted([a, b]):
        return None
    context = word.sub(lambda m: b if m[0] == a else a, pair.context)
    return pair._replace(context=context)


def moves(pairs, make):
    """(pairs,) nats: how far the preference for noun 1 moves between sentence 1
    and sentence 2 (towards the noun the original sentence means)."""
    prompts, rests = zip(
        *[make(p, k, j) for p in pairs for k in (0, 1) for j in (0, 1)],
        strict=True,
    )
    s = scoring.continuation_logprobs(model, prompts, rests).reshape(-1, 2, 2)
    return (s[:, 0, 0] - s[:, 0, 1]) - (s[:, 1, 0] - s[:, 1, 1])


def p_of(p):
    return f"{p:.3f}" if p >= 0.001 else "< 0.001"


def report(name, x):
    """x: per pair, towards the noun its sentence means; both tests, one line."""
    up = int((x > 0).sum())
    p_sign, p_rank = stats.sign_test(up, len(x)), stats.signed_rank_test(x)
    follows = p_sign < ALPHA and p_rank < ALPHA
    print(
        f"  {name:<28} {up:2d} of {len(x)}, mean {x.mean():+.2f}, sign p "
        f"{p_of(p_sign)}, signed-rank p {p_of(p_rank)}: "
        + ("passes" if follows else "does not pass")
    )


swap = [(i, swapped(p)) for i, p in enumerate(PAIRS) if swapped(p)]
print(f"{len(swap)} of {len(PAIRS)} pairs allow the swap, for example:")
print("  ", swap[0][1].text(0))
original = moves([PAIRS[i] for i, _ in swap], Pair.substituted)
alone = moves([PAIRS[i] for i, _ in swap], Pair.alone)
turned = moves([s for _, s in swap], Pair.substituted)
print("what each sentence adds to the clause alone, towards the noun it means:")
report("original sentence", original - alone)
report("swapped sentence", -(turned - alone))  # it means the other noun
flips = int((np.sign(turned - alone) != np.sign(original - alone)).sum())
print(f"  what the sentence adds changes sign with the swap in {flips}")

# the heads, in the swapped sentence of the pairs patching used
marks = np.zeros((3, config.n_layers, config.n_heads), dtype=bool)
for b, patched in enumerate([[NAMED_HEADS[0]], [NAMED_HEADS[1]], TOP_SET]):
    for layer, h in patched:
        marks[b, layer, h] = True
names = [f"layer {layer + 1} head {h + 1}" for layer, h in NAMED_HEADS]
names.append(f"top {len(TOP_SET)} together")


def head_effects(t):
    """(3,) nats restored towards the original's meant noun: each named head,
    then the top set, copied at the noun and after it."""
    return t.restored(
        lambda clean, corrupt, k: patching.patch_heads(
            model, clean, corrupt, marks, t.rows[k], t.next[k]
        )
    )


number = [PAIRS.index(c["sentence"].pair) + 1 for c in chosen]  # from 1
turned_texts = {
    i: Texts(swapped(c["sentence"].pair), Pair.substituted)
    for i, c in zip(number, chosen, strict=True)
    if swapped(c["sentence"].pair)
}
turned_texts = {i: t for i, t in turned_texts.items() if t.aligned}
record([{"swapped": t} for t in turned_texts.values()])
kept = [c for i, c in zip(number, chosen, strict=True) if i in turned_texts]
in_original = np.array([head_effects(c["sentence"]) for c in kept])
in_swapped = np.array([head_effects(t) for t in turned_texts.values()])
print(
    f"the heads on the {len(kept)} of the {len(chosen)} patched pairs that allow"
    " the swap, towards the noun each sentence means:"
)
gained = dict(zip([i + 1 for i, _ in swap], alone - turned, strict=True))
report("the model, swapped", np.array([gained[i] for i in turned_texts]))
for b, name in enumerate(names):
    report(f"{name}, original", in_original[:, b])
    report(f"{name}, swapped", -in_swapped[:, b])
# --8<-- [end:swap]


# --8<-- [start:positions]
class HeadsAt(smollm2.Edit):
    """Variant b takes the clean run's outputs of the heads and positions that
    mask[b] (n_heads, positions rerun) marks; clean: (n_heads, positions, d)."""

    def __init__(self, mask, clean):
        self.mask, self.clean = mask, clean

    def attention(self, weights, v, heads):  # (variants, n_heads, t, d_head)
        t = heads.shape[-2]
        use = self.mask[:, :, :t, None]
        return weights, np.where(use, self.clean[:, :t], heads).astype(
            heads.dtype
        )


def by_position(t, k):
    """Sentence k: nats restored with both named heads copied at one position at
    a time, from the noun to the last row scored, then at all of them at once."""
    clean, corrupt = t.runs[k, k], t.runs[k, 1 - k]
    since, end = t.noun, t.rows[k][-1] + 1
    span = end - since
    masks = {}
    for layer, h in NAMED_HEADS:
        mask = masks.setdefault(
            layer, np.zeros((span + 1, config.n_heads, span), dtype=bool)
        )
        mask[np.arange(span), h, np.arange(span)] = True
        mask[span, h] = True  # the last variant: every position
    edits = {
        layer: HeadsAt(mask, clean.heads[layer, :, since:end])
        for layer, mask in masks.items()
    }
    first = min(edits)
    x = np.broadcast_to(
        corrupt.streams[first, since:],
        (span + 1, len(corrupt.ids) - since, config.d_model),
    )
    got = patching.rerun(
        model, corrupt, first, x, since, t.rows[k], t.next[k], edits
    )
    return got.sum(axis=1) - t.score(k, 1 - k)


GROUPS = ("predicts the word", "the noun", "in between", "later rows")


def groups(t):
    """(5,) nats restored in a pair's two sentences: one position at a time,
    summed by group, then every position at once."""
    word = t.rows[0][0]  # the row whose next token is the deciding word's first
    out = np.zeros(len(GROUPS) + 1)
    for k in (0, 1):
        got = by_position(t, k)
        for p, e in enumerate(got[:-1], start=t.noun):
            if p == word:
                out[0] += e
            elif p < t.after:
                out[1] += e
            else:
                out[2 if p < word else 3] += e
        out[-1] += got[-1]
    return out


where = np.array([groups(c["sentence"]) for c in chosen])
on_noun = sum(c["sentence"].rows[0][0] < c["sentence"].after for c in chosen)
print(
    f"both heads copied one position at a time, {len(chosen)} pairs; nats"
    " restored, mean (the word is predicted at the noun in"
    f" {on_noun} of them):"
)
mean_all = where[:, -1].mean()
for g, name in enumerate(GROUPS):
    share = where[:, g].mean() / mean_all
    sits = "yes" if share >= POSITION_SHARE else "no"
    print(
        f"  {name:<18} {where[:, g].mean():+.3f}"
        f"  ({share:.2f} of every position at once; sits there: {sits})"
    )
print(f"  {'every one at once':<18} {mean_all:+.3f}")
# --8<-- [end:positions]


# --8<-- [start:neutral]
def neutral(pair, k, j):
    """Sentence k's rest after a context in which the pronoun could be either
    noun, noun j in its place: "The trophy and the suitcase were there, and the
    trophy"."""
    first, second = pair.nouns
    context = f"{first.capitalize()} and {second} were there, and {pair.nouns[j]}"
    return context, pair.substituted(k, j)[1]


neutral_texts = [Texts(c["sentence"].pair, neutral) for c in chosen]
assert all(t.aligned for t in neutral_texts)  # the same nouns end the prompt
record([{"neutral": t} for t in neutral_texts])
sentence = np.array([head_effects(c["sentence"]) for c in chosen])
control = np.array([head_effects(t) for t in neutral_texts])
move = {
    "sentence": np.array([c["sentence"].moved() for c in chosen]),
    "neutral": np.array([t.moved() for t in neutral_texts]),
}
print(
    f"the {len(chosen)} patched pairs, the same patches in the neutral context"
    f" (its own move {move['neutral'].mean():+.2f} nats, the sentence's"
    f" {move['sentence'].mean():+.2f}):"
)
for b, name in enumerate(names):
    s, a = sentence[:, b], control[:, b]
    share_s = (np.sign(move["sentence"]) * s).sum() / np.abs(
        move["sentence"]
    ).sum()
    share_n = (np.sign(move["neutral"]) * a).sum() / np.abs(move["neutral"]).sum()
    print(
        f" {name}: sentence {s.mean():+.2f} (share {share_s:.2f}), neutral"
        f" context {a.mean():+.2f} (share {share_n:.2f})"
    )
    report("follows the neutral context", np.sign(move["neutral"]) * a)
    report("larger in the sentence", s - a)
# --8<-- [end:neutral]


# --8<-- [start:every_pair]
print("the swapped pairs (numbered as in PAIRS), towards the original's noun:")
print(f"{'pair':>4} {'original':>9} {'alone':>9} {'swapped':>9}")
for (i, _), o, a, s in zip(swap, original, alone, turned, strict=True):
    print(f"{i + 1:4d} {o:+9.4f} {a:+9.4f} {s:+9.4f}")
print(
    "\nthe patched pairs: the moves of the sentence and of the neutral context;"
)
print("each named head and the top set, restored in the sentence, the swapped")
print("sentence (- where the pair allows no swap) and the neutral context; both")
print("heads by position (" + ", ".join(GROUPS) + ", every one at once)")
swapped_effect = dict(zip(turned_texts, in_swapped, strict=True))
for b, i in enumerate(number):
    cells = [
        [move["sentence"][b], move["neutral"][b]],
        sentence[b],
        swapped_effect.get(i),
        control[b],
        where[b],
    ]
    print(
        f"{i:4d} | "
        + " | ".join(
            "-" if c is None else " ".join(f"{e:+.4f}" for e in c) for c in cells
        )
    )
# --8<-- [end:every_pair]
