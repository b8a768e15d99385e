"""Guards for docs/coreference-heads.md: the two coreference heads with the nouns' roles
swapped, one position at a time, and in the neutral context.

The runs are the page's (snippets/coreference_heads.py, design in the section ``sceptic``
of snippets/coreference_pairs.py). These tests read what the page prints (``page_output``),
recompute every count, mean and test from the printed per-pair columns with qkv.lab.stats,
and check the columns three ways apart from the snippet: the original sentence's and the
neutral context's moves against the coreference study's own columns, the heads' effects in
the original sentences against the patching page's table, and one pair of each kind
recomputed here from its texts, written out by hand (a swapped sentence scored by a plain
forward pass, a head patched in the swapped sentence and in the neutral context with
qkv.lab.patching, one position patched in a whole-text run of qkv.lab.interventions). Each
guard asserts the direction its sentence states, so that it fails if the conclusion turns.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from prose import check_prose
from support import numbers

from qkv import smollm2
from qkv.lab import interventions, patching, stats
from snippets.coreference_pairs import ALPHA, NAMED_HEADS, PAIRS, PATCH_PAIRS, POSITION_SHARE

pytestmark = pytest.mark.model

PAGE = "coreference-heads.md"
GROUPS = ["predicts the word", "the noun", "in between", "later rows"]


def p_matches(text: str, p: float) -> bool:
    return p < 0.001 if text.startswith("<") else abs(p - float(text)) <= 5e-4


@pytest.fixture(scope="module")
def shown(page_output):
    return page_output(PAGE)


@pytest.fixture(scope="module")
def columns(shown):
    """The box "Every pair's numbers": the swapped pairs' moves and the patched pairs' cells."""
    swap_part, patched_part = shown["coreference_heads.py:every_pair"].split("\n\n")
    swap = np.array([numbers(line) for line in swap_part.splitlines() if line.split()[0].isdigit()])
    out = {"swap number": swap[:, 0].astype(int), "original": swap[:, 1], "alone": swap[:, 2]}
    out["swapped"] = swap[:, 3]
    rows = [line.split("|") for line in patched_part.splitlines() if line.split()[0].isdigit()]
    out["number"] = [int(r[0]) for r in rows]
    cell = [[None if c.strip() == "-" else np.array(numbers(c)) for c in r[1:]] for r in rows]
    out["move sentence"] = np.array([c[0][0] for c in cell])
    out["move neutral"] = np.array([c[0][1] for c in cell])
    out["heads"] = np.array([c[1] for c in cell])  # (pairs, 3): L17H6, L18H1, top 5
    out["swapped heads"] = [c[2] for c in cell]
    out["neutral heads"] = np.array([c[3] for c in cell])
    out["where"] = np.array([c[4] for c in cell])  # (pairs, 5): 4 groups, every position
    return out


@pytest.fixture(scope="module")
def study(page_output):
    """The coreference study's columns, (pairs,) each: the sentence, the clause alone and
    the neutral context, by substitution."""
    text = page_output("coreference.md")["coreference.py:every_pair"].split("\n\n")[0]
    rows = np.array([numbers(line)[1:4] for line in text.splitlines() if line.split()[0].isdigit()])
    return {"sentence": rows[:, 0], "alone": rows[:, 1], "neutral": rows[:, 2]}


@pytest.fixture(scope="module")
def patched_table(page_output):
    """The patching page's per-pair effect of each head of its window: {(layer, head): (pairs,)}."""
    box = page_output("coreference-patching.md")["coreference_patching.py:every_pair"].split("\n\n")[1]
    out = {}
    for line in box.splitlines():
        parts = line.split()
        if parts and parts[0].isdigit():
            out[int(parts[0]) - 1, int(parts[1]) - 1] = np.array([float(x) for x in parts[3:]])
    return out


def parse(line: str) -> tuple[int, int, float, str, str, str]:
    """A printed test line: (up, n, mean, sign p, signed-rank p, verdict)."""
    m = re.search(
        r"(\d+) of (\d+), mean ([-+]\d+\.\d+), sign p (< 0\.001|\d\.\d{3}), signed-rank p"
        r" (< 0\.001|\d\.\d{3}): (passes|does not pass)$",
        line,
    )
    assert m, line
    return int(m[1]), int(m[2]), float(m[3]), m[4], m[5], m[6]


def summary(shown, section: str, start: str):
    return parse(shown.line(section, start))


def agrees(printed, x) -> bool:
    """The printed line is the tests of x: count, mean, sign p exactly as x gives them; the
    signed-rank p of the printed (rounded) values close, and the verdict both tests' rule."""
    up, n, mean, p_sign, p_rank, verdict = printed
    assert (up, n) == (int((x > 0).sum()), len(x))
    assert mean == pytest.approx(x.mean(), abs=0.006)
    assert p_matches(p_sign, stats.sign_test(up, n))
    rank = stats.signed_rank_test(x)
    if p_rank.startswith("<"):
        assert rank < 0.002
    else:
        assert abs(float(p_rank) - rank) < 0.002
    passes = stats.sign_test(up, n) < ALPHA and rank < ALPHA
    assert verdict == ("passes" if passes else "does not pass")
    return passes


def exchanged(pair):
    """The context with the nouns' words exchanged, by hand: split into words, swap."""
    a, b = (noun.removeprefix("the ") for noun in pair.nouns)
    parts = re.split(r"(\W+)", pair.context)
    if parts.count(a) != 1 or parts.count(b) != 1:
        return None
    return pair._replace(context="".join(b if w == a else a if w == b else w for w in parts))


def log_softmax(logits):
    logits = logits.astype(np.float64)
    top = logits.max(axis=-1, keepdims=True)
    return logits - top - np.log(np.exp(logits - top).sum(axis=-1, keepdims=True))


def plain_continuation(model, prompt, rest) -> float:
    p, c = model.encode(prompt), model.encode(rest)
    logp = log_softmax(smollm2.forward(model, np.concatenate([p, c])).logits)
    return sum(logp[len(p) - 1 + t, token] for t, token in enumerate(c))


def texts(model, make, pair, k):
    """Sentence k: the clean ids (noun k), the corrupt ids (the other noun), the rows scored
    from the deciding word on and their next tokens."""
    prompts = [model.encode(make(pair, k, j)[0]) for j in (k, 1 - k)]
    rest, other = model.encode(make(pair, k, 0)[1]), model.encode(make(pair, 1 - k, 0)[1])
    word = next(t for t in range(len(rest)) if rest[t] != other[t])
    rows = len(prompts[0]) - 1 + np.arange(word, len(rest))
    return [np.concatenate([p, rest]) for p in prompts], rows, rest[word:]


def head_effect(model, make, pair, heads) -> float:
    """Nats restored towards noun k in sentence k, summed over k, with these heads' outputs
    copied from the clean run at every position: qkv.lab.patching, from the pair's texts."""
    which = np.zeros((1, model.config.n_layers, model.config.n_heads), dtype=bool)
    for layer, h in heads:
        which[0, layer, h] = True
    total = 0.0
    for k in (0, 1):
        (clean_ids, corrupt_ids), rows, nxt = texts(model, make, pair, k)
        clean, corrupt = patching.record(model, clean_ids), patching.record(model, corrupt_ids)
        got = patching.patch_heads(model, clean, corrupt, which, rows, nxt)[0]
        total += got.sum() - patching.log_prob(model, corrupt, rows, nxt).sum()
    return total


def neutral(pair, k, j):
    first, second = pair.nouns
    return f"{first.capitalize()} and {second} were there, and {pair.nouns[j]}", pair.substituted(k, j)[1]


class CopyAt(smollm2.Edit):
    """Whole-text run: the named heads of one layer take the clean output at one position."""

    def __init__(self, heads, clean, position):
        self.heads, self.clean, self.position = heads, clean, position

    def attention(self, weights, v, out):  # (1, n_heads, T, d_head)
        out = out.copy()
        for h in self.heads:
            out[..., h, self.position, :] = self.clean[h, self.position]
        return weights, out


def at_the_word(model, pair) -> float:
    """Both named heads copied at the row that predicts the deciding word only, in a whole
    run of the corrupt text (qkv.lab.interventions.run_edited), summed over the two sentences."""
    total = 0.0
    for k in (0, 1):
        (clean_ids, corrupt_ids), rows, nxt = texts(model, smollm2_substituted, pair, k)
        clean = patching.record(model, clean_ids)
        by_layer = {}
        for layer, h in NAMED_HEADS:
            by_layer.setdefault(layer, []).append(h)
        edits = {layer: CopyAt(hs, clean.heads[layer], rows[0]) for layer, hs in by_layer.items()}
        same = {min(by_layer): smollm2.Edit()}
        for e, sign in ((edits, 1), (same, -1)):
            logp = log_softmax(interventions.run_edited(model, corrupt_ids, e, rows=rows).logits[0])
            total += sign * logp[np.arange(len(rows)), nxt].sum()
    return total


def smollm2_substituted(pair, k, j):
    return pair.substituted(k, j)


# ---- (a) the roles swapped ---------------------------------------------------------------


@pytest.mark.claim("coref-swap-scope")
def test_every_pair_allows_the_swap_and_the_columns_are_the_studys(columns, study, model):
    swappable = [i + 1 for i, p in enumerate(PAIRS) if exchanged(p)]
    assert columns["swap number"].tolist() == swappable == list(range(1, len(PAIRS) + 1))
    # the original sentence and the clause alone are the study's own columns
    np.testing.assert_allclose(columns["original"], study["sentence"], atol=2e-3)
    np.testing.assert_allclose(columns["alone"], study["alone"], atol=2e-3)
    # the first pair swapped, by a plain forward pass of each text
    pair = exchanged(PAIRS[0])
    assert pair.context == "The suitcase did not fit in the trophy because"
    s = {(k, j): plain_continuation(model, *pair.substituted(k, j)) for k in (0, 1) for j in (0, 1)}
    assert columns["swapped"][0] == pytest.approx((s[0, 0] - s[0, 1]) - (s[1, 0] - s[1, 1]), abs=5e-3)
    check_prose("coref-swap-scope", len(PAIRS), PATCH_PAIRS)


@pytest.mark.claim("coref-swap-model")
def test_the_model_follows_the_reversed_relation_in_part(shown, columns):
    section = "coreference_heads.py:swap"
    original = columns["original"] - columns["alone"]
    turned = columns["alone"] - columns["swapped"]  # towards the noun the swapped sentence means
    assert agrees(summary(shown, section, "original sentence"), original)
    up, n, mean, p_sign, p_rank, _ = summary(shown, section, "swapped sentence")
    assert agrees((up, n, mean, p_sign, p_rank, "passes"), turned)  # it follows, by both tests
    assert 0 < turned.mean() < original.mean()  # in part: less than the original moves
    check_prose("coref-swap-model", up, n, turned.mean(), float(p_sign), float(p_rank), original.mean())


def swapped_heads(columns):
    kept = [i for i, e in enumerate(columns["swapped heads"]) if e is not None]
    return kept, np.array([columns["swapped heads"][i] for i in kept])


def neither_way(x) -> bool:
    """Neither direction passes both tests."""
    return not any(
        stats.sign_test(int((s * x > 0).sum()), len(x)) < ALPHA and stats.signed_rank_test(s * x) < ALPHA
        for s in (1, -1)
    )


def model_on_the_patched(columns):
    """The swapped sentence's move towards the noun it means, on the patched pairs."""
    turned = dict(zip(columns["swap number"], columns["alone"] - columns["swapped"], strict=True))
    kept, _ = swapped_heads(columns)
    return np.array([turned[columns["number"][i]] for i in kept])


@pytest.mark.claim("coref-swap-heads")
def test_on_the_patched_pairs_neither_the_model_nor_the_heads_follow_the_swap(
    shown, columns, patched_table, model
):
    kept, swapped = swapped_heads(columns)
    assert len(kept) == PATCH_PAIRS
    heads = columns["heads"]
    # the original sentences' effects are the patching page's, pair by pair (3 decimals there)
    for b, head in enumerate(NAMED_HEADS):
        np.testing.assert_allclose(heads[:, b], patched_table[head], atol=2e-3)
    # one pair's swapped effect, patched here from its own texts
    pair = exchanged(PAIRS[columns["number"][0] - 1])
    got = head_effect(model, smollm2_substituted, pair, [NAMED_HEADS[0]])
    assert swapped[0, 0] == pytest.approx(got, abs=5e-3)
    section = "coreference_heads.py:swap"
    the_model = model_on_the_patched(columns)
    assert not agrees(summary(shown, section, "the model, swapped"), the_model)
    assert neither_way(the_model)
    names = ["layer 17 head 6", "layer 18 head 1", "top 5 together"]
    for b, name in enumerate(names):
        assert agrees(summary(shown, section, f"{name}, original"), heads[:, b])
        # towards the noun the swapped sentence means: not both tests, nor the other way
        assert not agrees(summary(shown, section, f"{name}, swapped"), -swapped[:, b])
        assert neither_way(swapped[:, b])
        assert abs(swapped[:, b].mean()) < heads[:, b].mean() / 10  # under a tenth
    check_prose(
        "coref-swap-heads",
        len(kept),
        the_model.mean(),
        int((the_model > 0).sum()),
        len(kept),
        17,
        6,
        18,
        1,
        *-swapped[:, :2].mean(axis=0),
        *heads[:, :2].mean(axis=0),
    )


@pytest.mark.claim("coref-swap-verdict", "coref-verdict-swap")
def test_the_model_follows_the_swap_over_all_pairs_but_not_where_the_heads_were_found(columns):
    turned = columns["alone"] - columns["swapped"]
    up = int((turned > 0).sum())
    model_follows = stats.sign_test(up, len(turned)) < ALPHA and stats.signed_rank_test(turned) < ALPHA
    _, swapped = swapped_heads(columns)
    heads = columns["heads"]
    vanish = all(abs(swapped[:, b].mean()) < heads[:, b].mean() / 10 for b in (0, 1))
    there = neither_way(model_on_the_patched(columns)) and all(neither_way(swapped[:, b]) for b in (0, 1))
    assert model_follows and vanish and there
    check_prose("coref-swap-verdict", len(turned))
    check_prose("coref-verdict-swap", len(turned), up, PATCH_PAIRS)


# ---- (b) where the heads act -------------------------------------------------------------


@pytest.mark.claim("coref-positions", "coref-verdict-sceptic")
def test_the_effect_sits_at_the_row_that_predicts_the_word(shown, columns, model):
    where = columns["where"]
    # the first pair: every position at once is patch_heads with both heads, and the row
    # that predicts the word alone is a whole-text run with the heads copied there only
    pair = PAIRS[columns["number"][0] - 1]
    assert where[0, -1] == pytest.approx(head_effect(model, smollm2_substituted, pair, NAMED_HEADS), abs=5e-3)
    assert where[0, 0] == pytest.approx(at_the_word(model, pair), abs=5e-3)
    mean = where.mean(axis=0)
    share = mean[:4] / mean[4]
    assert share[0] >= POSITION_SHARE and (share[1:] < POSITION_SHARE).all()  # there, not elsewhere
    for g, name in enumerate(GROUPS):  # the printed lines are these means and the design's rule
        line = shown.line("coreference_heads.py:positions", name)
        printed_mean, printed_share = numbers(line)[:2]
        assert printed_mean == pytest.approx(mean[g], abs=6e-4)
        assert printed_share == pytest.approx(share[g], abs=0.006)
        assert line.endswith("yes)" if share[g] >= POSITION_SHARE else "no)")
    check_prose("coref-positions", mean[0], share[0], mean[4], mean[1], mean[2], mean[3])
    _, neutral_fit = neutral_tests(shown, columns)
    assert neutral_fit == [False, True, False]  # one of the two heads, a small part
    check_prose("coref-verdict-sceptic", share[0])


@pytest.mark.claim("coref-positions-scope")
def test_the_positions_do_not_add_up(columns):
    where = columns["where"]
    assert len(where) == PATCH_PAIRS
    assert where[:, :4].sum(axis=1).mean() > where[:, 4].mean()  # one at a time: more than at once
    check_prose("coref-positions-scope", PATCH_PAIRS)


# ---- (c) the neutral context -------------------------------------------------------------


def neutral_tests(shown, columns):
    """Per named head and the top set: (larger in the sentence, follows the neutral context),
    each printed verdict checked against the printed per-pair columns."""
    text = [line.strip() for line in shown["coreference_heads.py:neutral"].splitlines()]
    direction = np.sign(columns["move neutral"])
    larger, follows = [], []
    for b in range(3):  # each: its line, then its two tests
        follows_line, larger_line = text[2 + 3 * b], text[3 + 3 * b]
        assert follows_line.startswith("follows the neutral context"), follows_line
        assert larger_line.startswith("larger in the sentence"), larger_line
        follows.append(agrees(parse(follows_line), direction * columns["neutral heads"][:, b]))
        larger.append(agrees(parse(larger_line), columns["heads"][:, b] - columns["neutral heads"][:, b]))
    return larger, follows


def share(effect, move) -> float:
    return (np.sign(move) * effect).sum() / np.abs(move).sum()


@pytest.mark.claim("coref-neutral")
def test_the_heads_carry_little_of_the_neutral_context(shown, columns, study, model):
    # the neutral context's moves are the study's own column; one head's effect there,
    # patched here from the pair's texts
    index = np.array(columns["number"]) - 1
    np.testing.assert_allclose(columns["move neutral"], study["neutral"][index], atol=5e-3)
    pair = PAIRS[index[0]]
    got = head_effect(model, neutral, pair, [NAMED_HEADS[1]])
    assert columns["neutral heads"][0, 1] == pytest.approx(got, abs=5e-3)
    larger, _ = neutral_tests(shown, columns)
    assert larger == [True, True, True]
    s_move, n_move = columns["move sentence"], columns["move neutral"]
    shares = [
        (share(columns["heads"][:, b], s_move), share(columns["neutral heads"][:, b], n_move))
        for b in range(3)
    ]
    assert all(n < s / 2 for s, n in shares)  # not as much as the sentence's, for any of them
    diff = columns["heads"] - columns["neutral heads"]
    ups = [int((diff[:, b] > 0).sum()) for b in range(3)]
    check_prose(
        "coref-neutral",
        n_move.mean(),
        s_move.mean(),
        17,
        6,
        18,
        1,
        *columns["neutral heads"][:, :2].mean(axis=0),
        shares[0][1],
        shares[1][1],
        shares[0][0],
        shares[1][0],
        5,
        *ups,
        PATCH_PAIRS,
    )


@pytest.mark.claim("coref-neutral-fit")
def test_one_head_follows_the_neutral_context(shown, columns):
    _, follows = neutral_tests(shown, columns)
    assert follows == [False, True, False]
    direction = np.sign(columns["move neutral"])
    up = int((direction * columns["neutral heads"][:, 1] > 0).sum())
    check_prose("coref-neutral-fit", 18, 1, up, PATCH_PAIRS, 17, 6, 5)


@pytest.mark.claim("coref-neutral-scope")
def test_the_neutral_scope(columns):
    assert len(columns["number"]) == PATCH_PAIRS
    check_prose("coref-neutral-scope", PATCH_PAIRS)
