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

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from prose import check_prose
from qkv_site.figures import kernel_regression, soft_vs_hard
from support import numbers

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
