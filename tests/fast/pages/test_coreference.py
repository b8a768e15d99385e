"""Guards for docs/coreference.md: does SmolLM2 move towards the noun a sentence means, beyond
what the nouns' fit with the deciding word gives?

The exact tests of qkv.lab.stats are checked against enumeration and simulation, written apart
from the module; qkv.lab.scoring against a plain forward pass. The experiment itself runs once,
on the page (snippets/coreference.py, with the pairs, probes and controls of
snippets/coreference_pairs.py fixed before the first run), which prints every pair's move
under every scoring and control; the guards read those columns, check three pairs of them
against a plain forward pass of each text alone, and compute each guarded sentence's counts,
means and tests from them. The verdict's guard fails if what the sentence adds changes sign
under any variation the page lists.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from prose import check_prose
from support import numbers

from qkv import smollm2
from qkv.lab import scoring, stats
from snippets.coreference_pairs import (
    ALPHA,
    ASSOCIATION_PAIRS,
    OURS,
    PAIRS,
    QUESTION,
    WSC,
    Pair,
)

# ---- the exact tests, without the model ------------------------------------------------


def test_sign_test_is_the_binomial_tail_counted_by_hand():
    # 12 or more heads of 16: C(16,12) + C(16,13) + ... + C(16,16) = 1820+560+120+16+1
    assert stats.sign_test(12, 16) == pytest.approx(2517 / 65536)
    assert stats.sign_test(0, 5) == 1.0 and stats.sign_test(5, 5) == 1 / 32

    # the threshold is where the tail P(X >= k), summed with math.comb, first drops below alpha
    def tail(k, n):
        return sum(math.comb(n, m) for m in range(k, n + 1)) / 2**n

    for n in (16, 48):
        k = stats.chance_threshold(n)
        assert tail(k, n) < 0.05 <= tail(k - 1, n), n


def brute_force_signed_rank(d) -> float:
    """Every one of the 2**n sign patterns of |d|, with ranks by sorting (ties averaged)."""
    size = np.abs(d)
    ranks = np.array([np.mean([1 + j for j, s in enumerate(sorted(size)) if s == v]) for v in size])
    observed = ranks[np.asarray(d) > 0].sum()
    hits = sum(
        ranks[np.array(signs, dtype=bool)].sum() >= observed - 1e-9
        for signs in itertools.product([0, 1], repeat=len(d))
    )
    return hits / 2 ** len(d)


def test_signed_rank_test_matches_enumerating_every_sign_pattern():
    rng = np.random.default_rng(1)
    for n in (1, 4, 9, 12):
        d = rng.normal(0.3, 1.0, size=n)
        assert stats.signed_rank_test(d) == pytest.approx(brute_force_signed_rank(d))
    tied = np.array([1.0, -1.0, 2.0, 2.0, -3.0, 0.5])
    assert stats.signed_rank_test(tied) == pytest.approx(brute_force_signed_rank(tied))
    # zeros are dropped, as Wilcoxon does
    assert stats.signed_rank_test([0.0, 1.0, 2.0]) == stats.signed_rank_test([1.0, 2.0])


def test_power_is_how_often_simulated_experiments_pass():
    rng = np.random.default_rng(2)
    for n, rate in ((16, 0.7), (48, 2 / 3)):
        wins = rng.binomial(n, rate, size=40_000)
        passed = np.mean([stats.sign_test(int(w), n) < 0.05 for w in wins])
        assert stats.sign_test_power(n, rate) == pytest.approx(passed, abs=0.01)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: stats.sign_test(17, 16), "successes must be a whole number from 0 to n=16"),
        (lambda: stats.sign_test(3, 0), "n must be a whole number >= 1"),
        (lambda: stats.chance_threshold(16, alpha=1.5), "alpha must be between 0 and 1"),
        (lambda: stats.sign_test_power(16, 1.2), "rate must be a probability"),
        (lambda: stats.signed_rank_test([[1.0, 2.0]]), "1-D array of finite numbers"),
        (lambda: stats.signed_rank_test([0.0, 0.0]), "every difference is 0"),
    ],
)
def test_bad_input_is_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_the_pairs_are_fixed_and_sourced():
    assert {p.source for p in PAIRS} == {WSC, OURS}
    for pair in PAIRS + ASSOCIATION_PAIRS:
        assert pair.words[0] != pair.words[1] and "{}" in pair.rest
        assert pair.text(0).startswith(pair.context) and pair.question(0, QUESTION).endswith("refers to the")
        # the question asked does not contain the deciding word
        question = QUESTION.format(pronoun=pair.pronoun)
        assert not any(word in question.split() for word in pair.words)


# ---- the model -------------------------------------------------------------------------
#
# The experiment runs once, on the page (snippets/coreference.py); its box "Every pair's
# numbers" prints each pair's move under every scoring and control. The guards below read
# those columns (``page_output``) and compute every count, mean and test from them with
# qkv.lab.stats; three pairs' moves are computed again here by a plain forward pass of each
# text alone, so the columns are checked against the model, not only against themselves.

PAGE = "coreference.md"


def plain_logprobs(model, ids) -> np.ndarray:
    """log-softmax of every position's logits, from a forward pass of this text alone."""
    logits = smollm2.forward(model, ids).logits.astype(np.float64)
    top = logits.max(axis=-1, keepdims=True)
    return logits - top - np.log(np.exp(logits - top).sum(axis=-1, keepdims=True))


def plain_continuation(model, prompt, rest) -> float:
    """log P(rest | prompt), summed over the rest's tokens, from one forward pass."""
    p, c = model.encode(prompt), model.encode(rest)
    logp = plain_logprobs(model, np.concatenate([p, c]))
    return sum(logp[len(p) - 1 + t, token] for t, token in enumerate(c))


def plain_move(model, pair, make) -> float:
    """How far the preference for noun 1 over noun 2 moves between the pair's sentences,
    written out: (sentence 1: noun 1 - noun 2) - (sentence 2: noun 1 - noun 2)."""
    s = {(k, j): plain_continuation(model, *make(pair, k, j)) for k in (0, 1) for j in (0, 1)}
    return (s[0, 0] - s[0, 1]) - (s[1, 0] - s[1, 1])


def table(text: str) -> np.ndarray:
    """The rows of a printed table whose first column is a pair's number: (rows, columns)."""
    rows = [line.split() for line in text.splitlines()]
    rows = [[float(x) for x in r[1:]] for r in rows if r and r[0].isdigit()]
    return np.array(rows)


@pytest.fixture(scope="module")
def measured(page_output):
    """Every measurement of the page and of its boxes, as (pairs,) moves in nats, read from
    the box "Every pair's numbers"."""
    shown = page_output(PAGE)
    now, earlier = shown["coreference.py:every_pair"].split("\n\n")
    cols = table(now)
    assert cols.shape == (len(PAIRS), 7)
    names = ["full", "alone", "neutral", "question", "question neutral", "question 2", "question 2 neutral"]
    out = dict(zip(names, cols.T, strict=True))
    cols = table(earlier)
    assert cols.shape == (len(ASSOCIATION_PAIRS), 4)
    names = ["earlier full", "earlier alone", "old by sentence", "old by question"]
    out.update(zip(names, cols.T, strict=True))
    out["shown"] = shown
    return out


@pytest.mark.model
def test_scoring_and_the_printed_moves_equal_a_forward_pass_of_each_text_alone(model, measured):
    pairs = [PAIRS[0], PAIRS[2], ASSOCIATION_PAIRS[0]]
    prompts, rests = zip(*[p.substituted(k, j) for p in pairs for k in (0, 1) for j in (0, 1)], strict=True)
    prompts, rests = [*prompts, "The cat"], [*rests, " sat."]  # a text with no family
    got = scoring.continuation_logprobs(model, prompts, rests)
    for value, prompt, rest in zip(got, prompts, rests, strict=True):
        assert value == pytest.approx(plain_continuation(model, prompt, rest), abs=2e-3)
    asked = [p.question(k, QUESTION) for p in pairs for k in (0, 1)]
    got = scoring.answer_logprobs(model, asked, [p.answers() for p in pairs for _ in (0, 1)])
    firsts = {}
    for row, text, pair in zip(got, asked, [p for p in pairs for _ in (0, 1)], strict=True):
        last = plain_logprobs(model, model.encode(text))[-1]
        firsts[text] = last[[model.encode(a)[0] for a in pair.answers()]]
        np.testing.assert_allclose(row, firsts[text], atol=2e-3)
    # the page's columns, for pairs 1 and 3 and the earlier pair 1 (batched float32 runs
    # against single ones: a move sums four log-probabilities, each within 2e-3)
    for i in (0, 2):
        pair = PAIRS[i]
        assert measured["full"][i] == pytest.approx(plain_move(model, pair, Pair.substituted), abs=5e-3)
        assert measured["alone"][i] == pytest.approx(plain_move(model, pair, Pair.alone), abs=5e-3)
        a, b = (firsts[pair.question(k, QUESTION)] for k in (0, 1))
        assert measured["question"][i] == pytest.approx((a[0] - a[1]) - (b[0] - b[1]), abs=5e-3)
    pair = ASSOCIATION_PAIRS[0]
    assert measured["earlier full"][0] == pytest.approx(plain_move(model, pair, Pair.substituted), abs=5e-3)


@pytest.mark.model
def test_each_pair_differs_in_one_token(model):
    for pair in PAIRS + ASSOCIATION_PAIRS:
        a, b = (model.encode(pair.text(k)) for k in (0, 1))
        assert len(a) == len(b) and (a != b).sum() == 1, pair.text(0)


def count(d) -> int:
    return int((np.asarray(d) > 0).sum())


@pytest.mark.claim("coref-thresholds", "coref-pairs")
def test_thresholds_and_pair_counts():
    check_prose("coref-thresholds", ALPHA)
    adapted = sum(p.source == WSC for p in PAIRS)
    check_prose("coref-pairs", len(PAIRS), adapted, len(PAIRS) - adapted)


@pytest.mark.model
@pytest.mark.claim("coref-substitution")
def test_substitution_scoring_picks_the_meant_noun_more_often_than_a_coin(measured):
    n = len(PAIRS)
    line = measured["shown"].line("coreference.py:substitution", "texts where the meant noun scores higher")
    right, texts = numbers(line)
    assert texts == 2 * n
    assert stats.sign_test(count(measured["full"]), n) < ALPHA  # the reading: beats a coin
    check_prose("coref-substitution", right, 2 * n, count(measured["full"]), n)


@pytest.mark.model
@pytest.mark.claim("coref-control")
def test_the_control_passes_the_fixed_rule_but_leans(measured):
    alone, n = measured["alone"], len(PAIRS)
    need = stats.chance_threshold(n, ALPHA)
    assert count(alone) < need  # the rule written beforehand: not told apart from a coin
    assert stats.signed_rank_test(alone) < ALPHA  # ... yet the signed-rank test finds a lean
    check_prose("coref-control", count(alone), n, alone.mean(), need, stats.signed_rank_test(alone))


@pytest.mark.model
@pytest.mark.claim("coref-added", "coref-verdict", "coref-wrong")
def test_the_sentence_adds_a_move_towards_the_meant_noun(measured):
    added, n = measured["full"] - measured["alone"], len(PAIRS)
    sign, rank = stats.sign_test(count(added), n), stats.signed_rank_test(added)
    assert sign < ALPHA and rank < ALPHA and added.mean() > 0  # the verdict, by the fixed rule
    check_prose("coref-added", count(added), n, added.mean(), sign, rank)
    check_prose("coref-verdict", n, count(added), n)
    check_prose("coref-wrong", n - count(added), n)


@pytest.mark.model
@pytest.mark.claim("coref-old-probe")
def test_the_old_probe_followed_its_question(measured):
    by_sentence, by_question = measured["old by sentence"].mean(), measured["old by question"].mean()
    assert abs(by_sentence) < 0.2 * by_question  # the question's word decides
    check_prose("coref-old-probe", by_sentence, by_question)


@pytest.mark.model
@pytest.mark.claim("coref-question")
def test_the_question_without_the_word(measured):
    added = measured["question"] - measured["question neutral"]
    n = len(PAIRS)
    sign, rank = stats.sign_test(count(added), n), stats.signed_rank_test(added)
    assert sign < ALPHA and rank < ALPHA
    check_prose(
        "coref-question", count(added), n, added.mean(), sign, rank, count(measured["question neutral"])
    )


@pytest.mark.model
@pytest.mark.claim("coref-power")
def test_power_at_the_rate_seen(measured):
    added, n = measured["full"] - measured["alone"], len(PAIRS)
    rate = count(added) / n
    assert rate == pytest.approx(2 / 3)  # "two pairs in three"
    at_48, at_16 = stats.sign_test_power(n, rate), stats.sign_test_power(16, rate)
    assert at_16 < 0.5 < at_48  # 16 pairs would more often miss it than find it
    check_prose("coref-power", n, 100 * at_48, ..., 16, 100 * at_16, 16)


@pytest.mark.model
@pytest.mark.claim("coref-var-control", "coref-var-wording", "coref-var-pairs")
def test_how_far_it_holds(measured):
    n = len(PAIRS)
    variations = {
        "neutral control": measured["full"] - measured["neutral"],
        "question 2": measured["question 2"] - measured["question 2 neutral"],
        "earlier pairs": measured["earlier full"] - measured["earlier alone"],
        "question": measured["question"] - measured["question neutral"],
        "clause alone": measured["full"] - measured["alone"],
    }
    # the verdict's direction: what the sentence adds leans towards the meant noun in every one
    for name, added in variations.items():
        assert added.mean() > 0, name
    by_neutral = variations["neutral control"]
    check_prose("coref-var-control", count(by_neutral), n, stats.sign_test(count(by_neutral), n))
    wording = variations["question 2"]
    assert stats.sign_test(count(wording), n) >= ALPHA  # "depends on its wording"
    check_prose("coref-var-wording", wording.mean(), count(wording), n, stats.sign_test(count(wording), n))
    earlier = variations["earlier pairs"]
    full, alone = measured["earlier full"], measured["earlier alone"]
    assert stats.sign_test(count(alone), 16) < ALPHA  # the earlier pairs: solved by association
    check_prose("coref-var-pairs", 16, count(full), count(alone), count(earlier))


# ---- the exercises ---------------------------------------------------------------------


@pytest.mark.model
@pytest.mark.claim("coref-ex-trophy")
def test_exercise_trophy(model):
    traces = [
        smollm2.run(f"The trophy did not fit in the suitcase because it was too {w}.", model)
        for w in ("big", "small")
    ]
    pieces = traces[0].pieces
    it, trophy = pieces.index(" it"), pieces.index(" trophy")
    word = next(i for i, (a, b) in enumerate(zip(traces[0].ids, traces[1].ids, strict=True)) if a != b)
    assert it < word
    at_it = [t.weights[13, 8, it, trophy] for t in traces]
    at_word = [t.weights[13, 8, word, trophy] for t in traces]
    assert at_it[0] == at_it[1] and at_word[0] != at_word[1]
    check_prose("coref-ex-trophy", 14, 9, at_it[0], at_word[0], at_word[1])


@pytest.mark.model
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
    plain = smollm2.run("The cat sat on the mat because everything was soft", model)
    assert plain.pieces[-1] == " soft"
    row = plain.weights[13, 8, -1]
    every = plain.pieces.index(" everything")
    assert row[mat] < on_mat / 2 and np.argmax(row) == every  # without it, not the mat
    check_prose("coref-ex-explorer", on_mat, on_cat, row[mat], row[every])
