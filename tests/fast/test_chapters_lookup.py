"""Guards for the claims of the home page and chapters 1-4 (soft lookup, projections,
keys vs values, why three projections).

Each test derives its fact itself, from qkv's public API applied to ``qkv.toy`` data (or to
the palette of chapter 1, written down from what that page's prose states), from
hand-written NumPy or from algebra, and then checks that what the page prints under its
executed blocks (``page_output``) agrees with it, to the printed rounding. No expected value
is copied from the printed output, and no test reads a name a snippet defines.
"""

from __future__ import annotations

import inspect
import math
import re
import textwrap

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from prose import check_prose, claim_sentence, written_numbers
from qkv_site.figures import soft_vs_hard
from support import attention_product_flops, numbers

import qkv
from qkv import dot_product, toy
from qkv.cost import SMOLLM2_135M

seeds = st.integers(0, 2**32 - 1)
widths = st.integers(1, 12)
WORDS = toy.SENTENCE
DRANK, MILK, FROM, CUP, SHE = (WORDS.index(w) for w in ("drank", "milk", "from", "cup", "she"))


def stated(claim_id):
    """The numbers a guarded sentence writes, in order. A test reads an exercise's givens
    (a threshold, a factor) here and computes with them, rather than keep its own copy."""
    return [w.value for w in written_numbers(claim_sentence(claim_id))]


def reference_attention(q, k, v):
    """softmax(q kᵀ / √d_k) v written out with np.exp, independent of qkv."""
    scores = q @ k.T / np.sqrt(q.shape[-1])
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights, weights @ v


def random_projections(seed, d_model, d_k, d_v):
    return qkv.Projections.random(np.random.default_rng(seed), d_model, d_k, d_v)


def random_tied_case(seed, d_k, t):
    """``t`` random inputs of width 6 and projections with W_Q tied to W_K."""
    p = random_projections(seed, 6, d_k, 3)
    x = np.random.default_rng(seed).normal(size=(t, 6))
    return x, qkv.Projections(p.w_k, p.w_k, p.w_v)


def assert_printed(text, expected, decimals):
    """The numbers in ``text`` are ``expected`` rounded to ``decimals`` places."""
    np.testing.assert_allclose(numbers(text), np.ravel(expected), rtol=0, atol=0.5 * 10.0**-decimals + 1e-9)


def named_numbers(text):
    """'she 0.16, drank 0.04, ...' (after a label and a colon) as {'she': 0.16, ...}."""
    pairs = [item.split() for item in text.split(":", 1)[-1].split(",")]
    return {name: float(value) for name, value in pairs}


def unnamed_block(shown, marker):
    """What a block that runs several snippet sections prints, found by one printed line."""
    found = [
        b.text
        for b in shown.blocks
        if b.section is None and any(ln.strip().startswith(marker) for ln in b.text.splitlines())
    ]
    assert len(found) == 1, f"docs/{shown.page}: {len(found)} such blocks print {marker!r}"
    return found[0]


def line_of(text, start):
    """The one line of ``text`` that starts with ``start`` (stripped)."""
    (line,) = [ln.strip() for ln in text.splitlines() if ln.strip().startswith(start)]
    return line


@pytest.fixture(scope="module")
def hand_built():
    """The hand-built toy's Q, K, V and attention, from qkv.toy."""
    q, k, v = qkv.project(toy.feature_embeddings(), toy.hand_built_projections())
    return q, k, v, qkv.attention(q, k, v)


# drank's hand-written scores (chapter 2): 8/√8 on milk, 4/√8 on she, 0 on the other four
E_8, E_4 = np.exp(8 / np.sqrt(8)), np.exp(4 / np.sqrt(8))
DRANK_ON_MILK, DRANK_ON_SHE, DRANK_ON_OTHER = np.array([E_8, E_4, 1]) / (E_8 + E_4 + 4)


# ---- Home page -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def shown_home(page_output):
    return page_output("index.md")


@pytest.mark.claim("rows-sum-to-one")
def test_home_example_rows_sum_to_one(shown_home, hand_built):
    weights = hand_built[3].weights
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-12)
    check_prose("rows-sum-to-one", weights.sum(axis=-1).max())
    assert_printed(shown_home.line("first_attention.py:attend", "row sums:"), [1.0] * len(WORDS), 6)


@pytest.mark.claim("home-shapes")
def test_home_example_gives_one_row_per_word_and_d_v_columns(shown_home):
    p, t = toy.hand_built_projections(), len(WORDS)
    weights, output = qkv.self_attention(toy.feature_embeddings(), p)
    assert weights.shape == (t, t) and output.shape == (t, p.d_v)
    check_prose("home-shapes", *weights.shape, output.shape[1], p.d_v, p.d_k)
    assert (
        shown_home.line("first_attention.py:attend", "weights:")
        == f"weights: {(t, t)}   output: {(t, p.d_v)}"
    )


@pytest.mark.claim("home-is-the-formula")
def test_home_example_is_softmax_of_scaled_scores_times_values(shown_home, hand_built):
    q, k, v, result = hand_built
    weights, output = reference_attention(q, k, v)
    check_prose("home-is-the-formula", q.shape[-1])  # the d_k under the square root
    np.testing.assert_allclose(result.weights, weights, rtol=1e-12)
    np.testing.assert_allclose(result.output, output, rtol=1e-12, atol=1e-14)
    for word, w in zip(WORDS, weights[DRANK], strict=True):  # the row the page prints
        assert_printed(shown_home.line("first_attention.py:attend", f"drank -> {word} "), w, 3)


@pytest.mark.claim("home-drank-milk")
def test_home_example_drank_puts_over_two_thirds_on_milk(shown_home, hand_built):
    row = hand_built[3].weights[DRANK]
    assert row.argmax() == MILK and row.max() > 2 / 3
    printed = {w: numbers(shown_home.line("first_attention.py:attend", f"drank -> {w} "))[0] for w in WORDS}
    assert max(printed, key=printed.get) == "milk" and printed["milk"] > 2 / 3


# ---- 1. Attention is a weighted average --------------------------------------------------

# The palette of chapter 1, from the figure module that draws it (tests/fast/test_figures.py
# checks it against what the page prints), in the order the page lists the entries.
NAMES, KEYS, VALUES = soft_vs_hard.NAMES, soft_vs_hard.KEYS, soft_vs_hard.VALUES
WARM = soft_vs_hard.QUERY  # "something warm"
BRIGHT = WARM[:, ::-1]  # exercise 1's "something bright": the other of the two key columns
RED, ORANGE, BLUE = NAMES.index("red"), NAMES.index("orange"), NAMES.index("blue")


@pytest.fixture(scope="module")
def shown_lookup(page_output):
    return page_output("soft-lookup.md")


@pytest.fixture(scope="module")
def shown_lookup_depth(page_output):
    """Chapter 1's deep dive: tiny weights, the origins, the exercise aimed at blue."""
    return page_output("soft-lookup-in-depth.md")


def palette_weights(query):
    """Softmax of the palette's scores for ``query``, written out here (d_k = 2)."""
    s = KEYS @ np.asarray(query, dtype=float) / np.sqrt(2)
    e = np.exp(s - s.max())
    return e / e.sum()


def printed_weights(text):
    """The 'weight on NAME W' lines of a block, in printed order: [(name, w), ...]."""
    lines = [
        ln.split()
        for ln in text.splitlines()
        if ln.strip().startswith("weight on ") and not ln.strip().startswith("weight on blue at")
    ]
    return [(words[2], float(words[3])) for words in lines]


@pytest.mark.claim("lookup-dict-exact")
def test_the_pages_dict_gives_orange_exactly_and_holds_no_warm(shown_lookup):
    # what the page's dict prints, against the palette's own orange (a KeyError for a name
    # the dict does not hold is Python's, not the page's, to guarantee)
    text = shown_lookup["soft_lookup.py:hard"]
    assert line_of(text, "palette['orange'] ->") == f"palette['orange'] -> {tuple(VALUES[ORANGE].tolist())}"
    assert line_of(text, "'warm' in palette ->") == "'warm' in palette -> False"


@pytest.mark.claim("lookup-argmax-answers")
def test_the_argmax_answers_a_query_no_key_equals_and_the_sharpened_weights_close_in_on_it(
    shown_lookup,
):
    assert not any(np.array_equal(key, WARM[0]) for key in KEYS)  # no key is (1, 0)
    best = max(range(len(KEYS)), key=lambda i: float(KEYS[i] @ WARM[0]))  # by hand
    assert NAMES[best] == "red"
    # the sharpened weights close in on that row: the largest weight grows with the factor
    on_best = [qkv.attention(f * WARM, KEYS, VALUES).weights[0, best] for f in (1, 4, 16, 64)]
    assert on_best == sorted(on_best) and on_best[-1] > 0.999
    text = shown_lookup["soft_lookup.py:hard"]
    assert line_of(text, "(1, 0) among the keys ->") == "(1, 0) among the keys -> False"
    assert line_of(text, "best match for (1, 0) ->") == (
        f"best match for (1, 0) -> red {tuple(VALUES[best].tolist())}"
    )
    check_prose("lookup-argmax-answers", *WARM[0])


@pytest.mark.claim("lookup-scores-are-warmth")
def test_scores_of_the_warm_query_are_the_keys_warmth(shown_lookup):
    scores = KEYS @ WARM[0]
    np.testing.assert_array_equal(scores, KEYS[:, 0])
    check_prose("lookup-scores-are-warmth", *WARM[0], *scores)
    assert_printed(shown_lookup.line("soft_lookup.py:soft", "scores:"), scores, 6)
    # and those keys are the page's: the weights it prints are the softmax of these scores
    weights = qkv.attention(WARM, KEYS, VALUES).weights[0]
    assert printed_weights(shown_lookup["soft_lookup.py:soft"]) == [
        (n, pytest.approx(w, abs=5e-4)) for n, w in zip(NAMES, weights, strict=True)
    ]


@pytest.mark.claim("lookup-every-key-weighted")
def test_every_entry_gets_a_positive_weight_even_the_worst_match(shown_lookup):
    weights = qkv.attention(WARM, KEYS, VALUES).weights[0]
    np.testing.assert_allclose(weights, palette_weights(WARM[0]), rtol=1e-12)
    assert NAMES[int(np.argmin(KEYS @ WARM[0]))] == "blue" and (KEYS @ WARM[0])[BLUE] < 0
    assert (weights > 0).all()
    check_prose("lookup-every-key-weighted", weights.sum())
    printed = dict(printed_weights(shown_lookup["soft_lookup.py:soft"]))
    assert printed["blue"] == pytest.approx(weights[BLUE], abs=5e-4) and printed["blue"] > 0
    assert shown_lookup.values("soft_lookup.py:soft", "sum of weights:") == [1.0]


@pytest.mark.claim("lookup-weights-follow-scores")
def test_weights_rank_entries_as_the_scores_do(shown_lookup):
    scores = KEYS @ WARM[0]
    weights = qkv.attention(WARM, KEYS, VALUES).weights[0]
    np.testing.assert_array_equal(np.argsort(weights), np.argsort(scores))
    text = shown_lookup["soft_lookup.py:soft"]
    printed = [w for _, w in printed_weights(text)]
    np.testing.assert_array_equal(np.argsort(printed), np.argsort(numbers(line_of(text, "scores:"))))


@pytest.mark.claim("lookup-answer-is-blend")
def test_the_answer_is_the_weighted_average_and_no_stored_colour(shown_lookup):
    weights, answer = reference_attention(WARM, KEYS, VALUES)
    np.testing.assert_allclose(qkv.attention(WARM, KEYS, VALUES).output, answer, rtol=1e-12)
    np.testing.assert_allclose(answer[0], weights[0] @ VALUES, rtol=1e-12)
    assert np.abs(VALUES - answer[0]).max(axis=-1).min() > 0.1  # no entry holds it
    red, green, blue = answer[0]
    assert red > max(green, blue) and min(green, blue) > 0.2  # reddish, but muted
    line = shown_lookup.line("soft_lookup.py:soft", "answer:")
    assert_printed(line.split("an RGB")[0], answer[0], 3)


@pytest.mark.claim("lookup-answer-width")
@settings(deadline=None)  # timing is not what these tests check
@given(seeds, widths, widths, st.integers(1, 8))
def test_the_answer_has_the_values_width_not_the_keys(seed, d_k, d_v, n):
    rng = np.random.default_rng(seed)
    query, keys, values = rng.normal(size=(1, d_k)), rng.normal(size=(n, d_k)), rng.normal(size=(n, d_v))
    assert qkv.attention(query, keys, values).output.shape == (1, d_v)


@pytest.mark.claim("lookup-answer-width")
def test_the_palette_answer_has_three_numbers_from_two_number_keys(shown_lookup):
    assert qkv.attention(WARM, KEYS, VALUES).output.shape == (1, 3) and KEYS.shape[1] == 2
    answer = shown_lookup.line("soft_lookup.py:soft", "answer:").split("an RGB")[0]
    assert len(numbers(answer)) == 3


@pytest.mark.claim("lookup-sharpen-to-hard")
def test_a_larger_query_concentrates_the_weight_on_the_best_key(shown_lookup):
    best = int(np.argmax(KEYS @ WARM[0]))
    assert best == RED
    factors = (1, 4, 16, 64)  # the rows the page prints
    results = [qkv.attention(WARM * f, KEYS, VALUES) for f in factors]
    on_best = [r.weights[0, best] for r in results]
    assert np.all(np.diff(on_best) > 0)
    np.testing.assert_allclose(results[-1].output[0], VALUES[best], atol=5e-4)  # to three decimals
    check_prose("lookup-sharpen-to-hard", factors[-1], on_best[-1])
    for f, r in zip(factors, results, strict=True):
        line = shown_lookup.line("soft_lookup.py:sharpen", f"x{f} ")
        weight, answer = line.split("answer")
        assert_printed(weight, [f, r.weights[0, RED]], 4)
        assert_printed(answer, r.output[0], 3)


def sci(x):
    """``x`` as prose writes it, m × 10^e with 1 <= m < 10: (m, 10.0**e)."""
    e = math.floor(math.log10(abs(x)))
    return x / 10.0**e, 10.0**e


@pytest.fixture(scope="module")
def blue_at_64():
    """Blue's weight when the warm query is 64 times larger, in float64."""
    return palette_weights(64 * WARM[0])[BLUE]


@pytest.mark.claim("lookup-sharpen-never-exact")
def test_at_64_times_the_worst_key_still_has_a_tiny_positive_weight(shown_lookup_depth, blue_at_64):
    weights = qkv.attention(WARM * 64, KEYS, VALUES).weights[0]
    assert weights.dtype == np.float64 and (weights > 0).all()
    assert weights[BLUE] == pytest.approx(blue_at_64, rel=1e-9)
    check_prose("lookup-sharpen-never-exact", *sci(weights[BLUE]))
    line = shown_lookup_depth.line("soft_lookup.py:underflow", "weight on blue at x64:")
    assert numbers(line.split("in float64")[0])[-1] == float(f"{blue_at_64:.2g}")


@pytest.mark.claim("lookup-underflow-types")
def test_the_weight_is_a_subnormal_in_float32_and_bfloat16_and_zero_in_float16(
    shown_lookup_depth, blue_at_64
):
    tiny32 = float(np.finfo(np.float32).tiny)
    tiny16 = float(np.finfo(np.float16).smallest_subnormal)
    assert 0 < np.float32(blue_at_64) < tiny32  # a subnormal: below the smallest normal
    assert torch.finfo(torch.bfloat16).tiny == tiny32  # bfloat16 has float32's exponent range
    as_bf16 = torch.tensor([blue_at_64], dtype=torch.bfloat16)
    assert 0 < as_bf16.item() < tiny32
    assert np.float16(blue_at_64) == 0 and blue_at_64 < tiny16 / 2  # rounds to 0
    assert torch.set_flush_denormal(True), "this CPU cannot flush subnormals to zero"
    try:  # flushed, float32 and bfloat16 both keep nothing of it
        flushed32 = (torch.tensor([blue_at_64], dtype=torch.float32) * 1.0).item()
        flushed16 = (as_bf16 * 1.0).item()
    finally:
        torch.set_flush_denormal(False)
    assert flushed32 == flushed16
    check_prose(
        "lookup-underflow-types", *sci(tiny32), flushed32, *sci(tiny16), float(np.float16(blue_at_64))
    )
    line = shown_lookup_depth.line("soft_lookup.py:underflow", "weight on blue at x64:")
    assert line.endswith("0.0 as float16") and "e-40 as float32" in line


@pytest.mark.claim("lookup-nudge")
def test_a_small_step_flips_the_best_match_but_barely_moves_the_average(shown_lookup):
    def best_match(query):
        return VALUES[np.argmax(KEYS @ query)]

    # red and orange match (1, t) equally where 1 + 0.2 t = 0.8 + 0.8 t; the page's two
    # queries, (1, 0.30) and (1, 0.36), lie on either side of that line
    t_equal = (KEYS[RED, 0] - KEYS[ORANGE, 0]) / (KEYS[ORANGE, 1] - KEYS[RED, 1])
    before, after = np.array([[1.0, 0.30]]), np.array([[1.0, 0.36]])
    assert before[0, 1] < t_equal < after[0, 1]
    np.testing.assert_array_equal(best_match(before[0]), VALUES[RED])
    np.testing.assert_array_equal(best_match(after[0]), VALUES[ORANGE])
    jump = np.abs(VALUES[ORANGE] - VALUES[RED])
    assert jump.argmax() == 1 and np.count_nonzero(jump) == 1  # green only
    soft = [qkv.attention(q, KEYS, VALUES).output[0] for q in (before, after)]
    moved = np.abs(soft[1] - soft[0]).max()
    check_prose("lookup-nudge", jump.max(), moved)
    # the page: red, then orange, for the best match; two averages that far apart
    assert_printed(shown_lookup.line("soft_lookup.py:nudge", "best match:"), [VALUES[RED], VALUES[ORANGE]], 6)
    shown_before, shown_after = np.split(
        np.array(numbers(shown_lookup.line("soft_lookup.py:nudge", "average:"))), 2
    )
    np.testing.assert_allclose(shown_before, soft[0], atol=5e-4 + 1e-9)
    np.testing.assert_allclose(shown_after, soft[1], atol=5e-4 + 1e-9)


# ---- exercises of chapter 1 ----------------------------------------------------------------


@pytest.mark.claim("lookup-ex-bright")
def test_the_bright_query_weighs_white_most_and_blue_least(shown_lookup):
    scores = KEYS @ BRIGHT[0]
    np.testing.assert_array_equal(scores, KEYS[:, 1])  # the brightness column
    w = palette_weights(BRIGHT[0])
    ranked = [NAMES[i] for i in np.argsort(-w)]
    assert ranked == [NAMES[i] for i in np.argsort(-scores)]
    assert (ranked[0], ranked[-1]) == ("white", "blue")
    answer = w @ VALUES
    np.testing.assert_allclose(qkv.attention(BRIGHT, KEYS, VALUES).output[0], answer, rtol=1e-12)
    assert np.abs(VALUES - answer).max(axis=-1).min() > 0.1  # no entry holds it
    assert answer.min() > 0.4  # pale: every channel well above 0
    text = shown_lookup["soft_lookup.py:exercise_bright"]
    assert printed_weights(text) == [(n, pytest.approx(w[NAMES.index(n)], abs=5e-4)) for n in ranked]
    assert_printed(line_of(text, "answer:"), answer, 3)


@pytest.mark.claim("lookup-ex-factor")
def test_red_first_passes_the_threshold_at_the_stated_factor(shown_lookup):
    threshold = stated("lookup-ex-factor")[0]  # the exercise's given
    on_red = {f: palette_weights(f * WARM[0])[RED] for f in range(1, 100)}
    first = min(f for f, w in on_red.items() if w > threshold)
    assert (
        qkv.attention(WARM * first, KEYS, VALUES).weights[0, RED]
        > threshold
        >= qkv.attention(WARM * (first - 1), KEYS, VALUES).weights[0, RED]
    )
    check_prose("lookup-ex-factor", threshold, first)
    line = shown_lookup.line("soft_lookup.py:exercise_factor", "smallest whole factor")
    assert numbers(line) == [threshold, first]


@pytest.mark.claim("lookup-ex-never-pure")
def test_a_query_aimed_at_blue_never_gives_pure_blue(shown_lookup_depth):
    factor = stated("lookup-ex-never-pure")[0]
    at_blue = factor * KEYS[BLUE][None]
    w = palette_weights(at_blue[0])
    rest = np.delete(w, BLUE).sum()  # the weight not on blue
    assert rest > 0 and w[BLUE] == 1.0  # in float64, 1 - rest rounds to 1
    weights, answer = qkv.attention(at_blue, KEYS, VALUES)
    np.testing.assert_allclose(weights[0], w, rtol=1e-9)
    assert answer[0, 0] > 0 and answer[0, 0] == pytest.approx(w @ VALUES[:, 0], rel=1e-9)
    check_prose("lookup-ex-never-pure", factor, *sci(rest), w[BLUE])
    text = shown_lookup_depth["soft_lookup.py:exercise_blue"]
    printed = numbers(line_of(text, "weight on blue"))
    assert printed[0] == pytest.approx(w[BLUE], abs=5e-7)
    np.testing.assert_allclose(printed[1:], answer[0], rtol=1e-6)
    assert numbers(line_of(text, "weight left for the other three:")) == [0, float(f"{rest:.2g}")]
    assert line_of(text, "red channel above zero:") == "red channel above zero: True"


@pytest.mark.claim("lookup-ex-blue-underflow")
def test_a_long_enough_query_gives_exactly_blue_once_the_other_weights_underflow(shown_lookup_depth):
    long64, long32 = stated("lookup-ex-blue-underflow")[:2]
    for factor, dtype in [(long64, np.float64), (long32, np.float32)]:
        at_blue = factor * KEYS[BLUE]
        scores = KEYS @ at_blue / math.sqrt(2)  # exact enough: these are whole multiples
        # the exact weight of each other colour, in logs: score gap minus log of the sum
        log_rest = (
            np.delete(scores, BLUE)
            - scores[BLUE]
            - np.log1p(np.exp(np.delete(scores, BLUE) - scores[BLUE]).sum())
        )
        half_least = math.log(float(np.finfo(dtype).smallest_subnormal)) - math.log(2)
        assert (log_rest < half_least).all()  # every other weight rounds to 0 in this type
        weights, answer = qkv.attention(at_blue[None].astype(dtype), KEYS.astype(dtype), VALUES.astype(dtype))
        assert answer.dtype == dtype
        assert np.delete(weights[0], BLUE).tolist() == [0.0, 0.0, 0.0]
        assert answer[0].tolist() == [0.0, 0.0, 1.0]  # exactly blue
        line = shown_lookup_depth.line(
            "soft_lookup.py:exercise_blue", f"x{factor:g} in {np.dtype(dtype).name}"
        )
        assert line.endswith("exactly blue: True")
    # and in float64 at the page's own 64 times the answer is not yet blue (claim above)
    assert qkv.attention(64 * KEYS[BLUE][None], KEYS, VALUES).output[0, 0] > 0
    check_prose("lookup-ex-blue-underflow", long64, long32, 0, *answer[0])


# ---- 2. Where Q, K and V come from -----------------------------------------------------


@pytest.fixture(scope="module")
def shown_where(page_output):
    return page_output("where-qkv-come-from.md")


@pytest.fixture(scope="module")
def shown_where_depth(page_output):
    """Chapter 2's deep dive: widths that disagree, the key-bias exercise."""
    return page_output("where-qkv-come-from-in-depth.md")


@pytest.fixture(scope="module")
def random_toy():
    """The random toy of chapter 2: X, its projections with d_k = 8 and d_v = 4, Q, K, V."""
    x, p = toy.embeddings(), toy.projections(d_k=toy.D_K, d_v=toy.D_V)
    return (x, p, *qkv.project(x, p))


@pytest.mark.claim("proj-shapes")
def test_projection_shapes_follow_d_model_d_k_and_d_v(shown_where, random_toy):
    x, p, q, k, v = random_toy
    t = len(WORDS)
    assert (toy.D_MODEL, toy.D_K, toy.D_V) == (16, 8, 4)  # the widths the sentence names
    assert x.shape == (t, toy.D_MODEL)
    assert p.w_q.shape == p.w_k.shape == (toy.D_MODEL, toy.D_K) and p.w_v.shape == (toy.D_MODEL, toy.D_V)
    assert q.shape == k.shape == (t, toy.D_K) and v.shape == (t, toy.D_V)
    check_prose("proj-shapes", *x.shape, *p.w_q.shape, *p.w_v.shape, *q.shape, *v.shape)
    text = shown_where["where_qkv_come_from.py:project"]
    assert numbers(line_of(text, "X ")) == [t, toy.D_MODEL]
    assert numbers(line_of(text, "W_Q")) == [toy.D_MODEL, toy.D_K] * 2 + [toy.D_MODEL, toy.D_V]
    assert numbers(line_of(text, "Q ")) == [t, toy.D_K] * 2 + [t, toy.D_V]


@pytest.mark.claim("proj-three-vectors")
def test_one_embedding_gives_three_different_vectors(shown_where, random_toy):
    x, p, q, k, v = random_toy
    row = x[MILK]
    for projected, w in [(q, p.w_q), (k, p.w_k), (v, p.w_v)]:  # each is milk's row times its matrix
        np.testing.assert_allclose(projected[MILK], [row @ w[:, j] for j in range(w.shape[1])], rtol=1e-12)
    assert not np.allclose(q[MILK], k[MILK]) and v[MILK].shape != q[MILK].shape
    text = shown_where["where_qkv_come_from.py:same_word"]
    assert_printed(line_of(text, "embedding:"), row[:4], 2)
    assert_printed(line_of(text, "as query:"), q[MILK], 2)
    assert_printed(line_of(text, "as key:"), k[MILK], 2)
    assert_printed(line_of(text, "as value:"), v[MILK], 2)


@pytest.mark.claim("proj-param-count")
def test_the_three_matrices_hold_d_model_times_2_d_k_plus_d_v_numbers(shown_where, random_toy):
    p = random_toy[1]
    learned = p.w_q.size + p.w_k.size + p.w_v.size
    assert learned == p.d_model * (2 * p.d_k + p.d_v)
    check_prose("proj-param-count", p.d_model, p.d_k, p.d_k, p.d_v, learned)
    text = shown_where["where_qkv_come_from.py:parameters"]
    assert numbers(line_of(text, "learned numbers in W_Q, W_K, W_V:")) == [learned]
    assert numbers(line_of(text, "d_model * (2 d_k + d_v)"))[-1] == learned


@pytest.mark.claim("proj-attention-no-weights")
def test_attention_takes_only_its_inputs_and_holds_no_arrays(shown_where, random_toy):
    signature = inspect.signature(qkv.attention)
    assert list(signature.parameters) == ["q", "k", "v", "mask", "scale"]
    held = [name for name, value in vars(dot_product).items() if isinstance(value, np.ndarray)]
    assert held == []
    _, _, q, k, v = random_toy
    weights, output = reference_attention(q, k, v)  # the formula, and only it
    result = qkv.attention(q, k, v)
    np.testing.assert_allclose(result.weights, weights, rtol=1e-12)
    np.testing.assert_allclose(result.output, output, rtol=1e-12)
    assert (
        shown_where.line("where_qkv_come_from.py:parameters", "qkv.attention takes:")
        == f"qkv.attention takes: {signature}"
    )


@pytest.mark.claim("proj-dk-must-match")
def test_keys_of_another_width_are_refused_naming_both_shapes(shown_where_depth, random_toy):
    _, _, q, k, v = random_toy
    with pytest.raises(ValueError, match=r"share d_k.*\(6, 8\).*\(6, 5\)") as refused:
        qkv.attention(q, k[:, :5], v)
    # the page wraps the message over lines; the words are the same
    printed = shown_where_depth["where_qkv_come_from.py:dk_must_match"]
    assert printed.split() == f"ValueError: {refused.value}".split()
    assert printed.strip() == textwrap.fill(f"ValueError: {refused.value}", width=70)


@pytest.mark.claim("proj-dv-free")
@settings(deadline=None)  # timing is not what these tests check
@given(seeds, widths, widths)
def test_value_width_is_free_and_sets_the_output_width(seed, d_k, d_v):
    x = np.random.default_rng(seed).normal(size=(5, 6))
    weights, output = qkv.self_attention(x, random_projections(seed, 6, d_k, d_v))
    assert weights.shape == (5, 5)
    assert output.shape == (5, d_v)


@pytest.mark.claim("proj-dv-free")
def test_the_page_values_are_4_wide_beside_8_wide_keys_and_so_is_the_output(shown_where_depth, random_toy):
    x, p = random_toy[:2]
    output = qkv.self_attention(x, p).output
    assert output.shape == (len(WORDS), p.d_v) and p.d_v != p.d_k
    check_prose("proj-dv-free", p.d_v, p.d_k, output.shape[1])
    q_line = numbers(shown_where_depth.line("where_qkv_come_from.py:project", "Q "))
    assert q_line[1::2] == [8, 8, 4]  # the widths of Q, K and V as printed


@pytest.mark.claim("proj-key-bias-cancels")
@settings(max_examples=50, deadline=None)
@given(seeds, widths, st.integers(1, 8))
def test_a_bias_added_to_every_key_changes_no_weight(seed, d_k, t):
    rng = np.random.default_rng(seed)
    q, k, v = rng.normal(size=(t, d_k)), rng.normal(size=(t, d_k)), rng.normal(size=(t, 2))
    b = rng.normal(size=d_k)
    plain, shifted = qkv.attention(q, k, v).weights, qkv.attention(q, k + b, v).weights
    assert np.abs(shifted - plain).max() < stated("proj-key-bias-cancels")[0]


@pytest.fixture(scope="module")
def bias_changes():
    """How far one seeded bias, on the keys or on the queries, moves the weights of both toys."""
    changes = []
    for x, p in [
        (toy.embeddings(), toy.projections(toy.D_K, toy.D_V)),
        (toy.feature_embeddings(), toy.hand_built_projections()),
    ]:
        q, k, v = qkv.project(x, p)
        b = np.random.default_rng(2024).normal(size=p.d_k)
        plain = qkv.attention(q, k, v).weights
        changes.append(
            (
                np.abs(qkv.attention(q, k + b, v).weights - plain).max(),
                np.abs(qkv.attention(q + b, k, v).weights - plain).max(),
            )
        )
    return changes


@pytest.mark.claim("proj-key-bias-cancels")
def test_the_page_shows_the_key_bias_changing_nothing(shown_where_depth, bias_changes):
    (bound,) = stated("proj-key-bias-cancels")  # "below 10^-12": rounding, and only that
    check_prose("proj-key-bias-cancels", bound)
    assert bound <= 1e-10
    assert all(on_keys < bound for on_keys, _ in bias_changes)
    line = shown_where_depth.line("where_qkv_come_from.py:key_bias", "bias on the keys:")
    assert 0 <= numbers(line)[0] < bound


@pytest.mark.claim("proj-query-bias-matters")
def test_a_bias_on_the_queries_changes_the_weights(shown_where_depth, bias_changes):
    assert all(on_queries > 0.01 for _, on_queries in bias_changes)
    line = shown_where_depth.line("where_qkv_come_from.py:key_bias", "bias on the queries:")
    assert numbers(line)[0] > 0.01  # far above the keys' rounding-level change


# ---- 2. The hand-built toy (qkv.toy.feature_embeddings, hand_built_projections) -------


def nonzero_names(row, names):
    """The non-zero entries of ``row`` as words: ['liquid', '8'], or ['-'] if none."""
    return [token for n, x in zip(names, row, strict=True) if x for token in (n, f"{x:g}")] or ["-"]


@pytest.mark.claim("hand-roles")
def test_milks_three_vectors_look_for_a_verb_show_liquid_and_hand_over_dairy(shown_where, hand_built):
    q, k, v, _ = hand_built
    assert nonzero_names(q[MILK], toy.FEATURES) == ["verb", "4"]
    assert nonzero_names(k[MILK], toy.FEATURES) == ["liquid", "1"]
    assert nonzero_names(v[MILK], toy.VALUE_COLUMNS) == ["dairy", "1"]
    # queries and keys share one column per feature, and no key (nor query) shows "dairy"
    assert not k[:, toy.FEATURES.index("dairy")].any() and not q[:, toy.FEATURES.index("dairy")].any()
    text = shown_where["hand_built.py:roles"]
    for i, word in enumerate(WORDS):  # the table, row by row
        expected = [
            word,
            *nonzero_names(q[i], toy.FEATURES),
            *nonzero_names(k[i], toy.FEATURES),
            *nonzero_names(v[i], toy.VALUE_COLUMNS),
        ]
        # a vector's entries are printed 'person 4, liquid 8'
        assert line_of(text, f"{word} ").replace(",", " ").split() == expected
    assert text.count("dairy") == 1  # only milk's value


@pytest.fixture(scope="module")
def hand_weights_block(shown_where):
    return unnamed_block(shown_where, "drank's scaled scores:")


@pytest.mark.claim("hand-drank-finds-milk")
def test_drank_gives_milk_the_weight_its_hand_written_score_predicts(hand_weights_block, hand_built):
    q, k, _, result = hand_built
    scores = [4 / np.sqrt(8), 0, 8 / np.sqrt(8), 0, 0, 0]
    np.testing.assert_allclose(q[DRANK] @ k.T / np.sqrt(toy.D_K), scores, rtol=1e-12, atol=1e-15)
    expected = [DRANK_ON_SHE, DRANK_ON_OTHER, DRANK_ON_MILK] + [DRANK_ON_OTHER] * 3
    np.testing.assert_allclose(result.weights[DRANK], expected, rtol=1e-12)
    raw = q[DRANK] @ k.T
    liquid = toy.FEATURES.index("liquid")
    others = np.delete(scores, [SHE, MILK])
    assert (others == 0).all() and k[:, liquid].nonzero()[0].tolist() == [MILK]
    check_prose(
        "hand-drank-finds-milk",
        result.weights[DRANK, MILK],
        q[DRANK, liquid],
        raw[MILK],
        toy.D_K,
        scores[MILK],
        raw[SHE],
        toy.D_K,
        scores[SHE],
        others.max(),
    )
    assert_printed(line_of(hand_weights_block, "drank's scaled scores:"), scores, 2)
    assert_printed(line_of(hand_weights_block, "drank -> milk"), [DRANK_ON_MILK, DRANK_ON_SHE], 2)
    table = {
        ln.split()[0]: ln.split()[1:]
        for ln in hand_weights_block.splitlines()
        if ln.split() and ln.split()[0] in WORDS and len(ln.split()) == len(WORDS) + 1
    }
    assert_printed(" ".join(table["drank"]), expected, 2)
    for word, row in zip(WORDS, result.weights, strict=True):  # and every other row of the table
        assert_printed(" ".join(table[word]), row, 2)


@pytest.mark.claim("hand-drank-receives-dairy")
def test_what_drank_receives_is_mostly_dairy(hand_weights_block, hand_built):
    out = hand_built[3].output[DRANK]
    # each value hands over one column: she person, drank verb, milk dairy, cup container
    received = {
        "person": DRANK_ON_SHE,
        "verb": DRANK_ON_OTHER,
        "dairy": DRANK_ON_MILK,
        "container": DRANK_ON_OTHER,
    }
    np.testing.assert_allclose(out, [received[c] for c in toy.VALUE_COLUMNS], rtol=1e-12)
    assert toy.VALUE_COLUMNS[out.argmax()] == "dairy"
    check_prose("hand-drank-receives-dairy", out[toy.VALUE_COLUMNS.index("dairy")])
    printed = named_numbers(line_of(hand_weights_block, "drank's output:"))
    assert printed == {c: pytest.approx(x, abs=5e-3) for c, x in received.items()}
    assert max(printed, key=printed.get) == "dairy"


# ---- exercises of chapter 2 ----------------------------------------------------------------


@pytest.mark.claim("proj-ex-params")
def test_one_head_of_the_exercise_has_d_model_times_3_d_k_numbers(shown_where):
    d_head, d_model = stated("proj-ex-params")[:2]  # the exercise's givens, as the answer repeats them
    d_head, d_model = int(d_head), int(d_model)
    learned = 3 * d_model * d_head  # W_Q, W_K and W_V, each d_model x d_head
    check_prose("proj-ex-params", d_head, d_model, learned)
    text = shown_where["where_qkv_come_from.py:exercise_params"]
    assert numbers(line_of(text, "W_Q, W_K, W_V:")) == [d_model, d_head] * 3
    assert numbers(line_of(text, "learned numbers:")) == [learned]


@pytest.mark.claim("proj-ex-she-milk")
def test_one_entry_of_w_q_turns_she_towards_milk(shown_where):
    hand, f = toy.hand_built_projections(), toy.FEATURES.index
    w_q = hand.w_q.copy()
    w_q[f("person"), f("liquid")] = 8.0  # the one entry the solution names, at drank's strength
    row = qkv.self_attention(toy.feature_embeddings(), qkv.Projections(w_q, hand.w_k, hand.w_v)).weights[SHE]
    # she's scores are now 8/√8 on milk, 4/√8 on drank, 0 elsewhere: drank's scores, mirrored
    expected = {w: DRANK_ON_OTHER for w in WORDS} | {"milk": DRANK_ON_MILK, "drank": DRANK_ON_SHE}
    np.testing.assert_allclose(row, [expected[w] for w in WORDS], rtol=1e-12)
    before = qkv.self_attention(toy.feature_embeddings(), hand).weights
    assert row[MILK] == pytest.approx(before[DRANK, MILK], rel=1e-12)  # "exactly what drank gives it"
    assert WORDS[before[SHE].argmax()] == "drank"  # its old favourite
    line = shown_where.line("where_qkv_come_from.py:exercise_she", "she ->")
    printed = named_numbers(line.split("->", 1)[1])
    assert printed == {w: pytest.approx(x, abs=5e-3) for w, x in expected.items()}
    check_prose("proj-ex-she-milk", row[MILK], row[DRANK])


# ---- 3. What a key decides, what a value carries -------------------------------------


@pytest.fixture(scope="module")
def shown_kv(page_output):
    return page_output("keys-vs-values.md")


@pytest.fixture(scope="module")
def new_value(hand_built):
    """V with milk's value changed to hand over "container" instead of "dairy"."""
    v_new = hand_built[2].copy()
    v_new[MILK] = np.eye(toy.D_V)[toy.VALUE_COLUMNS.index("container")]
    return v_new


@pytest.fixture(scope="module")
def wiped_key(hand_built):
    """K with milk's key wiped, so it no longer shows "liquid"."""
    k_new = hand_built[1].copy()
    k_new[MILK] = 0
    return k_new


@pytest.mark.claim("kv-sep-value-keeps-weights")
@settings(max_examples=50, deadline=None)
@given(seeds, widths, widths, st.integers(1, 8))
def test_values_never_touch_the_weights(seed, d_k, d_v, t):
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(t, d_k)), rng.normal(size=(t, d_k))
    one, other = rng.normal(size=(t, d_v)), rng.normal(size=(t, d_v))
    np.testing.assert_array_equal(qkv.attention(q, k, one).weights, qkv.attention(q, k, other).weights)


@pytest.mark.claim("kv-sep-value-keeps-weights")
def test_flipping_milks_value_leaves_the_weights_bit_for_bit(shown_kv, hand_built, new_value):
    q, k, _, base = hand_built
    np.testing.assert_array_equal(qkv.attention(q, k, new_value).weights, base.weights)
    assert shown_kv.flag("keys_vs_values.py:change_value", "weights identical:")


@pytest.mark.claim("kv-sep-value-changes-output")
def test_a_new_value_for_milk_moves_every_row_by_its_weight_on_milk(shown_kv, hand_built, new_value):
    q, k, v, base = hand_built
    changed = qkv.attention(q, k, new_value).output
    # Only row `milk` of V changed; row i of the output moves by w[i, milk] times that change.
    expected = base.output + np.outer(base.weights[:, MILK], new_value[MILK] - v[MILK])
    np.testing.assert_allclose(changed, expected, rtol=1e-10, atol=1e-12)
    assert (np.abs(changed - base.output).max(axis=-1) > 0).all()  # every row reads milk a bit
    received = dict(zip(toy.VALUE_COLUMNS, changed[DRANK], strict=True))
    assert received["dairy"] == 0
    assert received["container"] - base.output[DRANK, toy.VALUE_COLUMNS.index("container")] == pytest.approx(
        DRANK_ON_MILK, rel=1e-12
    )
    before = named_numbers(shown_kv.line("keys_vs_values.py:setup", "drank receives:"))
    after = named_numbers(shown_kv.line("keys_vs_values.py:change_value", "drank receives:"))
    assert after == {c: pytest.approx(x, abs=5e-3) for c, x in received.items()}
    assert before == {
        c: pytest.approx(x, abs=5e-3) for c, x in zip(toy.VALUE_COLUMNS, base.output[DRANK], strict=True)
    }
    dairy, container = (toy.VALUE_COLUMNS.index(c) for c in ("dairy", "container"))
    check_prose(
        "kv-sep-value-changes-output",
        base.output[DRANK, dairy] - changed[DRANK, dairy],
        changed[DRANK, container] - base.output[DRANK, container],
    )


@pytest.mark.claim("kv-sep-key-moves-weights")
def test_wiping_milks_key_drops_drank_weight_to_that_of_an_unrelated_word(shown_kv, hand_built, wiped_key):
    q, _, v, base = hand_built
    after = qkv.attention(q, wiped_key, v)
    # drank's scores are now 4/√8 for she and 0 for the five others: softmax written out
    on_milk = 1 / (E_4 + 5)
    assert after.weights[DRANK, MILK] == pytest.approx(on_milk, rel=1e-12)
    assert after.weights[DRANK, MILK] == pytest.approx(after.weights[DRANK, FROM], rel=1e-12)
    assert base.weights[DRANK, MILK] == pytest.approx(DRANK_ON_MILK, rel=1e-12)
    check_prose("kv-sep-key-moves-weights", base.weights[DRANK, MILK], on_milk)
    assert_printed(
        shown_kv.line("keys_vs_values.py:change_key", "drank -> milk:"), [DRANK_ON_MILK, on_milk], 2
    )
    # milk's value is untouched and still reaches drank, in proportion to the low weight
    received = named_numbers(shown_kv.line("keys_vs_values.py:change_key", "drank receives:"))
    assert received["dairy"] == pytest.approx(on_milk, abs=5e-3)
    assert received == {
        c: pytest.approx(x, abs=5e-3) for c, x in zip(toy.VALUE_COLUMNS, after.output[DRANK], strict=True)
    }


@pytest.mark.claim("kv-sep-key-changes-asking-rows")
def test_a_wiped_key_changes_only_the_rows_whose_query_asked_for_it(shown_kv, hand_built, wiped_key):
    q, _, v, base = hand_built
    after = qkv.attention(q, wiped_key, v).weights
    changed = [
        w for w, row_a, row_b in zip(WORDS, after, base.weights, strict=True) if not np.allclose(row_a, row_b)
    ]
    liquid = toy.FEATURES.index("liquid")
    askers = [w for w, query in zip(WORDS, q, strict=True) if query[liquid] != 0]
    assert changed == askers == ["drank", "cup"]
    others = [i for i, w in enumerate(WORDS) if w not in askers]
    on_milk_before, on_milk_after = q[others] @ hand_built[1][MILK], q[others] @ wiped_key[MILK]
    check_prose("kv-sep-key-changes-asking-rows", np.abs([*on_milk_before, *on_milk_after]).max())
    assert (
        shown_kv.line("keys_vs_values.py:change_key", "rows of weights that changed:")
        == f"rows of weights that changed: {askers}"
    )


@pytest.mark.claim("kv-sep-values-lack-liquid")
def test_no_value_of_the_toy_says_liquid(hand_built):
    v = hand_built[2]
    assert "liquid" in toy.FEATURES and "liquid" not in toy.VALUE_COLUMNS
    assert list(toy.VALUE_COLUMNS) == ["person", "verb", "dairy", "container"]
    assert v.shape[1] == len(toy.VALUE_COLUMNS)  # a value has these columns and no other


@pytest.mark.claim("kv-sep-ex-double")
def test_doubling_milks_value_doubles_the_dairy_and_keeps_the_weight(shown_kv, hand_built):
    q, k, v, base = hand_built
    v_twice = v.copy()
    v_twice[MILK] *= 2
    after = qkv.attention(q, k, v_twice)
    np.testing.assert_array_equal(after.weights, base.weights)
    dairy = toy.VALUE_COLUMNS.index("dairy")
    assert after.output[DRANK, dairy] == pytest.approx(2 * base.output[DRANK, dairy], rel=1e-12)
    check_prose("kv-sep-ex-double", after.weights[DRANK, MILK], after.output[DRANK, dairy])
    section = "keys_vs_values.py:exercise_double"
    assert_printed(shown_kv.line(section, "drank -> milk:"), [DRANK_ON_MILK] * 2, 2)
    assert named_numbers(shown_kv.line(section, "drank receives:")) == {
        c: pytest.approx(x, abs=5e-3) for c, x in zip(toy.VALUE_COLUMNS, after.output[DRANK], strict=True)
    }


@pytest.mark.claim("kv-sep-ex-cup-liquid")
def test_a_second_liquid_key_splits_drank_between_milk_and_cup(shown_kv, hand_built):
    q, k, v, _ = hand_built
    k_cup = k.copy()
    k_cup[CUP, toy.FEATURES.index("liquid")] = 1
    after = qkv.attention(q, k_cup, v)
    # drank's scores: 8/√8 on milk and cup, 4/√8 on she, 0 on the other three
    share = E_8 / (2 * E_8 + E_4 + 3)
    np.testing.assert_allclose(after.weights[DRANK, [MILK, CUP]], [share, share], rtol=1e-12)
    dairy, container = (toy.VALUE_COLUMNS.index(c) for c in ("dairy", "container"))
    np.testing.assert_array_equal(v[MILK], np.eye(4)[dairy])  # milk hands over dairy alone,
    np.testing.assert_array_equal(v[CUP], np.eye(4)[container])  # cup container alone
    check_prose(
        "kv-sep-ex-cup-liquid",
        after.weights[DRANK, MILK],
        after.output[DRANK, dairy],
        after.output[DRANK, container],
    )
    section = "keys_vs_values.py:exercise_cup"
    assert named_numbers(shown_kv.line(section, "drank reads:")) == {
        w: pytest.approx(x, abs=5e-3) for w, x in zip(WORDS, after.weights[DRANK], strict=True)
    }
    assert named_numbers(shown_kv.line(section, "drank receives:")) == {
        c: pytest.approx(x, abs=5e-3) for c, x in zip(toy.VALUE_COLUMNS, after.output[DRANK], strict=True)
    }


# ---- 4. Only two products matter: query-key and value-output -------------------------


@pytest.fixture(scope="module")
def shown_three(page_output):
    return page_output("why-three-projections.md")


@pytest.fixture(scope="module")
def shown_three_deep(page_output):
    """Chapter 4's deep dive: the random toy's one-way scores, self-scores, what breaks the
    tied symmetry, and the widths."""
    return page_output("why-three-projections-in-depth.md")


@pytest.fixture(scope="module")
def tie():
    """Chapter 4's random toy: X and separate projections with d_k = 8 and, as the page says,
    values 8 wide; the scores and weights separate, and with W_Q = W_K."""
    x, p = toy.embeddings(), toy.projections(d_k=toy.D_K, d_v=8)
    qk = qkv.Projections(p.w_k, p.w_k, p.w_v)
    return {
        "x": x,
        "p": p,
        "S": scores_of(x, p),
        "W": qkv.self_attention(x, p).weights,
        "S_tied": scores_of(x, qk),
        "W_tied": qkv.self_attention(x, qk).weights,
    }


def scores_of(x, p):
    q, k, _ = qkv.project(x, p)
    return q @ k.T / np.sqrt(p.d_k)


def pair_lines(text):
    """The printed 'milk -> from' and 'from -> milk' lines: [score, weight] for each."""
    return numbers(line_of(text, "milk -> from:")), numbers(line_of(text, "from -> milk:"))


def invertible(seed, n):
    """A random n x n matrix, checked to be well conditioned enough to invert."""
    m = np.random.default_rng(seed).normal(size=(n, n))
    assert np.linalg.cond(m) < 1e6
    return m


@pytest.mark.claim("three-products-scores")
@settings(max_examples=30, deadline=None)
@given(seeds, st.integers(1, 8), st.integers(1, 8))
def test_any_invertible_a_between_w_q_and_w_k_leaves_the_scores(seed, d_k, t):
    rng = np.random.default_rng(seed)
    x, p = rng.normal(size=(t, 6)), random_projections(seed, 6, d_k, 2)
    a = rng.normal(size=(d_k, d_k)) + 3 * np.eye(d_k)  # invertible, and not near singular
    moved = qkv.Projections(p.w_q @ a, p.w_k @ np.linalg.inv(a).T, p.w_v)
    s = scores_of(x, p)
    np.testing.assert_allclose(scores_of(x, moved), s, rtol=1e-9, atol=1e-9 * max(1, np.abs(s).max()))


@pytest.mark.claim("three-products-scores")
def test_the_page_moves_w_q_far_and_the_scores_not_at_all(shown_three, tie):
    p = tie["p"]
    a = np.random.default_rng(1).normal(size=(p.d_k, p.d_k))  # the snippet's A (seed 1)
    moved = qkv.Projections(p.w_q @ a, p.w_k @ np.linalg.inv(a).T, p.w_v)
    change = np.abs(moved.w_q - p.w_q).max()
    assert change > 1
    assert np.abs(moved.w_q @ moved.w_k.T - p.w_q @ p.w_k.T).max() < 1e-12
    assert np.abs(scores_of(tie["x"], moved) - tie["S"]).max() < 1e-12
    check_prose("three-products-scores", change)
    block = unnamed_block(shown_three, "largest change in W_Q:")  # runs setup, then products
    assert_printed(line_of(block, "largest change in W_Q:"), change, 2)
    assert numbers(line_of(block, "largest change in a score:"))[0] < 1e-12


@pytest.mark.claim("three-products-output")
def test_w_v_b_with_b_inverse_w_o_adds_the_same_to_the_stream(shown_three, tie):
    x, p = tie["x"], tie["p"]
    for seed in range(3):
        b, w_o = invertible(seed, p.d_v), np.random.default_rng(seed + 10).normal(size=(p.d_v, 16))
        added = qkv.self_attention(x, p).output @ w_o
        moved = qkv.self_attention(x, qkv.Projections(p.w_q, p.w_k, p.w_v @ b)).output
        np.testing.assert_allclose(moved @ np.linalg.inv(b) @ w_o, added, rtol=1e-9, atol=1e-10)
        assert np.abs(p.w_v @ b - p.w_v).max() > 0.5  # W_V itself moved
    check_prose("three-products-output", ...)  # the -1 of B^{-1} is notation
    line = line_of(
        unnamed_block(shown_three, "largest change in W_Q:"), "largest change in what the head adds:"
    )
    assert numbers(line)[0] < 1e-12


@pytest.mark.claim("three-hand-one-way")
def test_from_looks_for_cup_but_cup_does_not_look_for_from(shown_three, hand_built):
    q, k, _, _ = hand_built
    raw = q @ k.T
    s = raw / np.sqrt(toy.D_K)
    w = qkv.softmax(s)
    assert s[FROM, CUP] == pytest.approx(8 / np.sqrt(8), rel=1e-12) and s[CUP, FROM] == 0
    # from's row: 8/√8 on cup, 0 on the other five; cup's: 4/√8 on milk, 0 on the other five
    from_cup, cup_from = E_8 / (E_8 + 5), 1 / (E_4 + 5)
    assert w[FROM, CUP] == pytest.approx(from_cup, rel=1e-12)
    assert w[CUP, FROM] == pytest.approx(cup_from, rel=1e-12)
    check_prose("three-hand-one-way", w[FROM, CUP], w[CUP, FROM], raw[FROM, CUP], toy.D_K, s[CUP, FROM])
    text = shown_three["hand_built.py:one_way"]
    assert_printed(line_of(text, "from -> cup"), [8 / np.sqrt(8), from_cup], 2)
    assert_printed(line_of(text, "cup -> from"), [0, cup_from], 2)


@pytest.fixture(scope="module")
def separate_block(shown_three_deep):
    # the deep dive's first block runs the setup, then the asymmetric section
    return unnamed_block(shown_three_deep, "largest |S - Sᵀ|:")


@pytest.mark.claim("three-separate-asymmetric")
def test_milk_and_from_score_each_other_with_opposite_signs(separate_block, tie):
    s = tie["S"]
    assert s[MILK, FROM] > 0 > s[FROM, MILK]
    milk_from, from_milk = pair_lines(separate_block)
    assert milk_from[0] == pytest.approx(s[MILK, FROM], abs=5e-4) and milk_from[0] > 0
    assert from_milk[0] == pytest.approx(s[FROM, MILK], abs=5e-4) and from_milk[0] < 0
    assert_printed(line_of(separate_block, "largest |S - Sᵀ|:"), np.abs(s - s.T).max(), 3)


@pytest.mark.claim("three-separate-weights-asymmetric")
def test_milk_gives_from_more_than_twice_the_weight_from_gives_milk(separate_block, tie):
    w = tie["W"]
    assert w[MILK, FROM] > 2 * w[FROM, MILK]
    milk_from, from_milk = pair_lines(separate_block)
    assert (milk_from[1], from_milk[1]) == (
        pytest.approx(w[MILK, FROM], abs=5e-4),
        pytest.approx(w[FROM, MILK], abs=5e-4),
    )
    assert milk_from[1] > 2 * from_milk[1]


@pytest.mark.claim("three-tied-scores-symmetric")
@settings(max_examples=50, deadline=None)
@given(seeds, widths, st.integers(1, 10))
def test_tying_w_q_to_w_k_makes_every_score_matrix_symmetric(seed, d_k, t):
    x, tied = random_tied_case(seed, d_k, t)
    s = scores_of(x, tied)
    assert np.abs(s - s.T).max() <= 1e-12 * max(1.0, np.abs(s).max())


@pytest.mark.claim("three-tied-scores-symmetric")
def test_the_page_tied_score_matrix_is_symmetric(shown_three, tie):
    assert np.abs(tie["S_tied"] - tie["S_tied"].T).max() < 1e-12
    assert np.abs(tie["S"] - tie["S"].T).max() > 1.0  # and the untied one is far from it
    line = shown_three.line("tie_query_key.py:symmetric", "largest |S - Sᵀ|:")
    assert 0 <= numbers(line)[0] < 1e-12


@pytest.mark.claim("three-tied-weights-not-symmetric")
def test_tied_scores_are_equal_but_the_weights_are_not(shown_three, tie):
    s, w = tie["S_tied"], tie["W_tied"]
    assert s[MILK, FROM] == pytest.approx(s[FROM, MILK], abs=1e-12)
    assert w[MILK, FROM] > 10 * w[FROM, MILK]
    milk_from, from_milk = pair_lines(shown_three["tie_query_key.py:symmetric"])
    np.testing.assert_allclose(
        [milk_from, from_milk],
        [[s[MILK, FROM], w[MILK, FROM]], [s[FROM, MILK], w[FROM, MILK]]],
        rtol=0,
        atol=5e-4,
    )
    assert milk_from[0] == from_milk[0]  # the same score both ways, as printed


@pytest.mark.claim("three-tied-row-total-ratio")
def test_tied_the_weight_ratio_is_the_ratio_of_row_totals(shown_three, tie):
    s, w = tie["S_tied"], tie["W_tied"]
    totals = np.exp(s).sum(axis=-1)  # Z_i, written out here
    assert totals[FROM] > 10 * totals[MILK]
    # equal scores both ways, so w[milk, from] / w[from, milk] = Z_from / Z_milk
    np.testing.assert_allclose(w[MILK, FROM] / w[FROM, MILK], totals[FROM] / totals[MILK], rtol=1e-9)
    line = shown_three.line("tie_query_key.py:symmetric", "row totals:")
    assert_printed(line, [totals[MILK], totals[FROM]], 1)


@pytest.mark.claim("three-tied-row-totals")
@settings(max_examples=50, deadline=None)
@given(seeds, widths, st.integers(1, 10))
def test_tied_weights_are_symmetric_once_each_row_is_multiplied_by_its_total(seed, d_k, t):
    x, tied = random_tied_case(seed, d_k, t)
    totals = np.exp(scores_of(x, tied)).sum(axis=-1, keepdims=True)  # Z_i
    unnormalised = qkv.self_attention(x, tied).weights * totals  # w_ij Z_i = exp(s_ij)
    np.testing.assert_allclose(unnormalised, unnormalised.T, rtol=1e-9)


@pytest.mark.claim("three-tied-self-score")
@settings(max_examples=50, deadline=None)
@given(seeds, widths, st.integers(1, 10))
def test_tied_a_word_never_scores_itself_below_zero(seed, d_k, t):
    x, tied = random_tied_case(seed, d_k, t)
    assert (np.diag(scores_of(x, tied)) >= 0).all()


@pytest.mark.claim("three-tied-self-score")
def test_separately_every_word_here_scores_itself_below_zero(shown_three_deep, tie):
    separate, tied = np.diag(tie["S"]), np.diag(tie["S_tied"])
    assert (separate < 0).all() and (tied >= 0).all()
    text = shown_three_deep["tie_query_key.py:self_score"]
    # each line: the diagonal, then "top: N of 6"
    assert_printed(line_of(text, "separate").split("top:")[0], separate, 2)
    assert_printed(line_of(text, "tied").split("top:")[0], tied, 2)
    assert all(x < 0 for x in numbers(line_of(text, "separate").split("top:")[0]))


@pytest.mark.claim("three-tied-self-top")
def test_tied_every_word_here_scores_itself_highest_and_separately_none_does(shown_three_deep, tie):
    on_itself = np.arange(len(WORDS))
    assert (tie["S_tied"].argmax(axis=-1) == on_itself).all()
    assert (tie["S"].argmax(axis=-1) != on_itself).all()
    text = shown_three_deep["tie_query_key.py:self_score"]
    assert line_of(text, "separate").endswith(f"top: 0 of {len(WORDS)}")
    assert line_of(text, "tied").endswith(f"top: {len(WORDS)} of {len(WORDS)}")


@pytest.mark.claim("three-tied-rope-symmetric")
@settings(max_examples=30, deadline=None)
@given(seeds, st.integers(1, 6).map(lambda n: 2 * n), st.integers(1, 10))
def test_rope_on_tied_queries_and_keys_keeps_the_scores_symmetric(seed, d_k, t):
    x, tied = random_tied_case(seed, d_k, t)
    q, k, _ = qkv.project(x, tied)
    turned_q, turned_k = qkv.rope(q), qkv.rope(k)
    np.testing.assert_array_equal(turned_q, turned_k)  # a query is still its key
    s = turned_q @ turned_k.T
    assert np.abs(s - s.T).max() <= 1e-12 * max(1.0, np.abs(s).max())
    assert not np.allclose(turned_k, k) or t == 1  # and RoPE did turn them


@pytest.mark.claim("three-tied-rope-symmetric")
def test_the_page_shows_tied_rope_scores_symmetric(shown_three_deep):
    check_prose("three-tied-rope-symmetric", ...)  # "chapter 9" is a label
    line = shown_three_deep.line("tie_query_key.py:what_breaks", "tied, turned by RoPE:")
    assert numbers(line)[0] < 1e-12


@pytest.mark.claim("three-tied-bias-asymmetric")
def test_a_query_bias_breaks_the_tied_symmetry(shown_three_deep, tie):
    k = tie["x"] @ tie["p"].w_k
    b = np.random.default_rng(2).normal(size=k.shape[1])  # the snippet's bias (seed 2)
    s = (k + b) @ k.T  # s_ij = k_i·k_j + b·k_j: the second term depends on j alone
    asymmetry = np.abs(s - s.T).max()
    np.testing.assert_allclose(s - s.T, (k @ b)[None, :] - (k @ b)[:, None], atol=1e-12)
    check_prose("three-tied-bias-asymmetric", asymmetry)
    assert_printed(
        shown_three_deep.line("tie_query_key.py:what_breaks", "tied, with a query bias:"), asymmetry, 2
    )


@pytest.mark.claim("three-tied-causal")
def test_a_causal_mask_gives_tied_weights_in_one_direction_only(tie):
    x, p = tie["x"], tie["p"]
    tied = qkv.Projections(p.w_k, p.w_k, p.w_v)
    w = qkv.self_attention(x, tied, mask=qkv.causal_mask(len(WORDS))).weights
    later, earlier = np.tril_indices(len(WORDS), k=-1), np.triu_indices(len(WORDS), k=1)
    assert (w[later] > 0).all() and (w[earlier] == 0).all()


@pytest.fixture(scope="module")
def tied_kv(hand_built):
    """The hand-built toy, separate and with W_V = W_K."""
    hand = toy.hand_built_projections()
    tied = qkv.Projections(hand.w_q, hand.w_k, hand.w_k)
    return hand_built[3], qkv.self_attention(toy.feature_embeddings(), tied)


@pytest.mark.claim("three-tie-kv-weights-unchanged")
def test_tying_w_v_to_w_k_leaves_the_weights_bit_for_bit(shown_three, tied_kv):
    separate, tied = tied_kv
    np.testing.assert_array_equal(tied.weights, separate.weights)
    check_prose("three-tie-kv-weights-unchanged", ...)  # "chapter 3" is a label
    assert shown_three.flag("tie_query_key.py:tie_kv", "weights identical:")


@pytest.mark.claim("three-tie-kv-output-changes")
def test_tying_w_v_to_w_k_hands_over_liquid_and_no_dairy(shown_three, hand_built, tied_kv):
    separate, tied = tied_kv
    k = hand_built[1]
    np.testing.assert_allclose(tied.output, separate.weights @ k, rtol=1e-12)  # a blend of keys
    liquid, dairy = toy.FEATURES.index("liquid"), toy.FEATURES.index("dairy")
    assert liquid == int(np.argmax(hand_built[0][DRANK]))  # what drank's query asks for
    assert not k[:, dairy].any() and not tied.output[:, dairy].any()
    assert separate.output[:, toy.VALUE_COLUMNS.index("dairy")].max() > 0.5  # it was handed over
    check_prose("three-tie-kv-output-changes", tied.output[DRANK, liquid])
    section = "tie_query_key.py:tie_kv"
    shown = named_numbers(shown_three.line(section, "drank receives, W_V = W_K:"))
    assert shown == {
        f: pytest.approx(x, abs=5e-3)
        for f, x in zip(toy.FEATURES, tied.output[DRANK], strict=True)
        if abs(x) >= 0.005
    }
    assert numbers(shown_three.line(section, "dairy received by any word"))[0] == 0


@pytest.mark.claim("three-dk-dv-shapes")
@settings(deadline=None)  # timing is not what these tests check
@given(st.integers(1, 64), st.integers(1, 64))
def test_weights_stay_t_by_t_whatever_d_k_and_d_v(d_k, d_v):
    t = len(WORDS)
    weights, output = qkv.self_attention(toy.embeddings(), toy.projections(d_k, d_v))
    assert weights.shape == (t, t)
    assert output.shape == (t, d_v)


@pytest.fixture(scope="module")
def width_lines(shown_three_deep):
    lines = [ln for ln in shown_three_deep["tie_query_key.py:dk_dv"].splitlines() if ln.startswith("d_k=")]
    assert len(lines) >= 3
    return [numbers(ln) for ln in lines]  # d_k, d_v, weights shape, output shape, rank


@pytest.mark.claim("three-dk-dv-shapes")
def test_the_page_shows_t_by_t_weights_for_every_width_it_tries(width_lines):
    t = len(WORDS)
    check_prose("three-dk-dv-shapes", t, t, t)
    for d_k, d_v, *shapes, _ in width_lines:
        weights, output = qkv.self_attention(toy.embeddings(), toy.projections(int(d_k), int(d_v)))
        assert shapes == [*weights.shape, *output.shape] == [t, t, t, d_v]


@pytest.mark.claim("three-dk-rank")
def test_the_rank_of_w_q_w_k_is_d_k_up_to_d_model(width_lines):
    for d_k in range(1, 2 * toy.D_MODEL + 1):
        p = toy.projections(d_k, 2)
        assert np.linalg.matrix_rank(p.w_q @ p.w_k.T) == min(d_k, toy.D_MODEL)
    check_prose("three-dk-rank", toy.D_MODEL, toy.D_MODEL, toy.D_MODEL)
    assert any(d_k > toy.D_MODEL for d_k, *_ in width_lines)  # the page shows the ceiling
    for d_k, *_, rank in width_lines:
        assert rank == min(d_k, toy.D_MODEL)


@pytest.mark.claim("three-dk-cost")
@settings(deadline=None)  # timing is not what these tests check
@given(st.integers(1, 50), st.integers(1, 50), st.integers(1, 128), st.integers(1, 128))
def test_each_extra_key_dimension_costs_one_multiply_add_per_score(t_q, t_k, d_k, d_v):
    extra = qkv.attention_flops(t_q, t_k, d_k + 1, d_v) - qkv.attention_flops(t_q, t_k, d_k, d_v)
    assert extra == 2 * t_q * t_k  # one multiply-add (2 flops) for each of the t_q x t_k scores
    counted = [attention_product_flops(t_q, t_k, d, d_v) for d in (d_k, d_k + 1)]
    assert counted[1] - counted[0] == extra  # on the arrays attention computes


@pytest.mark.claim("three-head-sizes")
def test_every_recorded_published_model_uses_heads_of_64_or_128():
    # qkv.MODELS is checked field by field against the published configs in
    # test_kv_cache_in_depth.py; here only the head widths matter.
    assert qkv.MODELS  # their number and fields: test_kv_cache_in_depth.py
    sizes = sorted({m.d_head for m in qkv.MODELS})
    check_prose("three-head-sizes", *sizes)


@pytest.mark.claim("three-gemma-head-widths")
def test_gemma_7b_and_gemma_2_9b_have_heads_of_256_and_gemma_2_27b_of_128(page_output):
    # Gemma 7B: the FAQ's long answers print its W_Q as d_model × (16 heads × d_head), from
    # its report
    gemma7 = next(
        line
        for line in page_output("faq-long-answers.md")["faq.py:weight_shapes"].splitlines()
        if line.startswith("Gemma 7B")
    )
    gemma7_head = int(re.search(r"W_Q \d+x(\d+)", gemma7).group(1)) // 16  # 16 query heads
    windowed = {m.name: m.d_head for m in qkv.WINDOWED_MODELS}  # checked against their configs
    assert gemma7_head == windowed["Gemma 2 9B"] > max(m.d_head for m in qkv.MODELS)  # "wider"
    # ...: the "2" of "Gemma 2", a name
    check_prose("three-gemma-head-widths", ..., gemma7_head, ..., windowed["Gemma 2 27B"])


@pytest.mark.claim("three-ex-scale")
def test_balanced_factors_leave_the_scores_and_one_factor_scales_them(shown_three, tie):
    factor = stated("three-ex-scale")[0]  # the exercise's given
    x, p, s = tie["x"], tie["p"], tie["S"]
    balanced = qkv.Projections(factor * p.w_q, p.w_k / factor, p.w_v)
    only_q = qkv.Projections(factor * p.w_q, p.w_k, p.w_v)
    assert np.abs(scores_of(x, balanced) - s).max() < 1e-12
    ratio = scores_of(x, only_q) / s
    np.testing.assert_allclose(ratio, factor, rtol=1e-12)
    check_prose("three-ex-scale", factor, float(np.median(ratio)), ...)  # then "chapter 1"
    section = "tie_query_key.py:exercise_scale"
    assert numbers(shown_three.line(section, "W_Q x 3, W_K / 3:"))[-1] < 1e-12
    assert numbers(shown_three.line(section, "W_Q x 3 alone:"))[-1] == factor


@pytest.mark.claim("three-ex-rank")
def test_the_toy_product_has_rank_d_k_and_as_many_numbers_as_its_factors(shown_three, tie):
    p = tie["p"]
    product = p.w_q @ p.w_k.T
    rank = np.linalg.matrix_rank(product)
    assert rank == p.d_k < p.d_model
    assert 2 * p.d_k == p.d_model  # "because d_k is half of d_model here"
    assert p.w_q.size + p.w_k.size == product.size
    check_prose("three-ex-rank", rank, product.size)
    section = "tie_query_key.py:exercise_rank"
    assert numbers(shown_three.line(section, "W_Q W_Kᵀ:")) == [p.d_model, p.d_model, rank]
    assert numbers(shown_three.line(section, "numbers in W_Q and W_K:")) == [p.w_q.size + p.w_k.size]
    assert numbers(shown_three.line(section, "numbers in the product:")) == [product.size]


@pytest.mark.claim("three-ex-rank-smollm2")
def test_smollm2s_two_thin_factors_hold_fewer_numbers_than_their_product():
    # SmolLM2's sizes from qkv's record of it (checked against the model file in
    # tests/fast/test_smollm2.py), not from the sentence
    m = SMOLLM2_135M
    d_model, d_k = m.n_heads * m.d_head, m.d_head
    factors, product = 2 * d_model * d_k, d_model * d_model  # W_Q and W_K; W_Q W_Kᵀ
    assert factors < product
    check_prose("three-ex-rank-smollm2", d_model, d_k, factors, product)


@pytest.mark.claim("lookup-terms-entropy")
def test_entropy_is_zero_for_one_key_log_t_when_even_and_qkv_computes_the_formula():
    rng = np.random.default_rng(0)
    for t in (2, 4, 6, 64):
        rows = qkv.softmax(rng.normal(size=(5, t)) * 3)
        by_hand = -(rows * np.log(rows)).sum(axis=-1)
        np.testing.assert_allclose(qkv.entropy(rows), by_hand, rtol=1e-12)
        assert (qkv.entropy(rows) < np.log(t)).all()  # ln T is the largest value
        np.testing.assert_allclose(qkv.entropy(np.full(t, 1 / t)), np.log(t), rtol=1e-12)
        one_hot = np.eye(t)[0]
        assert qkv.entropy(one_hot) == 0.0  # 0 ln 0 counts as 0
    # sharpening lowers it: the warm query of the page, at growing factors
    h = [float(qkv.entropy(qkv.attention(f * WARM, KEYS, VALUES).weights)[0]) for f in (1, 4, 16, 64)]
    assert h == sorted(h, reverse=True)
    check_prose("lookup-terms-entropy", qkv.entropy(np.eye(4)[0]))


@pytest.mark.claim("lookup-terms-nats")
def test_a_nat_is_one_over_ln_2_bits():
    w = qkv.softmax(np.random.default_rng(1).normal(size=8))
    in_nats = float(qkv.entropy(w))
    in_bits = float(-(w * np.log2(w)).sum())
    assert in_bits == pytest.approx(in_nats / np.log(2), rel=1e-12)  # bits per nat: 1/ln 2
    check_prose("lookup-terms-nats", 1, 2, 1 / np.log(2))


@pytest.mark.claim("kv-sep-terms-loss-kl")
def test_next_token_loss_and_kl_divergence_are_the_formulas_of_the_terms_box():
    from qkv.lab import interventions

    rng = np.random.default_rng(2)
    z, z_edited = rng.normal(size=(2, 7, 50)) * 2  # 7 positions, a vocabulary of 50
    came_next = rng.integers(0, 50, size=7)
    # loss: -ln p(next), checked against PyTorch's cross-entropy (mean over positions)
    loss = interventions.next_token_loss(z, came_next)
    torch_loss = torch.nn.functional.cross_entropy(torch.from_numpy(z), torch.from_numpy(came_next))
    assert loss.mean() == pytest.approx(float(torch_loss), rel=1e-12)
    certain = np.where(np.arange(50) == 3, 60.0, 0.0)  # nearly all mass on token 3
    assert interventions.next_token_loss(certain, 3) < 1e-20
    # KL(p || q) = sum p ln(p / q), checked against PyTorch's kl_div
    kl = interventions.kl_divergence(z, z_edited)
    log_p = torch.log_softmax(torch.from_numpy(z), -1)
    log_q = torch.log_softmax(torch.from_numpy(z_edited), -1)
    torch_kl = torch.nn.functional.kl_div(log_q, log_p, reduction="none", log_target=True).sum(-1)
    np.testing.assert_allclose(kl, torch_kl.numpy(), rtol=1e-10)
    assert (kl > 0).all()
    np.testing.assert_allclose(interventions.kl_divergence(z, z), 0.0, atol=1e-12)
    check_prose("kv-sep-terms-loss-kl")
