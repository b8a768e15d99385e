"""Guards for docs/coreference.md: does SmolLM2 move towards the noun a sentence means, beyond
what the nouns' fit with the deciding word gives?

The exact tests of qkv.stats are checked against enumeration and simulation, written apart
from the module; qkv.scoring against a plain forward pass. The experiment is then computed
here from snippets/coreference_pairs.py (the pairs, probes and controls fixed before the
first run), each guarded sentence is compared with it by check_prose, and the verdict's
guard fails if what the sentence adds changes sign under any variation the page lists.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from prose import check_prose

from qkv import scoring, smollm2, stats
from snippets.coreference_pairs import (
    ALPHA,
    ASSOCIATION_PAIRS,
    OURS,
    PAIRS,
    QUESTION,
    QUESTION_2,
    WSC,
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


def plain_logprobs(model, ids) -> np.ndarray:
    """log-softmax of every position's logits, from a forward pass of this text alone."""
    logits = smollm2.forward(model, ids).logits.astype(np.float64)
    top = logits.max(axis=-1, keepdims=True)
    return logits - top - np.log(np.exp(logits - top).sum(axis=-1, keepdims=True))


@pytest.mark.model
def test_scoring_equals_a_forward_pass_of_each_text_alone(model):
    pairs = [PAIRS[0], PAIRS[2], ASSOCIATION_PAIRS[0]]
    prompts, rests = zip(*[p.substituted(k, j) for p in pairs for k in (0, 1) for j in (0, 1)], strict=True)
    prompts, rests = [*prompts, "The cat"], [*rests, " sat."]  # a text with no family
    got = scoring.continuation_logprobs(model, prompts, rests)
    for value, prompt, rest in zip(got, prompts, rests, strict=True):
        p, c = model.encode(prompt), model.encode(rest)
        logp = plain_logprobs(model, np.concatenate([p, c]))
        want = sum(logp[len(p) - 1 + t, token] for t, token in enumerate(c))
        assert value == pytest.approx(want, abs=2e-3)
    asked = [p.question(k, QUESTION) for p in pairs for k in (0, 1)]
    got = scoring.answer_logprobs(model, asked, [p.answers() for p in pairs for _ in (0, 1)])
    for row, text, pair in zip(got, asked, [p for p in pairs for _ in (0, 1)], strict=True):
        last = plain_logprobs(model, model.encode(text))[-1]
        firsts = [model.encode(a)[0] for a in pair.answers()]
        np.testing.assert_allclose(row, last[firsts], atol=2e-3)


@pytest.mark.model
def test_each_pair_differs_in_one_token(model):
    for pair in PAIRS + ASSOCIATION_PAIRS:
        a, b = (model.encode(pair.text(k)) for k in (0, 1))
        assert len(a) == len(b) and (a != b).sum() == 1, pair.text(0)


def moved(scores) -> np.ndarray:
    """(pairs, k, j) -> preference for noun 1 in sentence 1 minus in sentence 2."""
    return (scores[:, 0, 0] - scores[:, 0, 1]) - (scores[:, 1, 0] - scores[:, 1, 1])


def substitution(model, pairs, make) -> np.ndarray:
    texts = [make(p, k, j) for p in pairs for k in (0, 1) for j in (0, 1)]
    prompts, rests = zip(*texts, strict=True)
    return scoring.continuation_logprobs(model, prompts, rests).reshape(len(pairs), 2, 2)


def asked(model, pairs, texts) -> np.ndarray:
    """texts(pair, k) -> (pairs, k, noun j) log-probabilities of the nouns' first tokens."""
    prompts = [texts(p, k) for p in pairs for k in (0, 1)]
    answers = [p.answers() for p in pairs for _ in (0, 1)]
    return scoring.answer_logprobs(model, prompts, answers).reshape(len(pairs), 2, 2)


def neutral_substituted(pair, k, j):
    _, rest = pair.substituted(k, j)
    first, second = pair.nouns
    return f"{first.capitalize()} and {second} were there, and {pair.nouns[j]}", rest


@pytest.fixture(scope="module")
def measured(model):
    """Every measurement of the page and of its box, as (pairs,) moves in nats."""
    out = {}
    for name, pairs in (("", PAIRS), ("earlier ", ASSOCIATION_PAIRS)):
        full = substitution(model, pairs, lambda p, k, j: p.substituted(k, j))
        out[name + "full scores"] = full
        out[name + "full"] = moved(full)
        out[name + "alone"] = moved(substitution(model, pairs, lambda p, k, j: p.alone(k, j)))
    out["neutral"] = moved(substitution(model, PAIRS, neutral_substituted))
    for name, question in (("question", QUESTION), ("question 2", QUESTION_2)):
        out[name] = moved(asked(model, PAIRS, lambda p, k, q=question: p.question(k, q)))
        out[name + " neutral"] = moved(
            asked(model, PAIRS, lambda p, k, q=question: p.neutral(k) + q.format(pronoun=p.pronoun))
        )
    old = ASSOCIATION_PAIRS
    crossed = scoring.answer_logprobs(
        model,
        [p.old_question(s, q) for p in old for s in (0, 1) for q in (0, 1)],
        [p.answers() for p in old for _ in range(4)],
    ).reshape(len(old), 2, 2, 2)
    out["old"] = crossed[..., 0] - crossed[..., 1]  # (pairs, sentence word, question word)
    return out


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
    full = measured["full scores"]
    right = int((full[:, 0, 0] > full[:, 0, 1]).sum() + (full[:, 1, 1] > full[:, 1, 0]).sum())
    n = len(PAIRS)
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
    old = measured["old"]
    by_sentence = (old[:, 0, :] - old[:, 1, :]).mean(axis=1).mean()
    by_question = (old[:, :, 0] - old[:, :, 1]).mean(axis=1).mean()
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
