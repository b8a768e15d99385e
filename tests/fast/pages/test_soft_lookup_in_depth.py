"""Guards for "Where the weighted average comes from" in docs/soft-lookup-in-depth.md (the
deep dive of chapter 1):
softmax of dot products is Nadaraya-Watson kernel regression with a Gaussian kernel when the
keys share a norm; a narrow kernel is an argmax; additive (Bahdanau) scores saturate where
dot-product scores grow; and the kernel-regression figure's findings.

The palette is the chapter's (``soft_vs_hard`` keeps it, and a test of chapter 1 checks the
page runs that one); weights are written out here with ``np.exp``, not taken from qkv; the
additive network's weights are drawn from the seed the page states.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from pages_support import BLUE, ORANGE, RED, VALUES, assert_printed, line_of, palette_weights, stated
from pages_support import WARM as WARM_ROW  # the palette's query, one row (chapter 1's pages)
from prose import check_prose
from qkv_site.figures import kernel_regression, soft_vs_hard
from support import numbers

import qkv

KEYS, NAMES = soft_vs_hard.KEYS, soft_vs_hard.NAMES
WARM = np.array([1.0, 0.0])


@pytest.fixture(scope="module")
def shown(page_output):
    return page_output("soft-lookup-in-depth.md")


def softmax_of_dots(q, keys):
    e = np.exp(keys @ q - (keys @ q).max())
    return e / e.sum()


def gaussian_weights(q, keys, variance=1.0):
    e = np.exp(-np.sum((q - keys) ** 2, axis=1) / (2 * variance))
    return e / e.sum()


@given(
    st.integers(0, 2**32 - 1),
    st.integers(1, 8),
    st.integers(1, 12),
    st.floats(0.1, 3.0),
    st.floats(0.0, 3.0),
)
def test_with_keys_of_one_norm_softmax_is_the_gaussian_kernel(seed, d, n, key_norm, query_norm):
    rng = np.random.default_rng(seed)
    keys = rng.normal(size=(n, d))
    keys *= key_norm / np.linalg.norm(keys, axis=1, keepdims=True)
    q = rng.normal(size=d)
    q *= query_norm / np.linalg.norm(q)
    np.testing.assert_allclose(softmax_of_dots(q, keys), gaussian_weights(q, keys), rtol=1e-9, atol=1e-15)


@pytest.mark.claim("lookup-kernel-regression")
def test_the_palette_with_unit_keys_is_kernel_regression(shown):
    unit = KEYS / np.linalg.norm(KEYS, axis=1, keepdims=True)
    same = np.abs(softmax_of_dots(WARM, unit) - gaussian_weights(WARM, unit)).max()
    bound = 1e-15
    assert same < bound
    differ = np.abs(softmax_of_dots(WARM, KEYS) - gaussian_weights(WARM, KEYS)).max()
    assert differ > 100 * bound  # unequal norms break the equality
    text = shown["soft_lookup.py:kernel"]
    first, second = (numbers(ln.split(":")[1]) for ln in text.splitlines()[:2])
    np.testing.assert_allclose(first, softmax_of_dots(WARM, unit), atol=5e-5 + 1e-12)
    np.testing.assert_allclose(second, gaussian_weights(WARM, unit), atol=5e-5 + 1e-12)
    assert numbers(shown.line("soft_lookup.py:kernel", "largest difference"))[0] < bound
    printed_gap = numbers(shown.line("soft_lookup.py:kernel", "the palette's own keys"))[-1]
    assert abs(printed_gap - differ) <= 0.005 + 1e-12
    check_prose("lookup-kernel-regression", 1, bound, differ)


@pytest.mark.claim("lookup-kernel-narrow")
def test_a_narrow_kernel_puts_all_weight_on_the_nearest_key(shown):
    unit = KEYS / np.linalg.norm(KEYS, axis=1, keepdims=True)
    variances = (1.0, 0.1, 0.01)
    tops = [gaussian_weights(WARM, unit, v).max() for v in variances]
    assert tops[0] < tops[1] < tops[2]  # narrower, harder
    nearest = int(np.argmin(np.linalg.norm(WARM - unit, axis=1)))
    assert NAMES[nearest] == "red"
    assert int(gaussian_weights(WARM, unit, 0.01).argmax()) == nearest
    for v, top in zip(variances, tops, strict=True):
        line = shown.line("soft_lookup.py:kernel", f"kernel variance {v}")
        assert "(red)" in line and abs(numbers(line)[-1] - top) <= 5e-5 + 1e-12
    check_prose("lookup-kernel-narrow", variances[2], np.sqrt(variances[2]), tops[2])


@pytest.mark.claim("lookup-additive-saturates")
def test_additive_scores_saturate_where_dot_products_grow(shown):
    rng = np.random.default_rng(0)  # the page's seed and draws
    w_q, w_k = rng.normal(size=(2, 2, 8))
    w_out = rng.normal(size=8)

    def additive(q):
        return np.array([w_out @ np.tanh(q @ w_q + k @ w_k) for k in KEYS])

    bound = np.abs(w_out).sum()
    for factor in (1, 10, 1000, 10**6):
        assert (np.abs(additive(WARM * factor)) <= bound).all()
    at_1000 = additive(WARM * 1000)
    assert np.ptp(at_1000) < 1e-12  # every colour scores the same
    assert np.ptp(additive(WARM)) > 0.5  # where a short query still told them apart
    dots = [KEYS @ (WARM * f) for f in (1, 10, 1000)]
    assert np.ptp(dots[2]) == 1000 * np.ptp(dots[0])  # the dot product's gaps grow with it
    line = shown.line("soft_lookup.py:additive", "x1000")
    np.testing.assert_allclose(numbers(line)[1:5], at_1000, atol=0.005 + 1e-12)
    assert abs(numbers(shown.line("soft_lookup.py:additive", "additive scores never"))[-1] - bound) <= 0.005
    check_prose("lookup-additive-saturates", bound, 1000, at_1000[0])


def test_kernel_regression_figure_states_what_its_data_show():
    d = kernel_regression.data()
    same, mixed = d.same_norm, d.mixed_norm
    np.testing.assert_allclose(same.norms, 1.0, rtol=1e-12)
    assert len(same.distance) == 40 and mixed.norms.min() >= 0.5 and mixed.norms.max() <= 1.5
    np.testing.assert_allclose(same.attention, same.kernel, rtol=1e-15 * 10, atol=0)  # "10⁻¹⁵ relative"
    ratio = mixed.attention / mixed.kernel
    assert np.abs(ratio - 1).max() > 0.2  # off the curve
    order = np.argsort(mixed.norms)
    assert (np.diff(ratio[order]) > 0).all()  # longer keys higher above it
    assert (ratio[mixed.norms > 1.4] > 1).all() and (ratio[mixed.norms < 0.6] < 1).all()
    assert int(mixed.distance.argmin()) != int(mixed.attention.argmax())
    # the drawn weights are softmax(q·k): recover q·k from the distances and norms
    # (‖q − k‖² = 1 + ‖k‖² − 2 q·k for a query of norm 1) and softmax them with np.exp
    for panel in (same, mixed):
        dots = (1 + panel.norms**2 - panel.distance**2) / 2
        e = np.exp(dots - dots.max())
        np.testing.assert_allclose(panel.attention, e / e.sum(), rtol=1e-12)
        np.testing.assert_allclose(panel.kernel.sum(), 1.0, rtol=1e-12)


@pytest.fixture(scope="module")
def shown_lookup_depth(page_output):
    """Chapter 1's deep dive: tiny weights, the origins, the exercise aimed at blue."""
    return page_output("soft-lookup-in-depth.md")


def sci(x):
    """``x`` as prose writes it, m × 10^e with 1 <= m < 10: (m, 10.0**e)."""
    e = math.floor(math.log10(abs(x)))
    return x / 10.0**e, 10.0**e


@pytest.fixture(scope="module")
def blue_at_64():
    """Blue's weight when the warm query is 64 times larger, in float64."""
    return palette_weights(64 * WARM_ROW[0])[BLUE]


@pytest.mark.claim("lookup-sharpen-never-exact")
def test_at_64_times_the_worst_key_still_has_a_tiny_positive_weight(shown_lookup_depth, blue_at_64):
    weights = qkv.attention(WARM_ROW * 64, KEYS, VALUES).weights[0]
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


# ---- moved from chapter 1: the argmax and the dict, and the factor exercise ----


@pytest.mark.claim("lookup-dict-exact")
def test_the_pages_dict_gives_orange_exactly_and_holds_no_warm(shown_lookup_depth):
    # what the page's dict prints, against the palette's own orange (a KeyError for a name
    # the dict does not hold is Python's, not the page's, to guarantee)
    text = shown_lookup_depth["soft_lookup.py:hard"]
    assert line_of(text, "palette['orange'] ->") == f"palette['orange'] -> {tuple(VALUES[ORANGE].tolist())}"
    assert line_of(text, "'warm' in palette ->") == "'warm' in palette -> False"


@pytest.mark.claim("lookup-argmax-answers")
def test_the_argmax_answers_a_query_no_key_equals_and_the_sharpened_weights_close_in_on_it(
    shown_lookup_depth,
):
    assert not any(np.array_equal(key, WARM_ROW[0]) for key in KEYS)  # no key is (1, 0)
    best = max(range(len(KEYS)), key=lambda i: float(KEYS[i] @ WARM_ROW[0]))  # by hand
    assert NAMES[best] == "red"
    # the sharpened weights close in on that row: the largest weight grows with the factor
    on_best = [qkv.attention(f * WARM_ROW, KEYS, VALUES).weights[0, best] for f in (1, 4, 16, 64)]
    assert on_best == sorted(on_best) and on_best[-1] > 0.999
    text = shown_lookup_depth["soft_lookup.py:hard"]
    assert line_of(text, "(1, 0) among the keys ->") == "(1, 0) among the keys -> False"
    assert line_of(text, "best match for (1, 0) ->") == (
        f"best match for (1, 0) -> red {tuple(VALUES[best].tolist())}"
    )
    check_prose("lookup-argmax-answers", *WARM_ROW[0])


@pytest.mark.claim("lookup-ex-factor")
def test_red_first_passes_the_threshold_at_the_stated_factor(shown_lookup_depth):
    threshold = stated("lookup-ex-factor")[0]  # the exercise's given
    on_red = {f: palette_weights(f * WARM_ROW[0])[RED] for f in range(1, 100)}
    first = min(f for f, w in on_red.items() if w > threshold)
    assert (
        qkv.attention(WARM_ROW * first, KEYS, VALUES).weights[0, RED]
        > threshold
        >= qkv.attention(WARM_ROW * (first - 1), KEYS, VALUES).weights[0, RED]
    )
    check_prose("lookup-ex-factor", threshold, first)
    line = shown_lookup_depth.line("soft_lookup.py:exercise_factor", "smallest whole factor")
    assert numbers(line) == [threshold, first]


@pytest.mark.claim("lookup-nudge")
def test_a_small_step_flips_the_best_match_but_barely_moves_the_average(shown_lookup_depth):
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
    assert_printed(
        shown_lookup_depth.line("soft_lookup.py:nudge", "best match:"), [VALUES[RED], VALUES[ORANGE]], 6
    )
    shown_before, shown_after = np.split(
        np.array(numbers(shown_lookup_depth.line("soft_lookup.py:nudge", "average:"))), 2
    )
    np.testing.assert_allclose(shown_before, soft[0], atol=5e-4 + 1e-9)
    np.testing.assert_allclose(shown_after, soft[1], atol=5e-4 + 1e-9)


# ---- moved from test_trained_model.py: this page's trained-model note, on the model --


@pytest.mark.claim("note-soft-lookup-trained")
def test_note_trained_lookups_are_soft(saturation):
    _, _, top = saturation
    assert (top[8.0] > 0.99).mean() < 0.1  # soft: one key takes almost all in few rows
    check_prose("note-soft-lookup-trained", top[8.0].mean(), 100 * (top[8.0] > 0.99).mean(), 0.99)


@pytest.mark.claim("note-soft-lookup-sink")
def test_note_the_largest_weight_is_mostly_the_sinks(texts, saturation):
    _, _, top = saturation
    largest, on_first_token = [], []
    for t in texts:
        w = t.weights.astype(np.float64)[:, :, 1:]  # (layers, heads, queries 1.., keys)
        largest.append(w.max(-1).ravel())
        on_first_token.append((w.argmax(-1) == 0).ravel())
    largest, on_first_token = np.concatenate(largest), np.concatenate(on_first_token)
    np.testing.assert_allclose(np.sort(largest), np.sort(top[8.0]), atol=1e-5)  # the same rows
    elsewhere = largest[~on_first_token].mean()
    # "mostly": the sink's rows are most rows and carry most of the mean, and the other rows'
    # largest weight is well below the overall mean
    assert on_first_token.mean() > 0.5
    assert largest[on_first_token].sum() > largest.sum() / 2
    assert elsewhere < top[8.0].mean() - 0.1
    check_prose("note-soft-lookup-sink", top[8.0].mean(), 100 * on_first_token.mean(), elsewhere)
