"""Guards for docs/position-variants.md, the deep dive of chapter 9: its sinusoid, ALiBi and
sliding-window sections and its two exercises.

Each fact is derived here independently of the page's code: the sinusoids from the formula of
Vaswani et al. (2017) written with ``math``, the shift matrix from the angle-sum identities,
ALiBi's weights from the slopes typed from Press et al. (2022), and a sliding window's reach by
walking back position by position. Then what the page prints is checked against it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from prose import check_prose
from support import numbers, values_after
from test_position import angles, reference_attention, rotate

import qkv
from qkv import toy


@pytest.fixture(scope="module")
def shown(page_output):
    return page_output("position-variants.md")


def sinusoids(t, d):
    """PE(p, 2i) = sin(p / 10000^(2i/d)), PE(p, 2i+1) = cos(...), entry by entry."""
    return np.array(
        [[(math.sin, math.cos)[j % 2](p / 10_000 ** (2 * (j // 2) / d)) for j in range(d)] for p in range(t)]
    )


def shift_matrix(k, d):
    """The angle-sum identities as a matrix: pair i turned by k ω_i."""
    m = np.zeros((d, d))
    for i in range(d // 2):
        a = k / 10_000 ** (2 * i / d)
        m[2 * i, 2 * i], m[2 * i, 2 * i + 1] = math.cos(a), math.sin(a)
        m[2 * i + 1, 2 * i], m[2 * i + 1, 2 * i + 1] = -math.sin(a), math.cos(a)
    return m


@pytest.mark.claim("pos-sinusoid-shift")
def test_one_matrix_moves_every_sinusoidal_position_k_ahead(shown):
    pe = sinusoids(6000, 16)
    np.testing.assert_allclose(qkv.sinusoidal_positions(6000, 16), pe, rtol=0, atol=1e-12)
    for k in (1, 7, 50):
        moved = pe[: 6000 - k] @ shift_matrix(k, 16).T
        assert np.abs(moved - pe[k:]).max() < 1e-12  # the same M_k at every position
        # and it is the only one: the positions span all 16 dimensions
        assert np.linalg.matrix_rank(pe[:3000]) == 16
    # a learned-style table (random vectors) has no such matrix: the fit fails on unseen rows
    table = np.random.default_rng(0).normal(size=(6000, 16))
    fit, *_ = np.linalg.lstsq(table[:3000], table[1:3001], rcond=None)
    assert np.abs(table[3000:5999] @ fit - table[3001:]).max() > 1.0
    errors = [shown.row("position_variants.py:sinusoid_shift", "offset", f"{k}:")[-1] for k in (1, 7, 50)]
    assert all(e < 1e-12 for e in errors)
    vs_rotation = numbers(shown.line("position_variants.py:sinusoid_shift", "M_50 against"))[-1]
    assert vs_rotation < 1e-13
    check_prose("pos-sinusoid-shift", 1, 7, 50, 0, 2999, 6000, 1e-12, 1e-13)


@pytest.mark.claim("pos-alibi-linear")
def test_alibi_penalty_grows_by_the_slope_per_step_back(shown):
    slopes = [2.0 ** -(h + 1) for h in range(8)]  # 8 heads: 1/2 ... 1/256 (Press et al.)
    bias = qkv.alibi_bias(8, 8)
    for h, m in enumerate(slopes):
        penalty = -bias[h, 7, ::-1]
        np.testing.assert_allclose(np.diff(penalty), m, rtol=1e-12)  # linear in distance
    own = [1 / sum(math.exp(-m * dist) for dist in range(8)) for m in slopes]
    assert own[0] > own[3] > own[7] > 1 / 8  # steeper heads keep more on themselves
    assert shown.line("position_variants.py:alibi", "slopes:") == "slopes: " + " ".join(
        f"1/{2 ** (h + 1)}" for h in range(8)
    )
    for h in (0, 3, 7):
        line = numbers(shown.line("position_variants.py:alibi", f"head {h + 1}:"))
        # head, distances 0-3, four penalties, two steps, the weight on itself
        np.testing.assert_allclose(line[3:7], [slopes[h] * d for d in range(4)], atol=5e-4 + 1e-9)
        np.testing.assert_allclose(line[7:9], slopes[h], atol=5e-5 + 1e-9)
        assert abs(line[9] - own[h]) <= 5e-4 + 1e-9
    check_prose("pos-alibi-linear", slopes[0], ..., 1, 256, ..., 8, own[0], ..., own[7], 1 / 8, ...)


def reach_by_walking(t, window, n_layers, i):
    """Positions token i's top output can depend on: each layer steps back 0 .. window-1."""
    frontier = {i}
    for _ in range(n_layers):
        frontier = {j - s for j in frontier for s in range(window) if j - s >= 0}
    return sorted(frontier)


@pytest.mark.claim("pos-window-receptive-field")
def test_a_stack_of_sliding_windows_reaches_w_minus_1_times_l_plus_1(shown):
    counts = [len(reach_by_walking(40, 4, n, 39)) for n in range(1, 5)]
    assert counts == [(4 - 1) * n + 1 for n in range(1, 5)]
    for n, count in enumerate(counts, start=1):
        printed = numbers(shown.line("position_variants.py:receptive", f"{n} layer(s)"))
        assert printed[:3] == [n, 4, count] and printed[-1] == count  # measured, formula
    mistral = (4096 - 1) * 32 + 1  # Mistral 7B: 32 layers, window 4096 (Jiang et al., Table 1)
    assert (
        numbers(shown.line("position_variants.py:receptive", "Mistral 7B,").replace(",", ""))[-1] == mistral
    )
    assert abs(mistral - 131_000) < 1_000  # the paper: "approximately 131K tokens"
    check_prose("pos-window-receptive-field", 1, 1, *counts, 4, 1, 4, mistral, 32, 4096)


@pytest.mark.claim("pos-window-paper-convention")
def test_with_the_papers_window_of_w_plus_1_keys_the_reach_goes_back_w_times_l():
    # the paper's window i - W .. i holds W + 1 keys: each layer steps back 0 .. W
    w = 4
    back = [39 - reach_by_walking(40, w + 1, n, 39)[0] for n in range(1, 5)]
    assert back == [w * n for n in range(1, 5)]
    paper = 4096 * 32  # Mistral 7B: window 4096, 32 layers (Jiang et al., Table 1)
    assert abs(paper - 131_000) < 1_000  # "approximately 131K"
    assert paper - ((4096 - 1) * 32 + 1) == 31  # the two conventions differ by L - 1
    check_prose("pos-window-paper-convention", paper, w, 1, 4, *back)


@pytest.mark.claim("pos-ex-window")
def test_six_layers_of_window_8_reach_43_tokens_back_from_100(shown):
    sources = reach_by_walking(120, 8, 6, 100)
    assert sources == list(range(58, 101))
    text = shown["position_variants.py:exercise_window"]
    assert numbers(text) == [100, 58, 100, len(sources), 8]
    check_prose("pos-ex-window", 7, 6, 7, 6, 1, len(sources), 58, 100, 8)


@pytest.mark.claim("pos-ex-sinusoid-dot")
def test_sinusoid_dot_products_depend_on_the_offset_only(shown):
    def dot(offset, d=64):  # sum over pairs of cos(offset ω_i)
        return sum(math.cos(offset / 10_000 ** (2 * i / d)) for i in range(d // 2))

    pe = qkv.sinusoidal_positions(300, 64)
    for p in (0, 100, 250):
        assert math.isclose(pe[p] @ pe[p + 10], dot(10), abs_tol=1e-9)
    for line in shown["position_variants.py:exercise_sinusoid_dot"].splitlines():
        p, q, value = numbers(line)
        assert abs(value - dot(q - p)) <= 5e-7 + 1e-12
    check_prose("pos-ex-sinusoid-dot", dot(10), 0, 100, 250, 40, dot(40))


@pytest.fixture(scope="module")
def variants(page_output):
    """The chapter's deep dive, docs/position-variants.md, which holds the added-position
    exercise."""
    return page_output("position-variants.md")


@pytest.fixture(scope="module")
def hand_built():
    """The hand-built toy's Q, K, V, projected here."""
    x, p = toy.feature_embeddings(), toy.hand_built_projections()
    return x, p, x @ p.w_q, x @ p.w_k, x @ p.w_v


@pytest.mark.claim("pos-ex-added-reaches-values")
def test_added_positions_change_a_words_value_but_rope_does_not(hand_built, variants):
    x, p, *_ = hand_built
    at = REVERSED.index(MILK)  # where milk stands in the reversed sentence
    assert at != MILK
    # the page's position vectors: one per slot, N(0, 0.5²), seed 1
    positions = np.random.default_rng(1).normal(0.0, 0.5, size=(6, x.shape[1]))
    v_in_order, v_reversed = (x + positions) @ p.w_v, (x[REVERSED] + positions) @ p.w_v
    assert np.abs(v_in_order[MILK] - v_reversed[at]).max() > 0.1
    text = variants["position_variants.py:exercise_added"]
    shown_in_order = values_after(text, "milk's value in order:")
    shown_reversed = values_after(text, "milk's value reversed:")
    np.testing.assert_allclose(shown_in_order, v_in_order[MILK], rtol=0, atol=0.005 + 1e-9)
    np.testing.assert_allclose(shown_reversed, v_reversed[at], rtol=0, atol=0.005 + 1e-9)
    assert np.abs(np.subtract(shown_in_order, shown_reversed)).max() > 0.1
    # RoPE: V = X W_V, untouched by position, the same row wherever milk stands (to the
    # last bits only: two rows of two BLAS products may be summed by different kernels)
    np.testing.assert_allclose((x @ p.w_v)[MILK], (x[REVERSED] @ p.w_v)[at], rtol=0, atol=1e-12)


REVERSED = [5, 4, 3, 2, 1, 0]  # the page's shuffle: the sentence backwards

SHE, MILK = toy.SENTENCE.index("she"), toy.SENTENCE.index("milk")


# ---- the chapter's demonstrations, run here (moved from test_position.py) ------------------


@pytest.mark.claim("pos-causal-changes-outputs")
def test_with_a_causal_mask_reversing_changes_every_words_output(hand_built, shown):
    *_, q, k, v = hand_built
    _, out = reference_attention(q, k, v, causal=True)
    _, out_rev = reference_attention(q[REVERSED], k[REVERSED], v[REVERSED], causal=True)
    back = out_rev[np.argsort(REVERSED)]  # each word's reversed output, in sentence order
    change = np.abs(back - out).max(axis=1)  # per word, its largest change in any column
    assert (change > 0.5).all()  # every word, and by a lot
    check_prose("pos-causal-changes-outputs", change.min())
    lines = shown["position.py:causal_shuffle"].splitlines()[1:]
    assert [ln.split()[0] for ln in lines] == list(toy.SENTENCE)
    for i, line in enumerate(lines):
        np.testing.assert_allclose(numbers(line), [*out[i], *back[i]], atol=0.005 + 1e-9)


@pytest.mark.claim("pos-causal-counts")
def test_identical_copies_get_outputs_that_tell_where_they_stand(hand_built, shown):
    x, p, *_ = hand_built
    copies = x[[SHE] + [MILK] * 5]
    q, k, v = copies @ p.w_q, copies @ p.w_k, copies @ p.w_v
    _, out_plain = reference_attention(q, k, v)
    w_causal, out_causal = reference_attention(q, k, v, causal=True)
    np.testing.assert_allclose(out_plain[1:], out_plain[[1] * 5], rtol=0, atol=1e-15)  # alike
    for i in range(1, 6):  # copy at position i: an even spread over the i + 1 it may read
        np.testing.assert_allclose(w_causal[i, : i + 1], 1 / (i + 1), rtol=1e-12)
    shares = w_causal[1:, 0]  # the weight each copy puts on "she"
    assert (np.diff(shares) < 0).all()
    person = toy.VALUE_COLUMNS.index("person")  # she's value is 1 there, milk's 0
    np.testing.assert_allclose(out_causal[1:, person], shares, rtol=1e-12)
    check_prose("pos-causal-counts", ..., *shares)  # "i + 1" is the formula's, not a number
    text = shown["position.py:counting"]
    np.testing.assert_allclose(values_after(text, "no mask:"), out_plain[1:, person], atol=5e-4 + 1e-9)
    np.testing.assert_allclose(values_after(text, "causal mask:"), shares, atol=5e-4 + 1e-9)


@pytest.mark.claim("pos-values-layer-two")
def test_from_layer_two_on_the_values_carry_position(shown):
    x = toy.embeddings()
    layer1, layer2 = (toy.projections(d_k=8, d_v=16, seed=s) for s in (2, 3))  # as the page

    def values(tokens):
        q, k, v = tokens @ layer1.w_q, tokens @ layer1.w_k, tokens @ layer1.w_v
        _, out = reference_attention(rotate(q, angles(range(6))), rotate(k, angles(range(6))), v)
        return v, (tokens + out) @ layer2.w_v

    first, second = values(x)
    first_rev, second_rev = values(x[REVERSED])
    at = REVERSED.index(MILK)
    layer1_gap = np.abs(first[MILK] - first_rev[at]).max()
    layer2_gap = np.abs(second[MILK] - second_rev[at]).max()
    assert layer1_gap < 1e-12 and layer2_gap > 0.1
    check_prose("pos-values-layer-two", ..., ..., layer2_gap)  # "layer 1", "layer 2": labels
    line = shown.line("position.py:layer_two", "milk's value, in order vs reversed:")
    _, shown_1, _, shown_2 = numbers(line)
    assert shown_1 == 0 and abs(shown_2 - layer2_gap) <= 0.005 + 1e-9


@pytest.mark.claim("pos-offset-only")
def test_the_page_scores_depend_only_on_the_offset(shown):
    q, k = np.random.default_rng(0).normal(size=(2, 1, toy.D_K))  # the page's query and key

    def score(m, n):
        return (rotate(q, angles([m])) @ rotate(k, angles([n])).T).item()

    lines = [ln.strip() for ln in shown["position.py:offset"].splitlines()]
    assert len(lines) == 6
    exact = 1e-12  # "to within 10^-12"
    pairs = [numbers(line)[:2] for line in lines[:3]]  # the three pairs at offset 3
    assert abs(score(*pairs[2]) - score(*pairs[0])) < exact
    check_prose("pos-offset-only", *pairs[0], *pairs[1], *pairs[2], exact)
    for line in lines:
        m, n, offset, value = numbers(line)
        assert offset == m - n
        assert abs(value - score(m, n)) <= 5e-7 + 1e-12  # printed to 6 decimals
        same = abs(score(m, n) - score(3, 0))
        assert same < 1e-12 if offset == 3 else same > 0.01  # offset -3 too: the sign counts
    assert {numbers(line)[2] for line in lines} == {1, 2, 3, -3}
    assert sum(numbers(line)[2] == 3 for line in lines) == 3  # 3/0, 10/7 and 500/497


@pytest.mark.claim("pos-offset-signed")
def test_a_key_as_far_after_the_query_scores_differently(shown):
    """The page's key 3 after its query (offset -3) against the three at offset 3: the same
    distance |m - n|, another score, so RoPE's score follows the signed offset."""
    q, k = np.random.default_rng(0).normal(size=(2, 1, toy.D_K))  # the page's query and key

    def score(m, n):
        return (rotate(q, angles([m])) @ rotate(k, angles([n])).T).item()

    rows = {tuple(numbers(line)[:3]): numbers(line)[3] for line in shown["position.py:offset"].splitlines()}
    (m, n, offset), printed = next((key, value) for key, value in rows.items() if key[2] < 0)
    assert (m, n, offset) == (0, 3, -3) and abs(printed - score(0, 3)) <= 5e-7 + 1e-12
    assert abs(score(0, 3) - score(3, 0)) > 0.01  # same distance, not the same score
    check_prose("pos-offset-signed", n - m, m - n, n - m)


@pytest.mark.claim("pos-ex-self-score")
def test_rope_leaves_every_own_key_score_unchanged(shown):
    # the page's check: the random toy, where the own-key scores are not all 0
    x, p = toy.embeddings(), toy.projections(toy.D_K, toy.D_V)
    q, k = x @ p.w_q, x @ p.w_k
    plain = (q * k).sum(-1)
    rotated = (rotate(q, angles(range(6))) * rotate(k, angles(range(6)))).sum(-1)
    np.testing.assert_allclose(rotated, plain, rtol=1e-12, atol=1e-12)
    assert np.abs(plain).min() > 0.1
    text = shown["position.py:exercise_self"]
    for prefix in ("own-key scores, plain:", "own-key scores, rotated:"):
        np.testing.assert_allclose(values_after(text, prefix), plain, rtol=0, atol=5e-5 + 1e-12)
    rng = np.random.default_rng(5)  # and at 40 positions of random queries and keys
    q, k = rng.normal(size=(2, 40, 8))
    np.testing.assert_allclose((qkv.rope(q) * qkv.rope(k)).sum(-1), (q * k).sum(-1), rtol=1e-10, atol=1e-12)
