"""The experiment of docs/coreference.md:
its minimal pairs, probes, controls and thresholds.

Everything in this file was fixed, and committed on its own, before the model was
run on any of it: the git history shows the commit of this file before the commit
of any result. Nothing here runs the model; snippets/coreference.py does.
The pairs were later written as tables, two lines a pair, so that the pages
showing this file weigh less; their values are those first committed.
"""

# --8<-- [start:pairs]
from typing import NamedTuple


class Pair(NamedTuple):
    """Two sentences that differ in one word; ``words[k]`` makes ``nouns[k]`` the
    referent of the pronoun."""

    context: str  # the sentence before the pronoun
    pronoun: str  # "it", "he", "she", "they"
    rest: str  # after the pronoun, with "{}" where the deciding word goes
    nouns: tuple[str, str]  # as each would stand in the pronoun's place
    words: tuple[str, str]
    source: str

    def text(self, k: int) -> str:
        """The sentence in which ``nouns[k]`` is meant."""
        return f"{self.context} {self.pronoun} {self.rest.format(self.words[k])}"

    def substituted(self, k: int, j: int) -> tuple[str, str]:
        """Sentence k with noun j in the pronoun's place:
        (prompt, the rest scored)."""
        return f"{self.context} {self.nouns[j]}", " " + self.rest.format(
            self.words[k]
        )

    def alone(self, k: int, j: int) -> tuple[str, str]:
        """The association control: the clause alone,
        "The trophy" + " was too big."."""
        return self.nouns[j].capitalize(), " " + self.rest.format(self.words[k])

    def neutral(self, k: int) -> str:
        """Sentence k with its context replaced by a neutral one, in which the
        pronoun could mean either noun."""
        first, second = self.nouns
        rest = self.rest.format(self.words[k])
        return (
            f"{first.capitalize()} and {second} were there, "
            f"and {self.pronoun} {rest}"
        )

    def answers(self) -> tuple[str, str]:
        """The nouns as a question's answer after "the":
        " trophy", " suitcase"."""
        return tuple(" " + noun.removeprefix("the ") for noun in self.nouns)

    def question(self, k: int, probe: str) -> str:
        """Sentence k, then a question that does not repeat the deciding word."""
        return self.text(k) + probe.format(pronoun=self.pronoun)

    def old_question(self, k: int, q: int) -> str:
        """Sentence k, then the question with word q: "What was too big? The"."""
        asked = self.rest.format(self.words[q]).removesuffix(".")
        who = "What" if self.pronoun == "it" else "Who"
        return f"{self.text(k)} {who} {asked}? The"


def table(source: str, rows: str) -> tuple[Pair, ...]:
    """Pairs written two lines each: the context, then, indented,
    "pronoun | rest | noun 1 | noun 2 | word 1 | word 2"."""
    lines = rows.strip("\n").splitlines()
    if len(lines) % 2:
        raise ValueError(f"a pair takes two lines; {len(lines)} lines given")
    pairs = []
    for context, line in zip(lines[0::2], lines[1::2], strict=True):
        fields = [field.strip() for field in line.split("|")]
        if len(fields) != 6:
            raise ValueError(f"six fields wanted after {context!r}, got {line!r}")
        pronoun, rest, noun_1, noun_2, word_1, word_2 = fields
        nouns, words = (noun_1, noun_2), (word_1, word_2)
        pairs.append(Pair(context, pronoun, rest, nouns, words, source))
    return tuple(pairs)


WSC = "adapted from WSC273 (Levesque et al. 2012)"
OURS = "written for this page, in the style of WSC273"
# Winograd-style pairs: each deciding word could describe either noun on its own
PAIRS = table(
    WSC,
    """
The trophy did not fit in the suitcase because
    it | was too {}. | the trophy | the suitcase | big | small
The councilmen refused the protesters a permit because
    they | {} violence. | the councilmen | the protesters | feared | advocated
The man could not lift the boy because
    he | was so {}. | the man | the boy | weak | heavy
The truck zoomed by the bus because
    it | was going so {}. | the truck | the bus | fast | slow
The ball crashed right through the table because
    it | was made of {}. | the ball | the table | steel | paper
The boy could not see the stage with the man in front of him because
    he | was so {}. | the boy | the man | short | tall
The boy threw his bag down to the man after
    he | reached the {} of the stairs. | the boy | the man | top | bottom
Although they ran at about the same speed, the girl beat the woman because
    she | had such a {} start. | the girl | the woman | good | bad
The statue rolled off the shelf because
    it | was not {}. | the statue | the shelf | fixed | level
I could not balance the bottle upside down on the table because
    it | was so {}. | the bottle | the table | tall | uneven
I poured water from the bottle into the cup until
    it | was {}. | the bottle | the cup | empty | full
I could not put the pot on the shelf because
    it | was too {}. | the pot | the shelf | tall | high
The fish ate the worm because
    it | was {}. | the fish | the worm | hungry | tasty
The cat was waiting by the hole for the mouse, but
    it | was too {}. | the cat | the mouse | impatient | cautious
The uncle can still beat the boy at tennis, even though
    he | is thirty years {}. | the uncle | the boy | older | younger
The lawyer asked the witness a question, but
    he | was reluctant to {} it. | the lawyer | the witness | repeat | answer
The man tried to call the doctor on the phone, but
    he | was not {}. | the man | the doctor | successful | available
The girl made sure to thank the woman for all the help
    she | had {}. | the girl | the woman | received | given
The table would not fit through the door because
    it | was too {}. | the table | the door | wide | narrow
I could not cut down the tree with the axe because
    it | was too {}. | the tree | the axe | thick | small
The drain is clogged with hair, so
    it | has to be {}. | the drain | the hair | cleaned | removed
The meeting started at four and the train left at half past, but luckily
    it | was {}. | the meeting | the train | short | delayed
The man paid for the boy's education, and now
    he | is very {}. | the man | the boy | generous | grateful
""",
) + table(
    OURS,
    """
The bag could not hold the laptop because
    it | was too {}. | the bag | the laptop | small | big
The dog could not catch the rabbit because
    it | was too {}. | the dog | the rabbit | slow | fast
The boat could not pass under the bridge because
    it | was too {}. | the boat | the bridge | tall | low
The car did not fit in the garage because
    it | was too {}. | the car | the garage | long | short
The nail would not go into the wall because
    it | was too {}. | the nail | the wall | soft | hard
The ladder could not reach the roof because
    it | was too {}. | the ladder | the roof | short | high
The blanket did not cover the bed because
    it | was too {}. | the blanket | the bed | small | big
The woman beat the girl at chess because
    she | was so {}. | the woman | the girl | clever | careless
The teacher scolded the student because
    he | was so {}. | the teacher | the student | strict | lazy
The nurse helped the patient because
    she | was so {}. | the nurse | the patient | kind | weak
The doctor could not see the patient because
    he | was too {}. | the doctor | the patient | busy | sick
The cat could not catch the bird because
    it | was too {}. | the cat | the bird | slow | quick
The horse could not jump over the fence because
    it | was too {}. | the horse | the fence | short | tall
The bridge could not hold the truck because
    it | was too {}. | the bridge | the truck | weak | heavy
The hammer could not break the rock because
    it | was too {}. | the hammer | the rock | light | hard
The mother could not carry the girl because
    she | was too {}. | the mother | the girl | tired | heavy
The runner passed the man because
    he | was so {}. | the runner | the man | fast | slow
The rope could not reach the boat because
    it | was too {}. | the rope | the boat | short | far
The key would not go into the lock because
    it | was too {}. | the key | the lock | big | small
The phone did not fit in the pocket because
    it | was too {}. | the phone | the pocket | large | small
The ball would not go through the hoop because
    it | was too {}. | the ball | the hoop | big | narrow
The singer could not hear the player because
    he | was too {}. | the singer | the player | distracted | quiet
The coach praised the player because
    he | was so {}. | the coach | the player | happy | skilled
The tent did not keep out the rain because
    it | was too {}. | the tent | the rain | thin | heavy
The knife could not cut the meat because
    it | was too {}. | the knife | the meat | blunt | tough
""",
)

# The question that does not repeat the deciding word;
# the model's next token answers
QUESTION = ' In this sentence, "{pronoun}" refers to the'
# --8<-- [end:pairs]

# --8<-- [start:variations]
# A second wording of the question, asked only to see whether the verdict changes
QUESTION_2 = ' Question: Who or what does "{pronoun}" refer to? Answer: the'

EARLIER = "this page's earlier pairs: one noun fits the word by itself"
# The 16 pairs of this page's first version, where the word mostly suits one noun
ASSOCIATION_PAIRS = table(
    EARLIER,
    """
The cat sat on the mat because
    it | was {}. | the cat | the mat | hungry | soft
The trophy did not fit in the suitcase because
    it | was too {}. | the trophy | the suitcase | big | small
The fish ate the worm because
    it | was {}. | the fish | the worm | hungry | tasty
The key did not open the door because
    it | was {}. | the key | the door | bent | locked
The car passed the truck because
    it | was {}. | the car | the truck | fast | slow
The bird could not crack the nut because
    it | was {}. | the bird | the nut | weak | hard
The horse could not pull the cart because
    it | was {}. | the horse | the cart | tired | heavy
The mouse hid from the cat because
    it | was {}. | the mouse | the cat | afraid | hungry
The book did not fit on the shelf because
    it | was too {}. | the book | the shelf | wide | narrow
The bottle did not fit in the box because
    it | was too {}. | the bottle | the box | tall | short
The lamp could not light the room because
    it | was too {}. | the lamp | the room | dim | big
The rope could not hold the boat because
    it | was too {}. | the rope | the boat | thin | heavy
The baby would not drink the milk because
    it | was {}. | the baby | the milk | tired | sour
The knife could not cut the bread because
    it | was {}. | the knife | the bread | blunt | tough
The printer could not print the page because
    it | was {}. | the printer | the page | broken | torn
The child could not reach the shelf because
    it | was too {}. | the child | the shelf | short | high
""",
)
# --8<-- [end:variations]

# --8<-- [start:thresholds]
# A test passes below this one-sided p-value (sign test and signed-rank test)
ALPHA = 0.05
# The verdict "the sentence moves the model towards the meant noun, beyond
# association" needs both tests to pass on what the sentence adds
# (with it minus the control).
# The control counts as near zero on the Winograd-style pairs when it picks the
# meant noun in fewer pairs than the sign test needs (not told apart from a coin).
# --8<-- [end:thresholds]

# --8<-- [start:patching]
# Where in the model (snippets/coreference_patching.py),
# fixed before its first run.
# Clean and corrupt are one sentence with the meant noun and with the other noun
# in the pronoun's place; the rest is the same tokens. What is scored is the rest
# from the deciding word on (the tokens before it cancel between a pair's two
# sentences), summed over both sentences: exactly the pair's "moves towards the
# meant noun" of the page.
# the first pairs, in file order, whose two nouns have as many tokens and in which
# what the sentence adds is positive: patching explains an effect where the
# behaviour shows one
PATCH_PAIRS = 16
# the residual stream entering layers 2, 5, ..., 29 (layer 1's input is the
# embedding: copying the noun there is the clean run, exactly)
PATCH_LAYERS = tuple(range(1, 30, 3))
# heads patched in the 3 layers before the scanned layer at which the share
# restored by the positions after the noun rises most
# (the narrowing of Wang et al.)
HEAD_WINDOW = 3
# a head counts when its mean effect is above this quantile of the largest |mean
# effect| over heads under random sign flips of the pairs (max statistic)
NULL_QUANTILE = 0.95
SHUFFLES = 1000  # sign flips for that null
# heads ablated together, against RANDOM_DRAWS random sets of as many heads
TOP_K = 5
TOP_K_VARIATION = 3  # the same with the top 3, for "How far does this hold?"
RANDOM_DRAWS = 8  # from the heads of the same layers
# Positions patched: the noun, or every position after it
# (those before it are the same tokens in both runs).
# Heads are patched, and ablated, at the noun and after it.
# Ablation: zero on the page; the mean output of each head over the rerun
# positions of every text patched, as the variation.
SEED = 0
# --8<-- [end:patching]

# --8<-- [start:heldout]
# The sceptic's next experiment on the heads (snippets/coreference_patching.py,
# section "heldout"), fixed before its first run, after the section "patching" had
# found them.
# Heads as (layer, head) counted from 0; the page counts from 1.
NAMED_HEADS = ((16, 5), (17, 0))  # layer 17 head 6 and layer 18 head 1
# the 5 strongest heads of the section "patching", patched together as one set
TOP_SET = ((16, 5), (17, 0), (18, 1), (17, 4), (16, 2))
HEAD_LAYERS = (16, 17, 18)  # layers 17 to 19, where they were found
# (a) Held out: every pair whose two nouns have as many tokens (in the sentence
# and in the clause alone) and that the section "patching" did not use, all of
# them, whatever the sentence does in it (no selection by outcome). Each named
# head, the top set, and random heads of the same layers are patched, from the
# clean sentence into the corrupt one as before; the effect is the nats restored
# towards the meant noun, summed over the pair's two sentences. The same patches
# are run in the clause alone.
# random single heads of HEAD_LAYERS not in TOP_SET, drawn with HELD_OUT_SEED, and
# random sets of len(TOP_SET) heads drawn from the same heads
RANDOM_HEADS = 8
RANDOM_SETS = 8
HELD_OUT_SEED = 1
# A head (or the top set) REPLICATES on the held-out pairs when all three hold:
# - its effect in the sentence is positive in at least
#   stats.chance_threshold(n, ALPHA) of the n held-out pairs (one-sided sign test
#   below ALPHA);
# - the signed-rank test of its effects is below ALPHA (one-sided, positive);
# - its mean effect is larger than every random head's (every random set's, for
#   the set).
# The same three, on the effect in the sentence minus the effect in the clause
# alone, say whether it carries what the sentence adds on the held-out pairs.
# (b) The control on the 16 patched pairs: the same heads patched in the clause
# alone ("The trophy" + " was too big.", no pronoun). A head carries the clause
# alone's fit when its effect there follows the clause alone's own preference (its
# effect times the sign of the clause alone's move) by both tests at ALPHA; it
# carries it "as much" when its share there (as the page's share: sum of
# sign(move) x effect over sum of |move|) is at least half its share in the
# sentence. The heads carry more of the sentence than of the clause alone when the
# effect in the sentence minus the effect in the clause alone passes both tests at
# ALPHA.
# --8<-- [end:heldout]

# --8<-- [start:sceptic]
# The sceptic's next runs on the two heads (snippets/coreference_heads.py, on
# docs/coreference-heads.md), fixed before their first run, after the sections
# "patching" and "heldout". Heads: NAMED_HEADS, and TOP_SET as one set.
# (a) Roles swapped: the two nouns' words exchanged in the context ("The suitcase
# did not fit in the trophy because"), the pronoun, the rest and the words kept,
# so the deciding word now means the other noun. A pair allows the swap when each
# noun's word (without "the") occurs in its context exactly once as a word; every
# such pair is scored by substitution against the clause alone, as the study
# scores the original. The model FOLLOWS the swapped relation when what the
# swapped sentence adds (its move minus the clause alone's), counted towards the
# noun the swapped sentence means, passes the sign test and the signed-rank test
# at ALPHA. On the PATCH_PAIRS pairs of the section "patching" (the heads'
# pairs), the heads are patched in the swapped sentence as in the original (the
# clean run's outputs at the noun and after it); a head FOLLOWS when its effect,
# counted towards the noun the swapped sentence means, passes both tests.
# (b) Where the two heads act: on the same pairs, in the original sentence, both
# named heads are patched together at one position at a time, from the noun to
# the last row scored, and at all of them at once. Positions are grouped: the
# row that predicts the deciding word's first token; the noun's tokens (the other
# ones, when that row is the noun's last); the positions between; the rows after
# it. The effect SITS at a group when patching its positions one at a time
# restores, summed over them, at least POSITION_SHARE of what patching every
# position at once restores, in the mean over the pairs.
POSITION_SHARE = 0.5
# (c) The neutral context as a control ("The trophy and the suitcase were there,
# and the trophy" + " was too big."): the same patches as the section "heldout"
# (b) ran in the clause alone, on the same pairs, with the same rules; it keeps
# the clause away from the text's start, which the clause alone does not.
# --8<-- [end:sceptic]

# --8<-- [start:count]
if __name__ == "__main__":
    print(
        f"{len(PAIRS)} pairs, {len(ASSOCIATION_PAIRS)} earlier pairs, "
        f"alpha {ALPHA}"
    )
# --8<-- [end:count]
