"""Chapter 10, mistakes that run without an error, and its deep dive, "The seven traps,
done wrong and measured" (docs/traps-in-depth.md, where the demonstrations run): each wrong
version fails as the page says, each check catches it, each fix works.

Each trap is rebuilt here from qkv's public functions on the toy sentence (``qkv.toy``), and
the verdicts and numbers the page prints under its NumPy blocks (read through
``page_output``) must agree with what the test computes. The PyTorch traps are doctests
Sybil runs; the tests below build the same PyTorch objects (same seed) to check the claims.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from prose import check_prose
from support import numbers, softmax_by_hand

import qkv
from qkv import toy

X = toy.embeddings()  # the toy sentence, as every chapter uses it

P = toy.projections(toy.D_K, toy.D_V)  # the site's toy head

Q, K, V = qkv.project(X, P)

MILK, COPY = 2, 6  # "milk", and its copy appended at the end

TWICE = np.vstack([X, X[MILK]])  # "milk" twice: identical embeddings

TWICE_LABELS = (*toy.SENTENCE, "milk'")


# --8<-- [start:shown]
@pytest.fixture(scope="module")
def shown(page_output):
    return page_output("traps-in-depth.md")  # what each executed block of the page prints


# --8<-- [end:shown]


# ---- 6. expecting a word to find its twin: the embeddings as Q, K and V --------------------


# --8<-- [start:same_vector]
@pytest.mark.claim("traps-same-vector")
def test_one_vector_for_all_three_makes_attention_a_word_similarity(shown):
    X = toy.embeddings()  # the page's sentence, from qkv's public toy module
    weights = qkv.attention(X, X, X).weights  # the fact, computed here
    np.testing.assert_array_equal(weights.argmax(axis=-1), np.arange(6))  # each word: itself
    # and the page says so; the expected text follows from the fact, not from the output
    assert (
        shown.line("traps.py:same_vector", "embeddings as Q, K, V: scores symmetric:")
        == "embeddings as Q, K, V: scores symmetric: True"
    )
    assert (
        shown.line("traps.py:same_vector", "embeddings as Q, K, V: favourite keys:")
        == f"embeddings as Q, K, V: favourite keys:   {list(toy.SENTENCE)}"
    )


# --8<-- [end:same_vector]


@pytest.mark.claim("traps-projections-differ")
def test_separate_projections_give_asymmetric_scores_and_no_self_favourite(shown):
    assert not np.allclose(Q @ K.T, (Q @ K.T).T)
    assert not np.allclose(Q, K)
    favourite = qkv.attention(Q, K, V).weights.argmax(axis=-1)
    assert (favourite != np.arange(6)).all()
    label = "projected:" + " " * 13  # aligned under "embeddings as Q, K, V:"
    assert (
        shown.line("traps.py:same_vector", label + "scores symmetric:") == label + "scores symmetric: False"
    )
    assert (
        shown.line("traps.py:same_vector", label + "favourite keys:")
        == f"{label}favourite keys:   {[toy.SENTENCE[j] for j in favourite]}"
    )


# ---- 6. expecting a word to find its twin: a word and its copy ----------------------------


@pytest.mark.claim("traps-identical-embeddings")
def test_a_word_and_its_copy_get_equal_weight_and_need_not_be_favourites(shown):
    w = qkv.self_attention(TWICE, P).weights  # (7, 7)
    _, Kt, _ = qkv.project(TWICE, P)
    # no position: the same key, up to rounding (two rows of one BLAS product need not be
    # bitwise equal: OpenBLAS's kernels differ by CPU, e.g. AVX2 against AVX-512)
    np.testing.assert_allclose(Kt[MILK], Kt[COPY], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(w[:, MILK], w[:, COPY], rtol=1e-12, atol=0)
    from_ = toy.SENTENCE.index("from")
    assert w[MILK].argmax() == from_
    assert w[MILK, from_] > 3 * w[MILK, MILK]  # "more than three times as much"
    # the page's numbers: milk's weight on itself and on its copy, and on "from"
    line = shown.line("traps.py:similarity", "milk -> milk:")
    np.testing.assert_allclose(numbers(line), [w[MILK, MILK], w[MILK, COPY]], atol=5e-4)
    favourite = shown.line("traps.py:similarity", "milk's favourite key:")
    assert favourite.split()[-2] == "from"
    np.testing.assert_allclose(numbers(favourite), [w[MILK, from_]], atol=5e-4)
    assert (
        shown.line("traps.py:similarity", "every query weighs")
        == "every query weighs milk and milk' equally: True"
    )


@pytest.mark.claim("traps-not-self")
def test_no_word_gives_its_largest_weight_to_itself(shown):
    w = qkv.self_attention(TWICE, P).weights
    assert all(w[i].argmax() != i for i in range(7))
    assert (
        shown.line("traps.py:similarity", "words whose favourite key is themselves:")
        == "words whose favourite key is themselves: []"
    )


@pytest.mark.claim("traps-position-splits-keys")
def test_rotary_positions_give_the_two_copies_different_keys_and_weights():
    Qt, Kt, Vt = qkv.project(TWICE, P)
    np.testing.assert_allclose(Kt[MILK], Kt[COPY], rtol=1e-12, atol=1e-15)  # no position: one key
    Qr, Kr = qkv.rope(Qt), qkv.rope(Kt)
    assert not np.allclose(Kr[MILK], Kr[COPY])
    w = qkv.attention(Qr, Kr, Vt).weights
    assert not np.isclose(w[:, MILK], w[:, COPY], rtol=1e-6, atol=0).any()

    # the score a query at m gives the key at n depends on m - n alone: recompute it
    # with both moved by the same shift, by rotating each pair by hand
    def rotate(v, position):
        angles = position * 10_000.0 ** (-np.arange(0, len(v), 2) / len(v))
        c, s = np.cos(angles), np.sin(angles)
        out = v.copy()
        out[0::2] = v[0::2] * c - v[1::2] * s
        out[1::2] = v[0::2] * s + v[1::2] * c
        return out

    for m in range(7):
        for n in (MILK, COPY):
            shifted = rotate(Qt[m], m + 11) @ rotate(Kt[n], n + 11)
            assert np.isclose(Qr[m] @ Kr[n], shifted, rtol=1e-10, atol=1e-12)


# ---- 2. handing on the weights instead of the blend --------------------------------------


@pytest.mark.claim("traps-forgot-values")
def test_forgetting_v_gives_the_right_shape_and_the_wrong_numbers(shown):
    Q6, K6, V6 = qkv.project(X, toy.projections(d_k=8, d_v=6))  # d_v = T = 6
    forgot = softmax_by_hand(Q6 @ K6.T / np.sqrt(8), axis=-1)
    output = qkv.attention(Q6, K6, V6).output
    assert forgot.shape == output.shape == (6, 6)  # no shape check would complain
    gap = np.abs(forgot - output).max()
    assert gap > 0.5
    check_prose("traps-forgot-values", forgot.sum(axis=-1).max(), gap)
    np.testing.assert_allclose(forgot.sum(axis=-1), 1.0, rtol=1e-12)
    assert not np.allclose(output.sum(axis=-1), 1.0, atol=0.1)
    assert (
        shown.line("traps.py:forgot_values", "shapes:").split()
        == f"shapes: {forgot.shape} {output.shape} equal: True".split()
    )
    largest = shown.values("traps.py:forgot_values", "largest difference:")
    np.testing.assert_allclose(largest, [gap], atol=5e-4)
    assert shown.values("traps.py:forgot_values", "rows of the wrong one sum to 1:") == [1.0] * 6


# ---- 3. a float mask of ones and zeros (PyTorch) ------------------------------------------


AGREE = 1e-12  # "matches qkv to better than 10^-12"


@pytest.mark.claim("traps-float-mask")
def test_a_zero_one_float_mask_hides_nothing_and_zero_minus_inf_works():
    causal = qkv.causal_mask(6)
    q, k, v = (torch.from_numpy(a) for a in (Q, K, V))
    as_float = torch.from_numpy(causal).double()  # 1 allowed, 0 not
    additive = torch.zeros(6, 6).double().masked_fill(torch.from_numpy(~causal), -torch.inf)
    want = qkv.attention(Q, K, V, mask=causal).output
    leaky = F.scaled_dot_product_attention(q, k, v, attn_mask=as_float)
    scores = q @ k.T / np.sqrt(toy.D_K)
    leaky_scores = scores + as_float  # what SDPA softmaxes
    # SDPA adds the float mask to the scaled scores: +1 on every allowed pair
    plus_one = softmax_by_hand(Q @ K.T / np.sqrt(toy.D_K) + causal, axis=-1)
    assert plus_one[~causal].min() > 0  # every future pair keeps a positive weight
    assert np.abs(leaky.numpy() - plus_one @ V).max() < 1e-12
    assert np.abs(leaky.numpy() - want).max() > 0.1
    good = F.scaled_dot_product_attention(q, k, v, attn_mask=additive)
    assert np.abs(good.numpy() - want).max() < AGREE
    # the mask values the sentence names (1.0 and 0.0; the 1 added; 0 and -inf), the bound
    check_prose(
        "traps-float-mask",
        as_float.max(),
        as_float.min(),
        (leaky_scores - scores).max(),
        additive.max(),
        AGREE,
    )


def _earlier_outputs_moved(attn_mask):
    """How many of the first five outputs move when the sixth token changes (SDPA)."""
    x2 = X.copy()
    x2[5] = np.random.default_rng(21).normal(size=16) * 3  # another last token
    outs = []
    for x in (X, x2):
        q, k, v = (torch.from_numpy(a) for a in qkv.project(x, P))
        outs.append(F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask).numpy())
    return int((np.abs(outs[0][:5] - outs[1][:5]).max(axis=-1) > 1e-12).sum())


@pytest.mark.claim("traps-float-mask-caught")
def test_changing_the_last_token_catches_the_float_mask():
    causal = qkv.causal_mask(6)
    as_float = torch.from_numpy(causal).double()
    additive = torch.zeros(6, 6).double().masked_fill(torch.from_numpy(~causal), -torch.inf)
    moved_float, moved_additive = (_earlier_outputs_moved(m) for m in (as_float, additive))
    assert moved_float == len(X) - 1 and moved_additive == 0  # all earlier tokens; none
    check_prose("traps-float-mask-caught", as_float.min(), as_float.max(), moved_float, additive.max())


# ---- 1. normalising over the queries ------------------------------------------------------


@pytest.mark.claim("traps-wrong-axis")
def test_softmax_over_queries_leaves_rows_that_do_not_sum_to_one(shown):
    scores = Q @ K.T / np.sqrt(toy.D_K)
    by_query = softmax_by_hand(scores, axis=0)
    np.testing.assert_allclose(by_query, qkv.softmax(scores, axis=0), rtol=1e-12)
    np.testing.assert_allclose(by_query.sum(axis=0), 1.0, rtol=1e-12)  # columns do instead
    rows = by_query.sum(axis=-1)
    assert abs(rows.mean() - 1.0) < 1e-12  # T columns of 1 shared over T rows
    assert rows.min() < 1 < rows.max() - 0.5  # some rows get under 1, one over 1.5
    on_page = shown.values("traps.py:wrong_axis", "row sums, axis=0:")
    np.testing.assert_allclose(on_page, rows, atol=5e-4)
    check_prose("traps-wrong-axis", rows.mean(), rows.min(), rows.max())
    assert shown.values("traps.py:wrong_axis", "mean row sum, axis=0:") == [1.0]
    assert shown.values("traps.py:wrong_axis", "row sums, axis=-1:") == [1.0] * 6


# ---- 4. a query left with no key (PyTorch) ------------------------------------------------


def attend(q, k, v, mask):
    """Hand-written masked attention, as on the page: True = may attend."""
    scores = q @ k.transpose(-2, -1) / k.shape[-1] ** 0.5
    return torch.softmax(scores.masked_fill(~mask, -torch.inf), dim=-1) @ v


LEFT_PADDED = qkv.causal_mask(6) & np.array([False, False, True, True, True, True])


@pytest.mark.claim("traps-nan-spreads")
def test_nan_from_two_empty_rows_fills_every_row_of_the_next_layer():
    assert (~LEFT_PADDED.any(axis=-1)).sum() == 2  # the two left pads may attend to nothing
    q, k, v = (torch.from_numpy(a) for a in (Q, K, V))
    m = torch.from_numpy(LEFT_PADDED)
    layer1 = attend(q, k, v, m)
    layer2 = attend(layer1, layer1, layer1, m)
    assert torch.isnan(layer1).any(-1).tolist() == [True, True, False, False, False, False]
    assert torch.isnan(layer2).all()  # even rows whose mask hides the pads
    check_prose(
        "traps-nan-spreads", torch.isnan(layer1).any(-1).sum(), torch.isnan(layer2).any(-1).sum(), 0.0 * 1.0
    )  # "a weight of exactly 0"
    assert (0.0 * torch.tensor(float("nan"))).isnan()  # why: 0 × NaN is NaN
    with pytest.raises(ValueError, match="allows no key"):
        qkv.attention(Q, K, V, mask=LEFT_PADDED)


@pytest.mark.claim("traps-nan-fix")
def test_letting_each_query_see_itself_removes_the_nan_and_changes_no_real_row():
    fixed = LEFT_PADDED | np.eye(6, dtype=bool)
    q, k, v = (torch.from_numpy(a) for a in (Q, K, V))
    layer1 = attend(q, k, v, torch.from_numpy(LEFT_PADDED))
    ok = attend(q, k, v, torch.from_numpy(fixed))
    assert not torch.isnan(ok).any()
    np.testing.assert_allclose(ok[2:].numpy(), layer1[2:].numpy(), rtol=1e-12)
    np.testing.assert_allclose(ok.numpy(), qkv.attention(Q, K, V, mask=fixed).output, rtol=1e-12)


# ---- how far the traps' conclusions hold: the sceptic's variations ---------------------


WRONG_AXIS_KEYS = (6, 64, 512)

WRONG_AXIS_SPREADS = (1.0, 0.1, 0.01)

ALLCLOSE_RTOL = 1e-5  # np.allclose's default relative tolerance, the "Catch it" assert's


def wrong_axis_worst():
    """For each (keys, spread): over 100 draws, the smallest largest |row sum - 1| that
    softmax over the queries leaves; the draws in the page's order (seed 0)."""
    rng = np.random.default_rng(0)
    worst = {}
    for n_keys in WRONG_AXIS_KEYS:
        for spread in WRONG_AXIS_SPREADS:
            found = []
            for _ in range(100):
                q, k = rng.normal(size=(2, n_keys, 8))
                by_query = softmax_by_hand(spread * (q @ k.T) / np.sqrt(8), axis=0)
                found.append(np.abs(by_query.sum(axis=-1) - 1).max())
            worst[n_keys, spread] = min(found)
    return worst


@pytest.mark.claim("traps-wrong-axis-variations")
def test_the_wrong_axis_is_caught_at_every_size_and_spread(shown):
    worst = wrong_axis_worst()
    # the direction: in every draw of every variation some row misses 1 by more than the
    # tolerance of the assert the page recommends, so the assert catches it everywhere
    assert all(w > 10 * ALLCLOSE_RTOL for w in worst.values())
    # and a loose tolerance would not: at the smallest spread the miss is under 0.01
    assert all(worst[n, 0.01] < 0.01 for n in WRONG_AXIS_KEYS)
    small = min(worst[n, 0.01] for n in WRONG_AXIS_KEYS)
    check_prose(
        "traps-wrong-axis-variations",
        1,  # "misses 1"
        worst[6, 1.0],
        6,
        worst[512, 1.0],
        512,
        1.0,  # spread 1
        small,
        0.01,
        ALLCLOSE_RTOL,
        0.01,
    )
    for (n_keys, spread), w in worst.items():  # the table the page prints
        on_page = shown.row("traps.py:wrong_axis_variations", n_keys, spread)[-1]
        assert on_page == float(f"{w:.2g}")  # printed to two significant digits


TWIN_SETTINGS = [("toy", 16, 8), (6, 16, 8), (6, 64, 64), (32, 64, 16), (32, 256, 64)]


def own_favourite_shares():
    """Per setting, over 200 draws (the page's order, seed 0): the share of queries whose
    largest score is their own key, with (X, X), (XW_Q, XW_Q) and (XW_Q, XW_K)."""
    rng = np.random.default_rng(0)
    shares = {}
    for n, d, dk in TWIN_SETTINGS:
        total = np.zeros(3)
        for _ in range(200):
            x = X if n == "toy" else rng.normal(size=(n, d))
            w_q, w_k = rng.normal(size=(2, d, dk)) / np.sqrt(d)
            for i, (q, k) in enumerate([(x, x), (x @ w_q, x @ w_q), (x @ w_q, x @ w_k)]):
                scores = q @ k.T
                total[i] += np.mean([scores[j].argmax() == j for j in range(len(x))]) / 200
        shares[n, d, dk] = (total, len(x))
    return shares


@pytest.mark.claim("traps-twin-variations")
def test_only_symmetric_scores_make_a_word_its_own_favourite(shown):
    shares = own_favourite_shares()
    for (same, tied, apart), t in shares.values():
        # thresholds fixed before the first run: symmetric scores favour the word itself,
        # independent projections about as often as chance
        assert same >= 0.8 and tied >= 0.5
        assert 0.5 / t <= apart <= 2 / t
        assert apart < tied
    same, tied = (min(s[0][i] for s in shares.values()) for i in (0, 1))
    apart_over_chance = [s[0][2] * s[1] for s in shares.values()]
    check_prose("traps-twin-variations", same, tied, min(apart_over_chance), max(apart_over_chance), 1)
    for (n, d, dk), ((same, tied, apart), t) in shares.items():
        on_page = shown.row("traps.py:twin_variations", n, d, dk)[-4:]
        np.testing.assert_allclose(on_page, [same, tied, apart, 1 / t], atol=0.005 + 1e-9)


@pytest.mark.claim("traps-overflow")
def test_the_toy_scores_fifty_times_wider_overflow_one_row_in_float32(page_output):
    q, k, _ = qkv.project(toy.embeddings(), toy.projections(toy.D_K, toy.D_V))
    wide = (q @ k.T / np.sqrt(toy.D_K) * 50).astype(np.float32)
    limit = float(np.log(np.finfo(np.float32).max))
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(wide)
        naive = e / e.sum(axis=-1, keepdims=True)
        small = np.exp(wide / 50) / np.exp(wide / 50).sum(axis=-1, keepdims=True)
    nan_rows = np.isnan(naive).any(axis=-1)
    assert np.isfinite(small).all()
    # the NaN rows are exactly those whose largest score is past the limit
    np.testing.assert_array_equal(nan_rows, wide.max(axis=-1) > limit)
    assert nan_rows.sum() == 1 and np.isnan(naive[wide.max(axis=-1).argmax()]).any()
    assert np.isfinite(qkv.softmax(wide)).all()
    fine = len(wide) - nan_rows.sum()
    np.testing.assert_allclose(naive[~nan_rows], qkv.softmax(wide)[~nan_rows], rtol=1e-5, atol=1e-6)
    check_prose("traps-overflow", limit, 50, wide.max(), fine)
    shown = page_output("traps-in-depth.md")["traps.py:overflow"]
    assert numbers(shown.splitlines()[1])[1:] == [float(nan_rows.sum()), len(wide)]
    assert numbers(shown.splitlines()[-1]) == [0.0]


# ---- the exercise moved from the chapter: left padding under a causal mask -----------------


@pytest.mark.claim("traps-exercise-left-padding")
def test_left_padding_with_a_causal_mask_empties_the_pad_queries(shown):
    # query i of sequence b sees keys 0..i; it has none when all of them are padding,
    # i.e. when i < t - length
    t, lengths = 4, [2, 4]
    by_hand = [(b, i) for b, n in enumerate(lengths) for i in range(t) if i < t - n]
    assert by_hand == [(0, 0), (0, 1)]
    padding = [i for i in range(t) if i < t - lengths[0]]  # the first sequence's pads
    check_prose("traps-exercise-left-padding", *padding, *[i for _, i in by_hand])
    left = qkv.padding_mask(lengths, t)[..., ::-1]  # padding at the start: the mirror image
    allowed = left & qkv.causal_mask(t)
    empty = [(int(b), int(i)) for b, i in zip(*np.nonzero(~allowed.any(axis=-1)), strict=True)]
    assert empty == by_hand
    with pytest.raises(ValueError, match=r"\(0, 0\)") as refused:
        qkv.attention(np.ones((2, t, 3)), np.ones((2, t, 3)), np.ones((2, t, 3)), mask=allowed)
    section = "traps_exercises.py:left_padding"
    assert (
        shown.line(section, "(sequence, query) pairs left with no key:")
        == f"(sequence, query) pairs left with no key: {by_hand}"
    )
    refusal = shown[section].split("\n", 1)[1].strip()
    assert refusal == textwrap.fill(f"qkv refuses: {refused.value}", 72)
