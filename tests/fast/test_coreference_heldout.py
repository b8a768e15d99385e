"""Guards for the held-out replication and the clause-alone control of the coreference heads.

docs/coreference.md, "Where in the model": the heads found on 16 chosen pairs (layer 17
head 6, layer 18 head 1, the top-5 set) are patched on the aligned pairs not used to find
them, and in the clause alone of the 16 (snippets/coreference_patching.py, section
``heldout``; design in snippets/coreference_pairs.py, section ``heldout``). These tests
read what the page prints (``page_output``), recompute each printed statistic from the
printed per-pair values or counts with qkv.lab.stats, check each verdict word against the
design's rule, assert the direction each guarded sentence states, and recompute one
pair's patched effect from scratch with qkv.lab.patching.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from prose import check_prose

from qkv.lab import patching, stats
from snippets.coreference_pairs import (
    ALPHA,
    NAMED_HEADS,
    PAIRS,
    PATCH_PAIRS,
    RANDOM_HEADS,
    RANDOM_SETS,
    TOP_SET,
)

pytestmark = pytest.mark.model

SECTION = "coreference_patching.py:heldout"
NUMBER = r"([-+]?\d+\.\d+)"
NAMES = ["layer 17 head 6", "layer 18 head 1", "top 5 together"]


@pytest.fixture(scope="module")
def shown(page_output) -> str:
    return page_output("coreference-patching.md")[SECTION]


def lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


P_VALUE = r"(< 0\.001|\d\.\d{3})"


def p_read(text: str) -> float:
    """A printed p-value; "< 0.001" reads as 0 (every check below compares it with 0.05)."""
    return 0.0 if text.startswith("<") else float(text)


def p_matches(text: str, p: float) -> bool:
    return p < 0.001 if text.startswith("<") else abs(p - float(text)) <= 5e-4


@pytest.fixture(scope="module")
def printed(shown):
    """Everything the section prints, read back into numbers."""
    out = {"rows": [], "tests": {}, "random": {}, "control": {}}
    head = re.match(
        r"(\d+) held-out pairs .*prefers the meant noun in (\d+), what it adds is positive"
        rf" in (\d+) \({NUMBER} nats on average\)",
        lines(shown)[0],
    )
    assert head, lines(shown)[0]
    out["n"], out["prefers"], out["adds up"] = map(int, head.groups()[:3])
    out["adds mean"] = float(head.group(4))
    row = re.compile(rf"(\S+/\S+ \S+/\S+)\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}$")
    stat = re.compile(
        rf"({'|'.join(NAMES)})\s+{NUMBER}, positive in (\d+) of (\d+), sign p {P_VALUE},"
        rf" signed-rank p {P_VALUE}: (replicates|does not replicate)$"
    )
    spread = re.compile(rf"random (heads|sets)\s+{NUMBER} to {NUMBER}$")
    both = rf"in (\d+) of (\d+) \(sign p {P_VALUE}, signed-rank p {P_VALUE}\)$"
    kind, name = None, None
    for line in lines(shown)[1:]:
        if m := row.match(line):
            out["rows"].append((m.group(1), *map(float, m.groups()[1:])))
        elif line in ("sentence:", "minus clause alone:"):
            kind = line[:-1]
        elif m := stat.match(line):
            name, mean, up, n, p_sign, p_rank, verdict = m.groups()
            out["tests"][kind, name] = (float(mean), int(up), int(n), p_sign, p_rank, verdict)
        elif m := spread.match(line):
            out["random"][kind, m.group(1)] = (float(m.group(2)), float(m.group(3)))
        elif m := re.match(
            rf"({'|'.join(NAMES)}): sentence {NUMBER} \(share {NUMBER}\), clause alone {NUMBER}"
            rf" \(share {NUMBER}\)$",
            line,
        ):
            name = m.group(1)
            out["control"][name] = dict(
                zip(("s", "share s", "a", "share a"), map(float, m.groups()[1:]), strict=True)
            )
        elif m := re.match("follows the clause alone's own preference " + both, line):
            up, n, p_sign, p_rank = m.groups()
            out["control"][name]["fit"] = (int(up), int(n), p_sign, p_rank)
        elif m := re.match("larger in the sentence " + both, line):
            up, n, p_sign, p_rank = m.groups()
            out["control"][name]["more"] = (int(up), int(n), p_sign, p_rank)
        elif m := re.match(
            r"carries the clause alone's fit: (yes|no); as much as the sentence's: (yes|no);"
            r" more of the sentence: (yes|no)$",
            line,
        ):
            out["control"][name]["verdicts"] = m.groups()
    assert len(out["rows"]) == out["n"], shown
    assert len(out["tests"]) == 6 and len(out["random"]) == 4, shown
    assert set(out["control"]) == set(NAMES) and all(len(c) == 7 for c in out["control"].values()), shown
    return out


def aligned(model, pair) -> bool:
    """Both nouns as many tokens, in the sentence and in the clause alone (the pairs the
    patching can use position by position)."""
    return all(
        len(model.encode(make(0, 0)[0])) == len(model.encode(make(0, 1)[0]))
        for make in (pair.substituted, pair.alone)
    )


def test_the_held_out_pairs_are_every_aligned_pair_not_patched_before(model, printed):
    n_aligned = sum(aligned(model, pair) for pair in PAIRS)
    assert printed["n"] == n_aligned - PATCH_PAIRS
    labels = [r[0] for r in printed["rows"]]
    assert len(set(labels)) == len(labels)
    # the header's counts are the table's: the held-out set was not chosen by outcome,
    # so pairs where the sentence adds nothing or goes the wrong way are in it
    adds = np.array([r[2] for r in printed["rows"]])
    assert printed["adds up"] == int((adds > 0).sum())
    assert printed["prefers"] == int((np.array([r[1] for r in printed["rows"]]) > 0).sum())
    assert printed["adds mean"] == pytest.approx(adds.mean(), abs=0.006)


def test_each_statistic_and_verdict_follows_from_the_printed_values(printed):
    rows = np.array([r[1:] for r in printed["rows"]])  # (pairs, 5): moved, adds, 3 effects
    n = printed["n"]
    for (kind, name), (mean, up, total, p_sign, p_rank, verdict) in printed["tests"].items():
        assert total == n and p_matches(p_sign, stats.sign_test(up, n))
        if kind == "sentence":  # the table prints each pair's effect in the sentence
            effect = rows[:, 2 + NAMES.index(name)]
            assert up == int((effect > 0).sum())
            assert mean == pytest.approx(effect.mean(), abs=0.006)
            # the signed-rank test of the printed (rounded) effects reaches the same side
            assert (p_read(p_rank) < ALPHA) == (stats.signed_rank_test(effect) < ALPHA)
        baseline = printed["random"][kind, "sets" if name.startswith("top") else "heads"][1]
        rule = p_read(p_sign) < ALPHA and p_read(p_rank) < ALPHA and mean > baseline
        assert (verdict == "replicates") == rule, (kind, name)
    for name, c in printed["control"].items():
        fit, as_much, more = c["verdicts"]
        for (up, total, p_sign, p_rank), word in ((c["fit"], fit), (c["more"], more)):
            assert total == PATCH_PAIRS and p_matches(p_sign, stats.sign_test(up, total))
            assert (word == "yes") == (p_read(p_sign) < ALPHA and p_read(p_rank) < ALPHA), name
        # shares are printed to 2 decimals: the rule is checked where rounding cannot flip it
        if abs(c["share a"] - c["share s"] / 2) > 0.01:
            assert (as_much == "yes") == (c["share a"] >= c["share s"] / 2), name


def test_the_design_names_the_heads_the_patching_found():
    assert NAMED_HEADS == ((16, 5), (17, 0)) and TOP_SET[:2] == NAMED_HEADS
    assert len(TOP_SET) == 5 and RANDOM_HEADS >= 8 and RANDOM_SETS >= 8


def test_one_pair_recomputed_with_qkv_patching(model, printed):
    """The first held-out pair's effect of layer 17 head 6, from the pair's own texts."""
    label, *_, printed_l17h6, printed_l18h1, _ = printed["rows"][0]
    nouns, words = (part.split("/") for part in label.split(" "))
    pair = next(
        p
        for p in PAIRS
        if [x.removeprefix("the ") for x in p.nouns] == nouns
        and all(w.startswith(token) for w, token in zip(p.words, words, strict=True))
    )
    got = {}
    for layer, h in NAMED_HEADS:
        which = np.zeros((1, model.config.n_layers, model.config.n_heads), dtype=bool)
        which[0, layer, h] = True
        total = 0.0
        for k in (0, 1):  # sentence k: noun k is meant (clean), the other noun (corrupt)
            texts = [pair.substituted(k, j) for j in (k, 1 - k)]
            prompts = [model.encode(prompt) for prompt, _ in texts]
            rest = model.encode(texts[0][1])
            other = model.encode(pair.substituted(1 - k, 0)[1])
            word = next(t for t in range(len(rest)) if rest[t] != other[t])
            rows = len(prompts[0]) - 1 + np.arange(word, len(rest))
            clean, corrupt = (patching.record(model, np.concatenate([p, rest])) for p in prompts)
            patched = patching.patch_heads(model, clean, corrupt, which, rows, rest[word:])[0]
            total += patched.sum() - patching.log_prob(model, corrupt, rows, rest[word:]).sum()
        got[layer, h] = total
    assert got[NAMED_HEADS[0]] == pytest.approx(printed_l17h6, abs=0.006)
    assert got[NAMED_HEADS[1]] == pytest.approx(printed_l18h1, abs=0.006)


def held_out_rows(printed) -> np.ndarray:
    return np.array([r[1:] for r in printed["rows"]])  # (pairs, 5): moved, adds, 3 effects


@pytest.mark.claim("coref-heldout-design")
def test_the_held_out_set_keeps_the_pairs_where_the_sentence_adds_nothing(printed):
    adds = held_out_rows(printed)[:, 1]
    not_adding = int((adds <= 0).sum())
    assert not_adding > 0  # the set was not chosen by outcome: these pairs are in it
    check_prose("coref-heldout-design", printed["n"], not_adding, PATCH_PAIRS)


@pytest.mark.claim("coref-heldout")
def test_the_heads_replicate_on_the_held_out_pairs(printed):
    tests = {name: printed["tests"]["sentence", name] for name in NAMES}
    assert all(t[-1] == "replicates" for t in tests.values())  # the design's rule, all three
    high = printed["random"]["sentence", "heads"][1]
    assert high < min(tests[name][0] for name in NAMES[:2])
    l17, l18, top = (tests[name] for name in NAMES)
    assert l17[1] == l18[1]  # "each ... in 26"
    check_prose("coref-heldout", l17[2], 17, 6, 18, 1, l17[1], l17[0], l18[0], 5, top[0], high)


@pytest.mark.claim("coref-heldout-adds")
def test_the_heads_carry_what_the_sentence_adds_on_the_held_out_pairs(printed):
    l17, l18 = (printed["tests"]["minus clause alone", name] for name in NAMES[:2])
    assert l17[-1] == l18[-1] == "replicates"  # positive, both tests, beyond every random head
    check_prose("coref-heldout-adds", l17[0], l18[0], l17[1], l18[1], printed["n"])


@pytest.mark.claim("coref-heldout-control")
def test_in_the_clause_alone_the_two_heads_do_not_carry_the_fit(printed):
    l17, l18 = (printed["control"][name] for name in NAMES[:2])
    for c in (l17, l18):
        fit, as_much, more = c["verdicts"]
        assert (fit, as_much, more) == ("no", "no", "yes")
        assert c["share a"] < c["share s"] / 2
    assert l17["fit"][0] == l18["fit"][0] and l17["more"][0] == l18["more"][0]  # "each"
    check_prose(
        "coref-heldout-control",
        PATCH_PAIRS,
        l17["share a"],
        l18["share a"],
        l17["share s"],
        l18["share s"],
        l17["fit"][0],
        PATCH_PAIRS,
        l17["more"][0],
        PATCH_PAIRS,
    )


@pytest.mark.claim("coref-heldout-control-top")
def test_the_top_set_comes_closer_to_the_fit_but_not_both_tests(printed):
    top = printed["control"]["top 5 together"]
    up, total, p_sign, p_rank = top["fit"]
    assert top["verdicts"][0] == "no" and p_read(p_sign) < ALPHA <= p_read(p_rank)
    closer = top["share a"] > max(printed["control"][name]["share a"] for name in NAMES[:2])
    assert closer
    check_prose(
        "coref-heldout-control-top",
        5,
        up,
        total,
        float(p_sign),
        float(p_rank),
        top["share a"],
        top["share s"],
    )


@pytest.mark.claim("coref-verdict-heldout", "coref-heldout-scope")
def test_the_verdict_and_its_scope(model, printed):
    l17, l18 = (printed["tests"]["sentence", name] for name in NAMES[:2])
    assert l17[-1] == l18[-1] == "replicates" and l17[1] == l18[1]
    c17, c18 = (printed["control"][name] for name in NAMES[:2])
    assert c17["verdicts"][:2] == c18["verdicts"][:2] == ("no", "no")  # little of the fit
    check_prose(
        "coref-verdict-heldout",
        printed["n"],
        l17[1],
        printed["n"],
        PATCH_PAIRS,
        c17["share a"],
        c18["share a"],
        c17["share s"],
        c18["share s"],
    )
    # "what the sentence adds": on held-out pairs, beyond the clause alone
    assert all(printed["tests"]["minus clause alone", name][-1] == "replicates" for name in NAMES[:2])
    # "no pronoun is left in the scored text": substitution puts a noun in its place
    for pair in PAIRS:
        for k in (0, 1):
            for j in (0, 1):
                prompt, rest = pair.substituted(k, j)
                assert pair.pronoun not in re.findall(r"\w+", rest.lower())
                assert prompt.endswith(pair.nouns[j])
    n_aligned = sum(aligned(model, pair) for pair in PAIRS)
    assert printed["n"] + PATCH_PAIRS == n_aligned
    check_prose("coref-heldout-scope", n_aligned)
