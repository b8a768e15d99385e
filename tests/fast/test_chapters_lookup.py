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
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import attention_product_flops, numbers

import qkv
from qkv import dot_product, toy

seeds = st.integers(0, 2**32 - 1)
widths = st.integers(1, 12)
WORDS = toy.SENTENCE
DRANK, MILK, FROM, CUP, SHE = (WORDS.index(w) for w in ("drank", "milk", "from", "cup", "she"))


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
    np.testing.assert_allclose(numbers(text), np.ravel(expected), rtol=0,
                               atol=0.5 * 10.0**-decimals + 1e-9)


def named_numbers(text):
    """'she 0.16, drank 0.04, ...' (after a label and a colon) as {'she': 0.16, ...}."""
    pairs = [item.split() for item in text.split(":", 1)[-1].split(",")]
    return {name: float(value) for name, value in pairs}


def unnamed_block(shown, marker):
    """What a block that runs several snippet sections prints, found by one printed line."""
    found = [b.text for b in shown.blocks if b.section is None
             and any(ln.strip().startswith(marker) for ln in b.text.splitlines())]
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
    assert_printed(shown_home.line("first_attention.py:attend", "row sums:"), [1.0] * len(WORDS), 6)


@pytest.mark.claim("home-shapes")
def test_home_example_gives_one_row_per_word_and_d_v_columns(shown_home):
    p, t = toy.hand_built_projections(), len(WORDS)
    assert (p.d_k, p.d_v) == (8, 4)  # as the sentence says: queries and keys 8, values 4
    weights, output = qkv.self_attention(toy.feature_embeddings(), p)
    assert weights.shape == (t, t) and output.shape == (t, p.d_v)
    assert shown_home.line("first_attention.py:attend", "weights:") == \
        f"weights: {(t, t)}   output: {(t, p.d_v)}"


@pytest.mark.claim("home-is-the-formula")
def test_home_example_is_softmax_of_scaled_scores_times_values(shown_home, hand_built):
    q, k, v, result = hand_built
    weights, output = reference_attention(q, k, v)
    np.testing.assert_allclose(result.weights, weights, rtol=1e-12)
    np.testing.assert_allclose(result.output, output, rtol=1e-12, atol=1e-14)
    for word, w in zip(WORDS, weights[DRANK], strict=True):  # the row the page prints
        assert_printed(shown_home.line("first_attention.py:attend", f"drank -> {word} "), w, 3)


@pytest.mark.claim("home-drank-milk")
def test_home_example_drank_puts_over_two_thirds_on_milk(shown_home, hand_built):
    row = hand_built[3].weights[DRANK]
    assert row.argmax() == MILK and row.max() > 2 / 3
    printed = {w: numbers(shown_home.line("first_attention.py:attend", f"drank -> {w} "))[0]
               for w in WORDS}
    assert max(printed, key=printed.get) == "milk" and printed["milk"] > 2 / 3


# ---- 1. A soft dictionary lookup -------------------------------------------------------

# The palette as chapter 1's text states it, in the order its output lists the entries.
# Keys (warm, bright): the warmth column is listed under the soft lookup ("1, 0.8, −1 and 0"),
# the brightness column in exercise 1 ("0.2, 0.8, 0 and 1"). Values: pure red, orange as the
# first block prints it, blue (0, 0, 1) as exercise 3 writes it, and white.
NAMES = ("red", "orange", "blue", "white")
KEYS = np.array([[1.0, 0.2], [0.8, 0.8], [-1.0, 0.0], [0.0, 1.0]])
VALUES = np.array([[1.0, 0.0, 0.0], [1.0, 0.5, 0.0], [0.0, 0.0, 1.0], [1.0, 1.0, 1.0]])
WARM = np.array([[1.0, 0.0]])  # "the query (1, 0) asks only about warmth"
BRIGHT = np.array([[0.0, 1.0]])  # exercise 1's "something bright"
RED, ORANGE, BLUE = NAMES.index("red"), NAMES.index("orange"), NAMES.index("blue")


@pytest.fixture(scope="module")
def shown_lookup(page_output):
    return page_output("soft-lookup.md")


def palette_weights(query):
    """Softmax of the palette's scores for ``query``, written out here (d_k = 2)."""
    s = KEYS @ np.asarray(query, dtype=float) / np.sqrt(2)
    e = np.exp(s - s.max())
    return e / e.sum()


def printed_weights(text):
    """The 'weight on NAME W' lines of a block, in printed order: [(name, w), ...]."""
    lines = [ln.split() for ln in text.splitlines() if ln.strip().startswith("weight on ")]
    return [(words[2], float(words[3])) for words in lines]


@pytest.mark.claim("lookup-dict-exact")
def test_a_dict_answers_the_exact_key_and_nothing_near_it(shown_lookup):
    palette = dict(zip(NAMES, map(tuple, VALUES.tolist()), strict=True))
    assert palette["orange"] == (1.0, 0.5, 0.0)
    with pytest.raises(KeyError):
        palette["warm"]
    text = shown_lookup["soft_lookup.py:hard"]
    assert line_of(text, "palette['orange'] ->") == f"palette['orange'] -> {palette['orange']}"
    assert line_of(text, "'warm' in palette ->") == "'warm' in palette -> False"


@pytest.mark.claim("lookup-scores-are-warmth")
def test_scores_of_the_warm_query_are_the_keys_warmth(shown_lookup):
    np.testing.assert_array_equal(KEYS @ WARM[0], KEYS[:, 0])
    assert_printed(shown_lookup.line("soft_lookup.py:soft", "scores:"), KEYS[:, 0], 6)
    # and those keys are the page's: the weights it prints are the softmax of these scores
    weights = qkv.attention(WARM, KEYS, VALUES).weights[0]
    assert printed_weights(shown_lookup["soft_lookup.py:soft"]) == \
        [(n, pytest.approx(w, abs=5e-4)) for n, w in zip(NAMES, weights, strict=True)]


@pytest.mark.claim("lookup-every-key-weighted")
def test_every_entry_gets_a_positive_weight_even_the_worst_match(shown_lookup):
    weights = qkv.attention(WARM, KEYS, VALUES).weights[0]
    np.testing.assert_allclose(weights, palette_weights(WARM[0]), rtol=1e-12)
    assert NAMES[int(np.argmin(KEYS @ WARM[0]))] == "blue"
    assert (weights > 0).all() and weights.sum() == pytest.approx(1.0, abs=1e-12)
    printed = dict(printed_weights(shown_lookup["soft_lookup.py:soft"]))
    assert printed["blue"] == pytest.approx(weights[BLUE], abs=5e-4) and printed["blue"] > 0
    assert shown_lookup.line("soft_lookup.py:soft", "sum of weights:") == "sum of weights: 1.0"


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
def test_a_longer_query_concentrates_the_weight_on_the_best_key(shown_lookup):
    best = int(np.argmax(KEYS @ WARM[0]))
    assert best == RED
    factors = (1, 4, 16, 64)
    results = [qkv.attention(WARM * f, KEYS, VALUES) for f in factors]
    on_best = [r.weights[0, best] for r in results]
    assert np.all(np.diff(on_best) > 0) and on_best[-1] > 0.999
    np.testing.assert_allclose(results[-1].output[0], VALUES[best], atol=5e-4)  # to three decimals
    for f, r in zip(factors, results, strict=True):
        line = shown_lookup.line("soft_lookup.py:sharpen", f"x{f} ")
        weight, answer = line.split("answer")
        assert_printed(weight, [f, r.weights[0, RED]], 4)
        assert_printed(answer, r.output[0], 3)


@pytest.mark.claim("lookup-sharpen-never-exact")
def test_at_64_times_the_worst_key_still_has_a_tiny_positive_weight():
    weights = qkv.attention(WARM * 64, KEYS, VALUES).weights[0]
    assert 0 < weights[BLUE] < 1e-30
    assert weights[BLUE] == pytest.approx(palette_weights(64 * WARM[0])[BLUE], rel=1e-9)
    assert (weights > 0).all()


@pytest.mark.claim("lookup-nudge")
def test_a_small_step_flips_the_hard_answer_but_barely_moves_the_soft_one(shown_lookup):
    def hard(query):
        return VALUES[np.argmax(KEYS @ query)]

    # red and orange match (1, t) equally where 1 + 0.2 t = 0.8 + 0.8 t: step across that line
    t_equal = (KEYS[RED, 0] - KEYS[ORANGE, 0]) / (KEYS[ORANGE, 1] - KEYS[RED, 1])
    before, after = np.array([[1.0, t_equal - 0.03]]), np.array([[1.0, t_equal + 0.03]])
    np.testing.assert_array_equal(hard(before[0]), VALUES[RED])
    np.testing.assert_array_equal(hard(after[0]), VALUES[ORANGE])
    jump = np.abs(VALUES[ORANGE] - VALUES[RED])
    assert jump.max() == 0.5 and jump.argmax() == 1 and np.count_nonzero(jump) == 1  # green only
    soft = [qkv.attention(q, KEYS, VALUES).output[0] for q in (before, after)]
    assert np.abs(soft[1] - soft[0]).max() < 0.01
    # the page: red, then orange, for the hard lookup; two soft answers less than 0.01 apart
    assert_printed(shown_lookup.line("soft_lookup.py:nudge", "hard:"), [VALUES[RED], VALUES[ORANGE]], 6)
    soft_before, soft_after = np.split(np.array(numbers(shown_lookup.line("soft_lookup.py:nudge",
                                                                           "soft:"))), 2)
    assert np.abs(soft_after - soft_before).max() < 0.01 - 1e-3  # with room for the rounding


# ---- exercises of chapter 1 ----------------------------------------------------------------


@pytest.mark.claim("lookup-ex-bright")
def test_the_bright_query_weighs_white_most_and_blue_least(shown_lookup):
    scores = KEYS @ BRIGHT[0]
    np.testing.assert_array_equal(scores, [0.2, 0.8, 0.0, 1.0])
    w = palette_weights(BRIGHT[0])
    ranked = [NAMES[i] for i in np.argsort(-w)]
    assert ranked == ["white", "orange", "red", "blue"] == [NAMES[i] for i in np.argsort(-scores)]
    answer = w @ VALUES
    np.testing.assert_allclose(qkv.attention(BRIGHT, KEYS, VALUES).output[0], answer, rtol=1e-12)
    assert np.abs(VALUES - answer).max(axis=-1).min() > 0.1  # no entry holds it
    assert answer.min() > 0.4  # pale: every channel well above 0
    text = shown_lookup["soft_lookup.py:exercise_bright"]
    assert_printed(line_of(text, "scores:"), scores, 6)
    assert printed_weights(text) == [(n, pytest.approx(w[NAMES.index(n)], abs=5e-4)) for n in ranked]
    assert_printed(line_of(text, "answer:"), answer, 3)


@pytest.mark.claim("lookup-ex-factor")
def test_red_first_passes_0_99_at_33_times_the_warm_query(shown_lookup):
    on_red = {f: palette_weights(f * WARM[0])[RED] for f in range(1, 40)}
    first = min(f for f, w in on_red.items() if w > 0.99)
    assert first == 33
    assert qkv.attention(WARM * 33, KEYS, VALUES).weights[0, RED] > 0.99 >= \
        qkv.attention(WARM * 32, KEYS, VALUES).weights[0, RED]
    line = shown_lookup.line("soft_lookup.py:exercise_factor", "smallest whole factor")
    assert numbers(line)[-1] == first


@pytest.mark.claim("lookup-ex-never-pure")
def test_a_query_aimed_at_blue_never_gives_pure_blue(shown_lookup):
    at_blue = 64 * KEYS[BLUE][None]
    w = palette_weights(at_blue[0])
    assert 0 < np.delete(w, BLUE).sum() < 1e-19  # the weight not on blue
    weights, answer = qkv.attention(at_blue, KEYS, VALUES)
    np.testing.assert_allclose(weights[0], w, rtol=1e-9)
    assert answer[0, 0] > 0 and answer[0, 0] == pytest.approx(w @ VALUES[:, 0], rel=1e-9)
    text = shown_lookup["soft_lookup.py:exercise_blue"]
    printed = numbers(line_of(text, "weight on blue"))
    assert printed[0] == pytest.approx(w[BLUE], abs=5e-7)
    np.testing.assert_allclose(printed[1:], answer[0], rtol=1e-6)
    assert printed[1] > 0
    assert line_of(text, "red channel above zero:") == "red channel above zero: True"


# ---- 2. Where Q, K and V come from -----------------------------------------------------


@pytest.fixture(scope="module")
def shown_where(page_output):
    return page_output("where-qkv-come-from.md")


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
    assert learned == 16 * (8 + 8 + 4) == 320
    for d_model, d_k, d_v in [(16, 8, 4), (512, 64, 64), (7, 3, 5)]:
        r = random_projections(0, d_model, d_k, d_v)
        assert r.w_q.size + r.w_k.size + r.w_v.size == d_model * (2 * d_k + d_v)
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
    assert shown_where.line("where_qkv_come_from.py:parameters", "qkv.attention takes:") == \
        f"qkv.attention takes: {signature}"


@pytest.mark.claim("proj-dk-must-match")
def test_keys_of_another_width_are_refused_naming_both_shapes(shown_where, random_toy):
    _, _, q, k, v = random_toy
    with pytest.raises(ValueError, match=r"share d_k.*\(6, 8\).*\(6, 5\)") as refused:
        qkv.attention(q, k[:, :5], v)
    # the page wraps the message over lines; the words are the same
    printed = shown_where["where_qkv_come_from.py:dk_must_match"]
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
def test_the_page_values_are_4_wide_beside_8_wide_keys_and_so_is_the_output(shown_where, random_toy):
    x, p = random_toy[:2]
    assert qkv.self_attention(x, p).output.shape == (len(WORDS), 4) and p.d_k == 8
    q_line = numbers(shown_where.line("where_qkv_come_from.py:project", "Q "))
    assert q_line[1::2] == [8, 8, 4]  # the widths of Q, K and V as printed


@pytest.mark.claim("proj-key-bias-cancels")
@settings(max_examples=50, deadline=None)
@given(seeds, widths, st.integers(1, 8))
def test_a_bias_added_to_every_key_changes_no_weight(seed, d_k, t):
    rng = np.random.default_rng(seed)
    q, k, v = rng.normal(size=(t, d_k)), rng.normal(size=(t, d_k)), rng.normal(size=(t, 2))
    b = rng.normal(size=d_k)
    plain, shifted = qkv.attention(q, k, v).weights, qkv.attention(q, k + b, v).weights
    assert np.abs(shifted - plain).max() < 1e-12


@pytest.fixture(scope="module")
def bias_changes():
    """How far one seeded bias, on the keys or on the queries, moves the weights of both toys."""
    changes = []
    for x, p in [(toy.embeddings(), toy.projections(toy.D_K, toy.D_V)),
                 (toy.feature_embeddings(), toy.hand_built_projections())]:
        q, k, v = qkv.project(x, p)
        b = np.random.default_rng(2024).normal(size=p.d_k)
        plain = qkv.attention(q, k, v).weights
        changes.append((np.abs(qkv.attention(q, k + b, v).weights - plain).max(),
                        np.abs(qkv.attention(q + b, k, v).weights - plain).max()))
    return changes


@pytest.mark.claim("proj-key-bias-cancels")
def test_the_page_shows_the_key_bias_changing_nothing(shown_where, bias_changes):
    assert all(on_keys < 1e-12 for on_keys, _ in bias_changes)
    line = shown_where.line("where_qkv_come_from.py:key_bias", "bias on the keys:")
    assert 0 <= numbers(line)[0] < 1e-12


@pytest.mark.claim("proj-query-bias-matters")
def test_a_bias_on_the_queries_changes_the_weights(shown_where, bias_changes):
    assert all(on_queries > 0.01 for _, on_queries in bias_changes)
    line = shown_where.line("where_qkv_come_from.py:key_bias", "bias on the queries:")
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
        expected = [word, *nonzero_names(q[i], toy.FEATURES), *nonzero_names(k[i], toy.FEATURES),
                    *nonzero_names(v[i], toy.VALUE_COLUMNS)]
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
    assert round(DRANK_ON_MILK, 2) == 0.68
    assert_printed(line_of(hand_weights_block, "drank's scaled scores:"), scores, 2)
    assert_printed(line_of(hand_weights_block, "drank -> milk"), [DRANK_ON_MILK, DRANK_ON_SHE], 2)
    table = {ln.split()[0]: ln.split()[1:] for ln in hand_weights_block.splitlines()
             if ln.split() and ln.split()[0] in WORDS and len(ln.split()) == len(WORDS) + 1}
    assert_printed(" ".join(table["drank"]), expected, 2)
    for word, row in zip(WORDS, result.weights, strict=True):  # and every other row of the table
        assert_printed(" ".join(table[word]), row, 2)


@pytest.mark.claim("hand-drank-receives-dairy")
def test_what_drank_receives_is_mostly_dairy(hand_weights_block, hand_built):
    out = hand_built[3].output[DRANK]
    # each value hands over one column: she person, drank verb, milk dairy, cup container
    received = {"person": DRANK_ON_SHE, "verb": DRANK_ON_OTHER, "dairy": DRANK_ON_MILK,
                "container": DRANK_ON_OTHER}
    np.testing.assert_allclose(out, [received[c] for c in toy.VALUE_COLUMNS], rtol=1e-12)
    assert toy.VALUE_COLUMNS[out.argmax()] == "dairy" and round(out.max(), 2) == 0.68
    printed = named_numbers(line_of(hand_weights_block, "drank's output:"))
    assert printed == {c: pytest.approx(x, abs=5e-3) for c, x in received.items()}
    assert max(printed, key=printed.get) == "dairy"


# ---- exercises of chapter 2 ----------------------------------------------------------------


@pytest.mark.claim("proj-ex-params")
def test_one_head_of_64_in_a_512_model_has_98304_numbers(shown_where):
    head = random_projections(0, 512, 64, 64)
    assert head.w_q.size + head.w_k.size + head.w_v.size == 3 * 512 * 64 == 98_304
    text = shown_where["where_qkv_come_from.py:exercise_params"]
    assert numbers(line_of(text, "W_Q, W_K, W_V:")) == [512, 64] * 3
    assert numbers(line_of(text, "learned numbers:")) == [98_304]


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
    assert (printed["milk"], printed["drank"]) == (0.68, 0.16)


# ---- 3. Why keys and values are separate -----------------------------------------------


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
    assert shown_kv.line("keys_vs_values.py:change_value", "weights identical:") == "weights identical: True"


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
    assert received["container"] - base.output[DRANK, toy.VALUE_COLUMNS.index("container")] == \
        pytest.approx(DRANK_ON_MILK, rel=1e-12)
    before = named_numbers(shown_kv.line("keys_vs_values.py:setup", "drank receives:"))
    after = named_numbers(shown_kv.line("keys_vs_values.py:change_value", "drank receives:"))
    assert after == {c: pytest.approx(x, abs=5e-3) for c, x in received.items()}
    assert before == {c: pytest.approx(x, abs=5e-3) for c, x in zip(toy.VALUE_COLUMNS, base.output[DRANK],
                                                                     strict=True)}
    assert after["container"] - before["container"] == pytest.approx(0.68, abs=0.011)  # "0.68 of container"


@pytest.mark.claim("kv-sep-key-moves-weights")
def test_wiping_milks_key_drops_drank_weight_to_that_of_an_unrelated_word(shown_kv, hand_built, wiped_key):
    q, _, v, base = hand_built
    after = qkv.attention(q, wiped_key, v)
    # drank's scores are now 4/√8 for she and 0 for the five others: softmax written out
    on_milk = 1 / (E_4 + 5)
    assert after.weights[DRANK, MILK] == pytest.approx(on_milk, rel=1e-12)
    assert after.weights[DRANK, MILK] == pytest.approx(after.weights[DRANK, FROM], rel=1e-12)
    assert base.weights[DRANK, MILK] == pytest.approx(DRANK_ON_MILK, rel=1e-12)
    assert_printed(shown_kv.line("keys_vs_values.py:change_key", "drank -> milk:"),
                   [DRANK_ON_MILK, on_milk], 2)
    # milk's value is untouched and still reaches drank, in proportion to the low weight
    received = named_numbers(shown_kv.line("keys_vs_values.py:change_key", "drank receives:"))
    assert received["dairy"] == pytest.approx(on_milk, abs=5e-3)
    assert received == {c: pytest.approx(x, abs=5e-3)
                        for c, x in zip(toy.VALUE_COLUMNS, after.output[DRANK], strict=True)}


@pytest.mark.claim("kv-sep-key-changes-asking-rows")
def test_a_wiped_key_changes_only_the_rows_whose_query_asked_for_it(shown_kv, hand_built, wiped_key):
    q, _, v, base = hand_built
    after = qkv.attention(q, wiped_key, v).weights
    changed = [w for w, row_a, row_b in zip(WORDS, after, base.weights, strict=True)
               if not np.allclose(row_a, row_b)]
    liquid = toy.FEATURES.index("liquid")
    askers = [w for w, query in zip(WORDS, q, strict=True) if query[liquid] != 0]
    assert changed == askers == ["drank", "cup"]
    assert shown_kv.line("keys_vs_values.py:change_key", "rows of weights that changed:") == \
        f"rows of weights that changed: {askers}"


# ---- 4. Why three projections ----------------------------------------------------------


@pytest.fixture(scope="module")
def shown_three(page_output):
    return page_output("why-three-projections.md")


@pytest.fixture(scope="module")
def tie():
    """Chapter 4's random toy: X and separate projections with d_k = 8 and, as the page says,
    values 8 wide; the scores and weights separate, with W_Q = W_K, and with W_V = W_K."""
    x, p = toy.embeddings(), toy.projections(d_k=toy.D_K, d_v=8)
    qk = qkv.Projections(p.w_k, p.w_k, p.w_v)
    kv = qkv.Projections(p.w_q, p.w_k, p.w_k)
    return {"x": x, "p": p, "S": scores_of(x, p), "W": qkv.self_attention(x, p).weights,
            "S_tied": scores_of(x, qk), "W_tied": qkv.self_attention(x, qk).weights,
            "kv": qkv.self_attention(x, kv)}


def scores_of(x, p):
    q, k, _ = qkv.project(x, p)
    return q @ k.T / np.sqrt(p.d_k)


def pair_lines(text):
    """The printed 'milk -> from' and 'from -> milk' lines: [score, weight] for each."""
    return numbers(line_of(text, "milk -> from:")), numbers(line_of(text, "from -> milk:"))


@pytest.fixture(scope="module")
def separate_block(shown_three):
    return unnamed_block(shown_three, "milk -> from:")


@pytest.mark.claim("three-hand-one-way")
def test_from_looks_for_cup_but_cup_does_not_look_for_from(shown_three, hand_built):
    q, k, _, _ = hand_built
    s = q @ k.T / np.sqrt(toy.D_K)
    w = qkv.softmax(s)
    assert s[FROM, CUP] == pytest.approx(8 / np.sqrt(8), rel=1e-12) and s[CUP, FROM] == 0
    # from's row: 8/√8 on cup, 0 on the other five; cup's: 4/√8 on milk, 0 on the other five
    from_cup, cup_from = E_8 / (E_8 + 5), 1 / (E_4 + 5)
    assert w[FROM, CUP] == pytest.approx(from_cup, rel=1e-12)
    assert w[CUP, FROM] == pytest.approx(cup_from, rel=1e-12)
    assert (round(from_cup, 2), round(cup_from, 2)) == (0.77, 0.11)
    text = shown_three["hand_built.py:one_way"]
    assert_printed(line_of(text, "from -> cup"), [8 / np.sqrt(8), from_cup], 2)
    assert_printed(line_of(text, "cup -> from"), [0, cup_from], 2)


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
    assert (milk_from[1], from_milk[1]) == (pytest.approx(w[MILK, FROM], abs=5e-4),
                                            pytest.approx(w[FROM, MILK], abs=5e-4))
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
    np.testing.assert_allclose([milk_from, from_milk], [[s[MILK, FROM], w[MILK, FROM]],
                                                        [s[FROM, MILK], w[FROM, MILK]]], rtol=0, atol=5e-4)
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
def test_separately_every_word_here_scores_itself_below_zero(shown_three, tie):
    separate, tied = np.diag(tie["S"]), np.diag(tie["S_tied"])
    assert (separate < 0).all() and (tied >= 0).all()
    text = shown_three["tie_query_key.py:self_score"]
    # each line: the diagonal, then "top: N of 6"
    assert_printed(line_of(text, "separate").split("top:")[0], separate, 2)
    assert_printed(line_of(text, "tied").split("top:")[0], tied, 2)
    assert all(x < 0 for x in numbers(line_of(text, "separate").split("top:")[0]))


@pytest.mark.claim("three-tied-self-top")
def test_tied_every_word_here_scores_itself_highest_and_separately_none_does(shown_three, tie):
    on_itself = np.arange(len(WORDS))
    assert (tie["S_tied"].argmax(axis=-1) == on_itself).all()
    assert (tie["S"].argmax(axis=-1) != on_itself).all()
    text = shown_three["tie_query_key.py:self_score"]
    assert line_of(text, "separate").endswith(f"top: 0 of {len(WORDS)}")
    assert line_of(text, "tied").endswith(f"top: {len(WORDS)} of {len(WORDS)}")


@pytest.mark.claim("three-tie-kv-weights-unchanged")
def test_tying_w_v_to_w_k_leaves_the_weights_bit_for_bit(shown_three, tie):
    np.testing.assert_array_equal(tie["kv"].weights, tie["W"])
    assert shown_three.line("tie_query_key.py:tie_kv", "weights identical:") == "weights identical: True"


@pytest.mark.claim("three-tie-kv-output-changes")
def test_tying_w_v_to_w_k_moves_the_output_into_key_space(shown_three, tie):
    full = qkv.self_attention(tie["x"], tie["p"])
    change = np.abs(tie["kv"].output - full.output).max()
    assert change > 1.0
    _, k, _ = qkv.project(tie["x"], tie["p"])
    np.testing.assert_allclose(tie["kv"].output, full.weights @ k, rtol=1e-12)  # a blend of keys
    assert_printed(shown_three.line("tie_query_key.py:tie_kv", "largest change in the output:"), change, 3)


@pytest.mark.claim("three-dk-dv-shapes")
@settings(deadline=None)  # timing is not what these tests check
@given(st.integers(1, 64), st.integers(1, 64))
def test_weights_stay_t_by_t_whatever_d_k_and_d_v(d_k, d_v):
    t = len(WORDS)
    weights, output = qkv.self_attention(toy.embeddings(), toy.projections(d_k, d_v))
    assert weights.shape == (t, t)
    assert output.shape == (t, d_v)


@pytest.mark.claim("three-dk-dv-shapes")
def test_the_page_shows_6_by_6_weights_for_every_width_it_tries(shown_three):
    lines = [ln for ln in shown_three["tie_query_key.py:dk_dv"].splitlines() if ln.startswith("d_k=")]
    assert len(lines) >= 3
    for line in lines:
        d_k, d_v, *shapes = numbers(line)
        weights, output = qkv.self_attention(toy.embeddings(), toy.projections(int(d_k), int(d_v)))
        assert shapes == [*weights.shape, *output.shape] == [6, 6, 6, d_v]


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
    # test_chapter_kv_cache.py; here only the head widths matter.
    assert qkv.MODELS  # their number and fields: test_chapter_kv_cache.py
    assert {m.d_head for m in qkv.MODELS} <= {64, 128}
