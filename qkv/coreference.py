"""What does *it* refer to? Minimal pairs to test the story on SmolLM2-135M-Instruct.

A popular picture of attention: in "The cat sat on the mat because it was soft", the query
of *it* looks for a noun and finds *mat*. To test it on a model takes three things, each
here:

- **minimal pairs** (:data:`PAIRS`): two sentences that differ in one word, and that word
  decides the referent (*soft*: the mat; *hungry*: the cat). Whatever else the model does
  with the sentence is the same in both; what follows the word shows in the difference.
- **a behavioural probe** (:data:`PROBE`): the sentence, then "What was soft? The", and
  the model's next-token probabilities of the two nouns. :func:`preference` is
  ``log P(noun 1) − log P(noun 2)``; the model resolves the pair when its preference moves
  towards the noun that the changed word picks.
- **attention where the cue is visible**: a causal model's query at *it* sees only the
  tokens up to *it*, never the word after it, so its row is the same in both sentences of
  a pair. The first query that can see the word is the word itself.
  :func:`weight_moved` measures how far a head's weight moves towards the right noun when
  the word changes.

Thresholds (:data:`MARGIN`, :data:`SHARE`, :func:`chance_threshold`) were fixed before any
result was computed.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

__all__ = [
    "MARGIN",
    "PAIRS",
    "PROBE",
    "SHARE",
    "Pair",
    "PairRun",
    "chance_threshold",
    "noun_positions",
    "preference",
    "run_pair",
    "weight_moved",
]


class Pair(NamedTuple):
    """Two sentences that differ in one word; ``words[k]`` makes ``nouns[k]`` the referent."""

    sentence: str  # "{}" where the word goes, after "it was"
    nouns: tuple[str, str]
    words: tuple[str, str]

    def text(self, k: int) -> str:
        """The sentence in which ``nouns[k]`` is meant."""
        return self.sentence.format(self.words[k])

    def phrase(self, k: int) -> str:
        """What *it* was in the sentence meaning ``nouns[k]``: "soft", "too big"."""
        return self.sentence.split(" it was ")[1].rstrip(".").format(self.words[k])

    def probe(self, k: int, question: str | None = None) -> str:
        """The sentence, then the question (:data:`PROBE` by default) whose answer is the
        noun meant."""
        question = PROBE if question is None else question
        return question.format(sentence=self.text(k), phrase=self.phrase(k))


# --8<-- [start:pairs]
PAIRS = (
    Pair("The cat sat on the mat because it was {}.", ("cat", "mat"), ("hungry", "soft")),
    Pair(
        "The trophy did not fit in the suitcase because it was too {}.",
        ("trophy", "suitcase"),
        ("big", "small"),
    ),
    Pair("The fish ate the worm because it was {}.", ("fish", "worm"), ("hungry", "tasty")),
    Pair("The key did not open the door because it was {}.", ("key", "door"), ("bent", "locked")),
    Pair("The car passed the truck because it was {}.", ("car", "truck"), ("fast", "slow")),
    Pair("The bird could not crack the nut because it was {}.", ("bird", "nut"), ("weak", "hard")),
    Pair("The horse could not pull the cart because it was {}.", ("horse", "cart"), ("tired", "heavy")),
    Pair("The mouse hid from the cat because it was {}.", ("mouse", "cat"), ("afraid", "hungry")),
    Pair("The book did not fit on the shelf because it was too {}.", ("book", "shelf"), ("wide", "narrow")),
    Pair("The bottle did not fit in the box because it was too {}.", ("bottle", "box"), ("tall", "short")),
    Pair("The lamp could not light the room because it was too {}.", ("lamp", "room"), ("dim", "big")),
    Pair("The rope could not hold the boat because it was too {}.", ("rope", "boat"), ("thin", "heavy")),
    Pair("The baby would not drink the milk because it was {}.", ("baby", "milk"), ("tired", "sour")),
    Pair("The knife could not cut the bread because it was {}.", ("knife", "bread"), ("blunt", "tough")),
    Pair("The printer could not print the page because it was {}.", ("printer", "page"), ("broken", "torn")),
    Pair("The child could not reach the shelf because it was too {}.", ("child", "shelf"), ("short", "high")),
)
PROBE = "{sentence} What was {phrase}? The"
# --8<-- [end:pairs]

MARGIN = 0.05
"""A head's weight counts as having moved towards the right noun in a pair when
:func:`weight_moved` exceeds this: smaller moves are within the ties of a flat row."""

SHARE = 0.75
"""A head follows the changed word when its weight moves in at least this share of pairs."""


def chance_threshold(n: int, alpha: float = 0.05) -> int:
    """The fewest successes out of ``n`` that a coin (probability 1/2) reaches less often
    than ``alpha``: below it, a result is not told apart from chance.

    Examples
    --------
    >>> chance_threshold(16), chance_threshold(32)
    (12, 22)
    """
    if n < 1 or not 0 < alpha < 1:
        raise ValueError(f"need n >= 1 and 0 < alpha < 1, got n={n}, alpha={alpha}")
    for k in range(n + 2):
        tail = sum(math.comb(n, m) for m in range(k, n + 1)) / 2**n  # P(X >= k)
        if tail < alpha:
            return k
    raise AssertionError("unreachable: P(X >= n + 1) is 0")


def noun_positions(model, ids, noun: str) -> list[int]:
    """Positions of the first occurrence of ``" " + noun`` (one or more tokens) in ``ids``."""
    word = model.encode(" " + noun).tolist()
    ids = list(ids)
    for start in range(len(ids) - len(word) + 1):
        if ids[start : start + len(word)] == word:
            return list(range(start, start + len(word)))
    raise ValueError(f"{noun!r} is not in the text {model.decode(ids)!r}")


# --8<-- [start:measures]
def preference(model, logits, pair: Pair) -> np.ndarray:
    """``log P(noun 1) − log P(noun 2)`` from next-token ``logits`` (..., vocab_size): each
    noun by its first token (" trophy" against " suit" of " suitcase")."""
    first, second = (int(model.encode(" " + noun)[0]) for noun in pair.nouns)
    logits = np.asarray(logits, dtype=np.float64)
    return logits[..., first] - logits[..., second]  # the normalisation cancels


def weight_moved(weights, nouns: tuple[list[int], list[int]]) -> np.ndarray:
    """How far a head's weight moves towards the right noun when the word changes.

    ``weights`` is (2, ..., Tk): one query's weights in the sentence meaning noun 1 (index
    0) and in the one meaning noun 2 (index 1), for every head at once. The result,
    (...,), is the weight gained by noun 1 plus the weight gained by noun 2, each when it
    becomes the one meant; a head that ignores the word gives 0.
    """
    on = [np.asarray(weights)[..., positions].sum(axis=-1) for positions in nouns]
    return (on[0][0] - on[0][1]) + (on[1][1] - on[1][0])


# --8<-- [end:measures]


class PairRun(NamedTuple):
    """What :func:`run_pair` returns, for the pair's two probe texts (index 0: noun 1 meant)."""

    ids: np.ndarray  # (2, T): the two texts differ in the word (and its repeat in the question)
    weights: np.ndarray  # (2, n_layers, n_heads, T, T)
    preference: np.ndarray  # (2,): log P(noun 1) − log P(noun 2) after the probe
    word: int  # position of the word that differs (the first query that sees it)
    it: int  # position of " it"
    nouns: tuple[list[int], list[int]]  # positions of the two nouns


def run_pair(model, pair: Pair) -> PairRun:
    """Run both probe texts of ``pair`` through the model in one batch."""
    from qkv.smollm2 import output_logits, run_layers

    sentences = [model.encode(pair.text(k)) for k in (0, 1)]
    if len(sentences[0]) != len(sentences[1]) or (sentences[0] != sentences[1]).sum() != 1:
        raise ValueError(
            f"the words {pair.words} must each be one token, so that the two "
            f"sentences differ in exactly one token"
        )
    ids = np.stack([model.encode(pair.probe(k)) for k in (0, 1)])  # (2, T): the word twice
    x, seen = run_layers(model, model.embedding[ids], np.arange(ids.shape[1]))
    weights = np.stack([s.weights for s in seen], axis=1)  # (2, layers, heads, T, T)
    return PairRun(
        ids=ids,
        weights=weights,
        preference=preference(model, output_logits(model, x[:, -1]), pair),
        word=int(np.flatnonzero(sentences[0] != sentences[1])[0]),
        it=model.pieces(ids[0]).index(" it"),
        nouns=tuple(noun_positions(model, ids[0], noun) for noun in pair.nouns),
    )
