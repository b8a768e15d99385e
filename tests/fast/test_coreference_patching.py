"""Guards for "Where in the model" on docs/coreference.md: activation patching of the pairs.

The experiment is computed here from the design fixed in snippets/coreference_pairs.py
(section "patching") with qkv.patching, whose patches are checked against by-hand runs in
tests/fast/test_patching.py. The pairs are chosen with qkv.scoring (the page's behaviour),
not with the records the patching uses, so the test also checks that the patching's
metric is the page's "what the sentence adds". Each guarded sentence is compared with it
by check_prose, and each guard asserts the direction its sentence states.
"""

from __future__ import annotations

import numpy as np
import pytest
from prose import check_prose

from qkv import interventions, patching, scoring
from snippets.coreference_pairs import (
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
)

KINDS = ("sentence", "clause alone")


def make(pair, kind, k, j):
    return pair.substituted(k, j) if kind == "sentence" else pair.alone(k, j)


class Texts:
    """Sentence k with noun j: its ids, the noun's position, the rows and tokens scored."""

    def __init__(self, model, pair, kind):
        self.model = model
        prompts = [model.encode(make(pair, kind, 0, j)[0]) for j in (0, 1)]
        rests = [model.encode(make(pair, kind, k, 0)[1]) for k in (0, 1)]
        self.ok = len(prompts[0]) == len(prompts[1])
        self.ids = {(k, j): np.concatenate([prompts[j], rests[k]]) for k in (0, 1) for j in (0, 1)}
        word = min(t for t in range(min(map(len, rests))) if rests[0][t] != rests[1][t])
        self.rows = [len(prompts[0]) - 1 + np.arange(word, len(r)) for r in rests]
        self.next = [r[word:] for r in rests]
        self.noun = int(np.flatnonzero(prompts[0] != prompts[1])[0]) if self.ok else 0
        self.after = len(prompts[0])
        self.runs = {}

    def record(self):
        for k in (0, 1):  # the two nouns of a sentence: one length
            runs = patching.record_batch(self.model, np.stack([self.ids[k, 0], self.ids[k, 1]]))
            self.runs[k, 0], self.runs[k, 1] = runs

    def lp(self, k, run):
        return patching.log_prob(self.model, run, self.rows[k], self.next[k]).sum()

    def moved(self):
        return sum(self.lp(k, self.runs[k, k]) - self.lp(k, self.runs[k, 1 - k]) for k in (0, 1))

    def restored(self, patch):
        return sum(
            patch(k, self.runs[k, k], self.runs[k, 1 - k]).sum(axis=1) - self.lp(k, self.runs[k, 1 - k])
            for k in (0, 1)
        )


@pytest.fixture(scope="module")
def experiment(model):
    out = {}
    # the pairs: behaviour by the page's own scoring, then the first PATCH_PAIRS that qualify
    scored = {
        kind: scoring.continuation_logprobs(
            model,
            *zip(*[make(p, kind, k, j) for p in PAIRS for k in (0, 1) for j in (0, 1)], strict=True),
        ).reshape(len(PAIRS), 2, 2)
        for kind in KINDS
    }
    moves = {kind: (s[:, 0, 0] - s[:, 0, 1]) - (s[:, 1, 0] - s[:, 1, 1]) for kind, s in scored.items()}
    adds_all = moves["sentence"] - moves["clause alone"]
    chosen, same_length = [], 0
    for i, pair in enumerate(PAIRS):
        texts = {kind: Texts(model, pair, kind) for kind in KINDS}
        if not all(t.ok for t in texts.values()):
            continue
        same_length += 1
        if adds_all[i] > 0 and len(chosen) < PATCH_PAIRS:
            chosen.append(texts)
            for t in texts.values():
                t.record()
            for kind in KINDS:  # the patching's metric is the page's measurement
                assert texts[kind].moved() == pytest.approx(moves[kind][i], abs=5e-3)
    out["same length"], out["chosen"] = same_length, chosen
    n = len(chosen)
    moved = {kind: np.array([c[kind].moved() for c in chosen]) for kind in KINDS}
    adds = moved["sentence"] - moved["clause alone"]
    out["moved"], out["adds"] = moved, adds

    # the residual stream: the noun, or every position after it, at each scanned layer
    def scan(t):
        where = np.zeros((2 * len(PATCH_LAYERS), len(t.ids[0, 0])), dtype=bool)
        where[0::2, t.noun : t.after], where[1::2, t.after :] = True, True
        layers = np.repeat(PATCH_LAYERS, 2)
        got = t.restored(
            lambda k, clean, corrupt: patching.patch_stream(
                model, clean, corrupt, layers, where, t.rows[k], t.next[k]
            )
        )
        return got.reshape(len(PATCH_LAYERS), 2)

    def share(restored, total):
        return (restored * np.sign(total)[:, None, None]).sum(axis=0) / np.abs(total).sum()

    scans = {kind: np.array([scan(c[kind]) for c in chosen]) for kind in KINDS}
    out["scans"] = scans
    out["share"] = {kind: share(scans[kind], moved[kind]) for kind in KINDS}
    out["share"]["adds"] = share(scans["sentence"] - scans["clause alone"], adds)
    out["share_of"] = share

    # heads of the window, each patched alone, in the sentence
    rise = np.diff(out["share"]["sentence"][:, 1], prepend=0.0)
    top_layer = PATCH_LAYERS[int(np.argmax(rise))]
    window = list(range(max(0, top_layer - HEAD_WINDOW), top_layer))
    heads = [(layer, h) for layer in window for h in range(model.config.n_heads)]
    which = np.zeros((len(heads), model.config.n_layers, model.config.n_heads), dtype=bool)
    for b, (layer, h) in enumerate(heads):
        which[b, layer, h] = True
    effect = np.array(
        [
            c["sentence"].restored(
                lambda k, clean, corrupt, t=c["sentence"]: patching.patch_heads(
                    model, clean, corrupt, which, t.rows[k], t.next[k]
                )
            )
            for c in chosen
        ]
    )
    rng = np.random.default_rng(SEED)
    signs = rng.choice([-1.0, 1.0], size=(SHUFFLES, n))
    null = np.abs(signs @ effect / n).max(axis=1)
    out.update(
        window=window, heads=heads, effect=effect, null=null, threshold=np.quantile(null, NULL_QUANTILE)
    )
    order = np.argsort(-effect.mean(axis=0))
    out["order"] = order

    # group ablation at the noun and after it
    top = [heads[i] for i in order[:TOP_K]]
    draws = [[heads[i] for i in rng.choice(len(heads), TOP_K, replace=False)] for _ in range(RANDOM_DRAWS)]
    sets = [top, top, [heads[i] for i in order[:TOP_K_VARIATION]], *draws]
    fill = np.zeros((len(sets), model.config.n_layers, model.config.n_heads, model.config.d_head))
    outputs = [r.heads[:, :, t.noun :] for c in chosen for t in c.values() for r in t.runs.values()]
    fill[1] = np.mean([o.mean(axis=2) for o in outputs], axis=0)
    edits = interventions.heads_off(model.config, sets, fill=fill)
    first = min(edits)

    def ablated(t):
        def score(k, run):
            x = np.broadcast_to(
                run.streams[first, t.noun :], (len(sets), len(run.ids) - t.noun, model.config.d_model)
            )
            return patching.rerun(model, run, first, x, t.noun, t.rows[k], t.next[k], edits).sum(axis=1)

        return sum(score(k, t.runs[k, k]) - score(k, t.runs[k, 1 - k]) for k in (0, 1))

    after = {kind: np.array([ablated(c[kind]) for c in chosen]) for kind in KINDS}
    lost = {kind: moved[kind][:, None] - after[kind] for kind in KINDS}  # (pairs, variants)
    lost["adds"] = lost["sentence"] - lost["clause alone"]
    out["lost"] = lost
    return out


def at(layer_from_1: int) -> int:
    """The row of a scanned layer, counted from 1 as the page counts."""
    return PATCH_LAYERS.index(layer_from_1 - 1)


@pytest.mark.claim("coref-patch-scope")
def test_the_patched_pairs(experiment):
    adds = experiment["adds"]
    assert len(experiment["chosen"]) == PATCH_PAIRS and (adds > 0).all()
    check_prose(
        "coref-patch-scope",
        PATCH_PAIRS,
        experiment["same length"],
        len(PAIRS),
        adds.mean(),
        len(PATCH_LAYERS),
        HEAD_WINDOW,
    )


@pytest.mark.claim("coref-patch-stream")
def test_the_preference_leaves_the_noun_at_the_same_layers_in_both_texts(experiment):
    share = experiment["share"]
    for kind in ("sentence", "clause alone"):
        noun, after = share[kind][:, 0], share[kind][:, 1]
        assert after[at(17)] < 0.5 < after[at(20)], kind  # it moves off the noun there
        assert (noun[: at(17) + 1] > 0.75).all() or kind == "clause alone"
    s, a = share["sentence"], share["clause alone"]
    check_prose("coref-patch-stream", 17, s[at(17), 0], 20, s[at(20), 1], a[at(17), 1], 17, a[at(20), 1], 20)


def passing(effect, seed=SEED):
    """Heads whose mean effect is above the max-statistic threshold of these pairs."""
    rng = np.random.default_rng(seed)
    signs = rng.choice([-1.0, 1.0], size=(SHUFFLES, len(effect)))
    null = np.abs(signs @ effect / len(effect)).max(axis=1)
    return np.flatnonzero(effect.mean(axis=0) > np.quantile(null, NULL_QUANTILE))


@pytest.mark.claim("coref-patch-heads")
def test_two_heads_pass_the_max_statistic_threshold(experiment):
    effect, heads, threshold = experiment["effect"], experiment["heads"], experiment["threshold"]
    mean = effect.mean(axis=0)
    above = [heads[i] for i in np.flatnonzero(mean > threshold)]
    assert above == [(16, 5), (17, 0)]  # layer 17 head 6, layer 18 head 1 (from 0 here)
    assert threshold == np.quantile(experiment["null"], NULL_QUANTILE)
    both = mean[heads.index((16, 5))], mean[heads.index((17, 0))]
    check_prose(
        "coref-patch-heads", 17, 6, 18, 1, experiment["moved"]["sentence"].mean(), both[0], both[1], threshold
    )


@pytest.mark.claim("coref-patch-ablation", "coref-verdict-where")
def test_the_strongest_heads_carry_more_than_random_heads_of_their_layers(experiment):
    lost = experiment["lost"]["adds"].mean(axis=0)  # (variants,): top, top (mean), top 3, draws
    top, draws = lost[0], lost[3:]
    assert top > draws.max() and top > 0  # the direction: more than any random set
    adds = experiment["adds"].mean()
    check_prose("coref-patch-ablation", TOP_K, top, adds, RANDOM_DRAWS, TOP_K, draws.min(), draws.max())
    # the verdict: the preference leaves the noun between 17 and 20 (both directions checked
    # in the stream and heads guards), and the top heads carry part of it
    share = experiment["share"]["sentence"]
    assert share[at(17), 1] < 0.5 < share[at(20), 1]
    assert [experiment["heads"][i] for i in experiment["order"][:2]] == [(16, 5), (17, 0)]
    check_prose("coref-verdict-where", PATCH_PAIRS, 17, 20, 17, 6, 18, 1, TOP_K, top, adds)


@pytest.mark.claim("coref-scope")
def test_the_scope_sentence():
    check_prose("coref-scope", len(PAIRS), PATCH_PAIRS)


@pytest.mark.claim("coref-var-ablation", "coref-var-halves")
def test_how_far_the_patching_holds(experiment):
    lost = experiment["lost"]["adds"].mean(axis=0)
    draws = lost[3:]
    # zero or mean, top 5 or top 3: the strongest heads take more than random ones on average
    assert min(lost[:3]) > draws.mean()
    check_prose("coref-var-ablation", TOP_K, lost[1], TOP_K_VARIATION, lost[2], TOP_K, draws.mean())
    effect, heads, n = experiment["effect"], experiment["heads"], len(experiment["chosen"])
    halves = (effect[: n // 2], effect[n // 2 :])
    for part in halves:  # the same two heads are the strongest in each half
        best = [heads[i] for i in np.argsort(-part.mean(axis=0))[:2]]
        assert sorted(best) == [(16, 5), (17, 0)]
    a, b = heads.index((16, 5)), heads.index((17, 0))
    check_prose(
        "coref-var-halves",
        n // 2,
        n - n // 2,
        17,
        6,
        halves[0][:, a].mean(),
        halves[1][:, a].mean(),
        18,
        1,
        halves[0][:, b].mean(),
        halves[1][:, b].mean(),
    )
