"""Guards for docs/coreference.md: does SmolLM2 resolve *it*, and where does attention follow?

Each probe text is run on its own here (qkv.coreference.run_pair runs a pair as one batch),
the preference, the weight moved and the chance threshold are written out with NumPy and
math, and each test asserts the page's *reading*: the behaviour is not told apart from a
coin; the row of *it* cannot differ; the heads that follow the word are few and not what a
random swap gives; switching them off does not shrink the model's preference. Every number
a guarded sentence writes is compared with the computed value by check_prose.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from prose import check_prose

from qkv import coreference, interventions, smollm2

MARGIN, SHARE = 0.05, 0.75  # the page's thresholds, fixed before the results

pytestmark = pytest.mark.model


def coin_threshold(n: int) -> int:
    """Fewest successes of n that a fair coin reaches with probability below 5%."""
    return next(k for k in range(n + 2) if sum(math.comb(n, m) for m in range(k, n + 1)) / 2**n < 0.05)


def first_token(model, noun: str) -> int:
    return int(model.tokenizer.encode(" " + noun, add_special_tokens=False).ids[0])


def positions(pieces, noun: str) -> list[int]:
    """Where the noun's tokens are, by their text (first occurrence)."""
    for start in range(len(pieces)):
        for end in range(start + 1, len(pieces) + 1):
            if "".join(pieces[start:end]) == " " + noun:
                return list(range(start, end))
    raise AssertionError(f"{noun!r} not in {pieces}")


@pytest.fixture(scope="module")
def runs(model):
    """Per pair: the two traces (noun 1 meant, noun 2 meant), each run alone."""
    return [[smollm2.run(pair.probe(k), model) for k in (0, 1)] for pair in coreference.PAIRS]


@pytest.fixture(scope="module")
def preference(model, runs):
    out = []
    for pair, traces in zip(coreference.PAIRS, runs, strict=True):
        a, b = (first_token(model, noun) for noun in pair.nouns)
        out.append([float(t.logits[-1, a]) - float(t.logits[-1, b]) for t in traces])
    return np.array(out)  # (pairs, 2)


def word_position(traces) -> int:
    differ = [i for i, (x, y) in enumerate(zip(*(t.ids for t in traces), strict=True)) if x != y]
    return differ[0]  # the word; its repeat in the question comes later


def moved_at(traces, pair, query) -> np.ndarray:
    """(layers, heads): weight gained by each noun when it becomes the one meant."""
    n1, n2 = (positions(traces[0].pieces, noun) for noun in pair.nouns)
    w = [t.weights[:, :, query].astype(np.float64) for t in traces]  # (30, 9, T) each
    on = [[wk[..., p].sum(-1) for p in (n1, n2)] for wk in w]
    return (on[0][0] - on[1][0]) + (on[1][1] - on[0][1])


@pytest.fixture(scope="module")
def moved(runs):
    return {
        "word": np.array(
            [moved_at(t, p, word_position(t)) for p, t in zip(coreference.PAIRS, runs, strict=True)]
        ),
        "last": np.array([moved_at(t, p, -1) for p, t in zip(coreference.PAIRS, runs, strict=True)]),
    }


def followers(m):
    return {(int(a), int(b)) for a, b in np.argwhere((m > MARGIN).mean(0) >= SHARE)}


def test_the_pairs_change_one_word_and_the_nouns_are_in_the_text(model):
    assert len(coreference.PAIRS) >= 12
    for pair in coreference.PAIRS:
        a, b = (model.encode(pair.text(k)) for k in (0, 1))
        assert len(a) == len(b) and (a != b).sum() == 1, pair
        assert pair.probe(0).startswith(pair.text(0)) and pair.probe(0).endswith("? The")
    assert coreference.PAIRS[0].text(1) == "The cat sat on the mat because it was soft."
    assert coreference.PAIRS[1].text(0).startswith("The trophy did not fit in the suitcase")
    assert coreference.chance_threshold(16) == coin_threshold(16)
    assert coreference.chance_threshold(32) == coin_threshold(32)


def test_run_pair_batches_what_running_each_text_alone_gives(model, runs, preference):
    for pair, traces, pref in zip(coreference.PAIRS[:3], runs, preference, strict=False):
        run = coreference.run_pair(model, pair)
        np.testing.assert_allclose(run.preference, pref, atol=2e-3)
        np.testing.assert_allclose(run.weights[0], traces[0].weights, atol=1e-5)
        assert run.word == word_position(traces)
        assert run.nouns == tuple(positions(traces[0].pieces, n) for n in pair.nouns)


@pytest.mark.claim("coref-behaviour")
def test_the_models_answer_is_not_told_apart_from_chance(preference):
    n = len(preference)
    right = int((preference[:, 0] > 0).sum() + (preference[:, 1] < 0).sum())
    follows = int((preference[:, 0] > preference[:, 1]).sum())
    assert follows < coin_threshold(n) and right < coin_threshold(2 * n)  # the reading

    def tail(k):  # P(a coin gets k or more of n)
        return sum(math.comb(n, m) for m in range(k, n + 1)) / 2**n

    assert tail(coin_threshold(n)) < 1 / 20 <= tail(follows)  # "less often than 1 in 20"
    check_prose("coref-behaviour", right, 2 * n, follows, n, coin_threshold(n), n, follows)


@pytest.mark.claim("coref-noun-bias")
def test_the_nouns_decide_more_than_the_word(preference):
    """ "What decides most answers is the nouns themselves": the preference's sign is the
    same in both texts of most pairs, and its size is larger than the word moves it."""
    same_sign = int((np.sign(preference[:, 0]) == np.sign(preference[:, 1])).sum())
    assert same_sign > len(preference) / 2
    assert np.abs(preference).mean() > np.abs(preference[:, 0] - preference[:, 1]).mean()
    cat_mat = preference[0, 1]  # pair 1, the text where the mat is the soft one
    assert cat_mat > 0
    check_prose("coref-noun-bias", cat_mat)


@pytest.mark.claim("coref-it-row")
def test_the_query_of_it_cannot_see_the_word(runs):
    it_gap, word_gap = [], []
    for traces in runs:
        it = traces[0].pieces.index(" it")
        assert it < word_position(traces)
        it_gap.append(np.abs(traces[0].weights[:, :, it] - traces[1].weights[:, :, it]).max())
        w = word_position(traces)
        word_gap.append(np.abs(traces[0].weights[:, :, w] - traces[1].weights[:, :, w]).max())
    assert max(it_gap) == 0.0  # bit for bit
    check_prose("coref-it-row", len(runs), 30 * 9, min(word_gap))


@pytest.mark.claim("coref-heads")
def test_two_heads_follow_the_word_and_random_swaps_rarely_make_one(moved):
    at_word = followers(moved["word"])
    assert at_word == {(9, 4), (13, 8)}  # layer 10 head 5, layer 14 head 9
    share = (moved["word"] > MARGIN).mean(0)
    n = len(moved["word"])
    assert followers(moved["last"]) == set()
    rng = np.random.default_rng(0)  # the page's control, drawn the same way
    chance = [len(followers(moved["word"] * rng.choice([-1, 1], size=(n, 1, 1)))) for _ in range(1000)]
    assert np.mean(chance) < 0.25 * len(at_word)  # far fewer than found: not a fluke
    (l1, h1), (l2, h2) = sorted(at_word)
    check_prose("coref-heads", l1 + 1, h1 + 1, l2 + 1, h2 + 1, share[l1, h1] * n, n, np.mean(chance))
    assert share[l1, h1] == share[l2, h2]


@pytest.mark.claim("coref-ablation")
def test_switching_the_following_heads_off_leaves_the_preference(model, runs, moved, preference):
    chosen = sorted(followers(moved["word"]))
    rng = np.random.default_rng(0)
    controls = [
        {(ly, int(rng.choice([g for g in range(9) if g != h]))) for ly, h in chosen} for _ in range(3)
    ]
    edits = interventions.heads_off(model.config, [set(chosen), *controls])
    shift, changed = [], []
    for pair, traces, unedited in zip(coreference.PAIRS, runs, preference, strict=True):
        a, b = (first_token(model, noun) for noun in pair.nouns)
        ids = np.stack([t.ids for t in traces])
        logits = interventions.run_edited(model, ids, edits, rows=[-1]).logits[:, :, 0]
        pref = logits[..., a].astype(float) - logits[..., b].astype(float)  # (variants, 2)
        shift.append(pref[:, 0] - pref[:, 1])
        changed.append(np.abs(pref[0] - unedited).max())
    shift = np.mean(shift, axis=0)
    as_run = float(np.mean(preference[:, 0] - preference[:, 1]))
    # switching the heads off does change the answers (the edit acts) ...
    assert max(changed) > 0.1
    # ... but not the way the story needs: the move towards the meant noun does not shrink
    assert shift[0] >= as_run and shift[0] >= shift[1:].min()
    check_prose("coref-ablation", shift[0], as_run, shift[1:].min(), shift[1:].max())


@pytest.mark.claim("coref-ex-trophy")
def test_exercise_trophy(runs):
    traces = runs[1]
    trophy = positions(traces[0].pieces, "trophy")
    it, word = traces[0].pieces.index(" it"), word_position(traces)
    at_it = [t.weights[13, 8, it, trophy].sum() for t in traces]
    at_word = [t.weights[13, 8, word, trophy].sum() for t in traces]
    assert at_it[0] == at_it[1] and at_word[0] != at_word[1]
    check_prose("coref-ex-trophy", 14, 9, at_it[0], at_word[0], at_word[1])


@pytest.mark.claim("explorer-trained-word", "coref-ex-explorer")
def test_explorer_word_states(model):
    from qkv_site.smollm2_data import SENTENCES

    soft, hungry = (smollm2.run(SENTENCES[i], model) for i in (5, 6))
    assert soft.pieces[9] == " soft" and hungry.pieces[9] == " hungry"
    mat, cat = soft.pieces.index(" mat"), soft.pieces.index(" cat")
    on_mat, on_cat = soft.weights[13, 8, 9, mat], hungry.weights[13, 8, 9, cat]
    assert np.argmax(soft.weights[13, 8, 9]) == mat and np.argmax(hungry.weights[13, 8, 9]) == cat
    assert np.array_equal(soft.weights[:, :, 7], hungry.weights[:, :, 7])  # the row of it
    check_prose("explorer-trained-word", 14, 9, on_mat, 7, on_cat)
    check_prose("coref-ex-explorer", on_mat, on_cat)


@pytest.mark.claim("coref-thresholds", "coref-follow-rule")
def test_the_thresholds_are_the_ones_the_page_names():
    assert (coreference.MARGIN, coreference.SHARE) == (MARGIN, SHARE)
    # a coin's 5% tail: the threshold is where the tail first drops below 0.05
    for n in (8, 16, 32):
        assert coreference.chance_threshold(n) == coin_threshold(n)
    assert coreference.chance_threshold(16, alpha=0.05) == coreference.chance_threshold(16)
    import inspect

    alpha = inspect.signature(coreference.chance_threshold).parameters["alpha"].default
    check_prose("coref-thresholds", 100 * alpha, coreference.MARGIN, 100 * coreference.SHARE)
    check_prose("coref-follow-rule", coreference.MARGIN, 100 * coreference.SHARE)


def test_the_page_prints_what_the_tests_compute(page_output, preference, moved):
    from support import numbers

    shown = page_output("coreference.md")
    rows = shown["coreference.py:behaviour"].splitlines()[1:17]
    printed = np.array([numbers(row)[-2:] for row in rows])
    np.testing.assert_allclose(printed, preference, atol=0.006)
    assert shown.line("coreference.py:it_row", "query ' it'").endswith(": 0.0")
    heads = shown["coreference.py:heads"]
    found = sorted(followers(moved["word"]))
    for ly, h in found:
        share = (moved["word"][:, ly, h] > MARGIN).mean()
        assert f"layer {ly + 1} head {h + 1} ({share:.0%})" in heads
    assert "at the last token: 0 heads" in heads
