"""The explorer's guided experiments (docs/explorer.md, "Guided experiments"), as the tests
know them: each mission's lab state, written here from the page's sentences, not read from
missions.js. The browser test checks that each mission's link opens this state; the model
tests check each mission's "what it means" sentence on qkv's SmolLM2 in this state."""

from __future__ import annotations

REPEATED = (
    "apple river seven cloud lamp tiger glass moon paper stone "
    "apple river seven cloud lamp tiger glass moon paper"
)
NEXT = " stone"  # the repeated text's next word: the one that followed "paper" the first time
INDUCTION_HEAD = (19, 7)  # layer, head, from 1: the trained-model page's strongest induction head
PREVIOUS_HEADS = ((2, 3), (3, 2), (12, 2), (17, 1))  # its previous-token heads, from 1
CAPITAL = "The capital of France is"
CAPITAL_CONTROLS = {"The capital of Italy is": " Rome", "The capital of Japan is": " Tokyo"}
SINK = "The cat sat on the mat because it was warm"
PAIR = (
    "The trophy did not fit in the suitcase because the trophy was too",
    "The trophy did not fit in the suitcase because the suitcase was too",
)
CONTINUATIONS = (" big", " small")

# mission id -> the lab's state its link opens (the address's keys)
STATES = {
    "induction": {"text": REPEATED, "off": "19.7"},
    "lens": {"text": CAPITAL},
    "sink": {"text": SINK},
    "previous": {"text": REPEATED, "off": "2.3,3.2,12.2,17.1"},
    "pair": {"text": PAIR[0], "text2": PAIR[1], "cont1": CONTINUATIONS[0], "cont2": CONTINUATIONS[1]},
}
