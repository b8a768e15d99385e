"""Chapter 6, why divide by √d_k: the derived statistics, checked against qkv's computation.

Tolerances come from the sampling error of the estimates, derived here rather than fitted.
For q, k with independent N(0, 1) components, X = q·k has Var X = d and E X^4 = 3d² + 6d
(each product q_i k_i has fourth moment 9), so a sample variance over N independent
pairs has standard error  d · sqrt((2 + 6/d) / N), and a sample standard deviation has
relative standard error  sqrt((2 + 6/d) / N) / 2. We allow 5 standard errors: a seeded
test, and a true claim fails with probability below 1e-6 per check.
"""

from __future__ import annotations

import numpy as np
import pytest
from chapter_snippets import snippet_globals

import qkv
from qkv.scaling import saturation, score_samples, score_std

Z = 5  # standard errors allowed
DIMS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]


def rel_se_std(d: int, n: int) -> float:
    """Relative standard error of the sample std of q·k (see module docstring)."""
    return 0.5 * np.sqrt((2 + 6 / d) / n)


@pytest.fixture(scope="module")
def page():
    return snippet_globals("why_scale.py")


@pytest.mark.claim("scale-derived-variance")
@pytest.mark.parametrize("d_k", DIMS)
def test_raw_score_variance_is_d_k(d_k):
    n = 20_000
    var = score_samples(d_k, scale=False, n_draws=n).var()
    se = d_k * np.sqrt((2 + 6 / d_k) / n)
    assert abs(var - d_k) < Z * se


@pytest.mark.claim("scale-std-ratio-eight")
def test_std_grows_eightfold_from_d_k_1_to_64(page):
    n = 20_000  # the page's sample size
    se = 8 * np.hypot(rel_se_std(1, n), rel_se_std(64, n))  # ratio of two independent stds
    assert round(se, 2) == 0.09  # the standard error the page quotes
    assert abs(page["ratio"] - np.sqrt(64)) < Z * se
    assert page["ratio"] == page["spread"][64] / page["spread"][1]
    n = 200_000  # and again, ten times tighter
    se = 8 * np.hypot(rel_se_std(1, n), rel_se_std(64, n))
    ratio = score_std(64, scale=False, n_draws=n, seed=1) / score_std(1, scale=False, n_draws=n,
                                                                       seed=1)
    assert abs(ratio - 8) < Z * se


@pytest.mark.claim("scale-standard-error")
@pytest.mark.parametrize("d_k", [1, 64])
def test_standard_error_formula_matches_repeated_samples(d_k):
    repeats, n = 400, 1000
    rng = np.random.default_rng([9, d_k])
    variances = [(rng.standard_normal((n, d_k)) * rng.standard_normal((n, d_k))).sum(-1).var()
                 for _ in range(repeats)]
    predicted = d_k * np.sqrt((2 + 6 / d_k) / n)
    # the std of 400 sample variances is itself known to about 1/sqrt(2 * 400) = 3.5 %
    assert abs(np.std(variances) / predicted - 1) < Z / np.sqrt(2 * repeats)


@pytest.mark.claim("scale-standard-error")
def test_standard_error_at_the_page_sample_size_is_one_to_two_percent():
    for d_k in DIMS:
        assert 0.01 <= np.sqrt((2 + 6 / d_k) / 20_000) <= 0.02


@pytest.mark.claim("scale-variance-near-one")
@pytest.mark.parametrize("d_k", DIMS)
def test_scaled_score_variance_is_one_for_every_d_k(d_k):
    n = 20_000
    var = score_samples(d_k, scale=True, n_draws=n).var()
    assert abs(var - 1) < Z * np.sqrt((2 + 6 / d_k) / n)


# Saturation at d_k = 64 over 10,000 draws of one query and six keys.
N_SAT = 10_000


@pytest.fixture(scope="module")
def d64():
    return saturation(64, scale=False), saturation(64, scale=True)


def lower(x):  # the mean minus Z standard errors
    return x.mean() - Z * x.std() / np.sqrt(len(x))


def upper(x):
    return x.mean() + Z * x.std() / np.sqrt(len(x))


@pytest.mark.claim("scale-unscaled-near-one-hot")
def test_unscaled_largest_weight_is_near_one(d64):
    raw, scaled = d64
    assert len(raw.max_weight) == N_SAT
    assert lower(raw.max_weight) > 0.85
    assert upper(scaled.max_weight) < 0.45
    share = (raw.max_weight > 0.99).mean()
    assert share - Z * np.sqrt(share * (1 - share) / N_SAT) > 1 / 3
    assert (scaled.max_weight > 0.99).sum() == 0


@pytest.mark.claim("scale-unscaled-majority-copies")
def test_unscaled_a_single_key_takes_most_weight_in_most_draws(d64):
    raw, scaled = d64
    share = (raw.max_weight > 0.95).mean()
    assert share - Z * np.sqrt(share * (1 - share) / N_SAT) > 0.5
    assert (scaled.max_weight > 0.95).mean() < 0.01  # scaled, it almost never happens


@pytest.mark.claim("scale-init-unit-variance")
def test_qkv_projections_of_unit_variance_inputs_have_unit_variance_components():
    # W has entries N(0, 1/d_model), so a component x @ w of a unit-variance x is a sum of
    # d_model independent terms of variance 1/d_model: mean 0, variance 1, and (as for q·k
    # in the module docstring) fourth moment 3 + 6/d_model, so a sample variance over N
    # independent components has standard error sqrt((2 + 6/d_model) / N).
    d_model, width, draws = 16, 10, 2000
    rng = np.random.default_rng(7)
    q, k = [], []
    for _ in range(draws):
        p = qkv.Projections.random(rng, d_model, width)
        x = rng.standard_normal((width, d_model))
        q_, k_, _ = qkv.project(x, p)
        # the diagonal pairs row i of x with column i of W: independent components
        q.append(np.diag(q_)), k.append(np.diag(k_))
    n = draws * width
    for comp in (np.concatenate(q), np.concatenate(k)):
        assert abs(comp.mean()) < Z * np.sqrt(1 / n)
        assert abs(comp.var() - 1) < Z * np.sqrt((2 + 6 / d_model) / n)


@pytest.mark.claim("scale-unscaled-low-entropy")
def test_unscaled_entropy_is_a_sixth_of_uniform(d64):
    raw, scaled = d64
    uniform = np.log(6)
    assert upper(raw.entropy) < uniform / 6 < 0.3
    assert lower(scaled.entropy) > 1.4
    assert (raw.entropy <= uniform + 1e-12).all() and (scaled.entropy <= uniform + 1e-12).all()


@pytest.mark.claim("scale-jacobian-vanishes")
@pytest.mark.parametrize("seed", range(4))
def test_median_softmax_jacobian_is_about_nine_times_smaller_unscaled(seed):
    raw, scaled = saturation(64, scale=False, seed=seed), saturation(64, scale=True, seed=seed)
    ratio = np.median(scaled.jacobian_norm) / np.median(raw.jacobian_norm)
    assert 7.5 < ratio < 11


@pytest.mark.claim("scale-jacobian-is-gradient")
def test_softmax_jacobian_is_the_derivative_of_the_weights():
    rng = np.random.default_rng(2)
    z = rng.normal(size=6) * 3
    eps = 1e-6
    numeric = np.stack([(qkv.softmax(z + eps * e) - qkv.softmax(z - eps * e)) / (2 * eps)
                        for e in np.eye(6)], axis=1)  # column j: d w / d z_j
    np.testing.assert_allclose(qkv.softmax_jacobian(qkv.softmax(z)), numeric, atol=1e-8)
    assert np.abs(qkv.softmax_jacobian(np.eye(6)[2])).max() == 0  # one-hot: no gradient


@pytest.mark.claim("scale-d1-no-difference")
def test_at_d_k_1_scaling_changes_nothing(page):
    assert qkv.scale_factor(True, 1) == 1.0
    assert page["same"]
    raw, scaled = saturation(1, scale=False), saturation(1, scale=True)
    for a, b in zip(raw, scaled, strict=True):
        assert np.array_equal(a, b)


@pytest.fixture(scope="module")
def query_gradients():
    return {d: (saturation(d, scale=True).query_gradient_norm,
                saturation(d, scale=False).query_gradient_norm) for d in (64, 256, 512)}


@pytest.mark.claim("scale-query-gradient-64")
def test_median_query_gradient_at_64_is_about_twelve_percent_smaller_unscaled(query_gradients):
    scaled, raw = query_gradients[64]
    assert 0.86 < np.median(raw) / np.median(scaled) < 0.90  # the page's draw: "about 12 %"
    for seed in range(1, 6):  # "between 5 and 25 % with other seeds"
        ratio = (np.median(saturation(64, scale=False, seed=seed).query_gradient_norm)
                 / np.median(saturation(64, scale=True, seed=seed).query_gradient_norm))
        assert 0.75 < ratio < 0.95


@pytest.mark.claim("scale-fourth-moment-gaussian")
@pytest.mark.parametrize("d_k", [1, 2, 4, 8])
def test_fourth_moment_of_q_dot_k_depends_on_the_distribution(d_k):
    # Random signs: each product q_i k_i is itself a random sign, so q·k is a sum of d_k
    # independent signs; enumerate every sign pattern for the exact moments.
    signs = np.array(np.meshgrid(*[[-1, 1]] * d_k)).reshape(d_k, -1).sum(axis=0)
    assert (signs**2).mean() == d_k  # the variance is still d_k
    assert (signs**4).mean() == 3 * d_k**2 - 2 * d_k
    # Gaussian components: a seeded sample, with its own standard error.
    rng = np.random.default_rng([3, d_k])
    dots = (rng.standard_normal((400_000, d_k)) * rng.standard_normal((400_000, d_k))).sum(-1)
    fourth = dots**4
    assert abs(fourth.mean() - (3 * d_k**2 + 6 * d_k)) < Z * fourth.std() / np.sqrt(len(dots))


@pytest.mark.claim("scale-query-gradient-collapses")
def test_median_query_gradient_collapses_unscaled_at_256(query_gradients):
    scaled, raw = query_gradients[256]
    assert np.median(scaled) / np.median(raw) > 20
    scaled, raw = query_gradients[512]
    assert np.median(scaled) / np.median(raw) > 20


@pytest.mark.claim("scale-query-gradient-mean-larger")
def test_mean_query_gradient_is_larger_unscaled(query_gradients):
    for scaled, raw in query_gradients.values():
        assert lower(raw) > upper(scaled)
        # heavy tail: the mean sits far above the median
        assert raw.mean() > 3 * np.median(raw)


@pytest.mark.claim("scale-assumes-unit-variance")
def test_scaling_does_not_normalise_scores_of_wider_components(page):
    # components of std sigma: Var(q·k) = d σ⁴, so the scaled std is σ² = 4 for σ = 2
    rng = np.random.default_rng(4)
    n, d = 20_000, 64
    q, k = 2 * rng.standard_normal((n, d)), 2 * rng.standard_normal((n, d))
    std = ((q * k).sum(axis=-1) * qkv.scale_factor(True, d)).std()
    assert abs(std - 4) < Z * 4 * rel_se_std(d, n)
    # and the page's own 2,000 draws
    assert abs(page["scores"].std() - 4) < Z * 4 * rel_se_std(d, 2000)
    assert page["sigma"] == 2.0


@pytest.mark.claim("scale-ex-d16")
def test_raw_scores_at_d_k_16_have_std_4():
    n = 20_000
    std = score_std(16, scale=False, n_draws=n)
    assert abs(std - 4) < Z * 4 * rel_se_std(16, n)


@pytest.mark.claim("scale-ex-sigma")
def test_dividing_by_sigma_squared_sqrt_d_k_restores_unit_std(page):
    assert page["factor"] == 1 / 32 and page["qs"].shape == (20_000, 64)
    n = 20_000
    scaled = (page["qs"] * page["ks"]).sum(axis=-1) / (2.0**2 * np.sqrt(64))
    # the components are Gaussian with std 2: the scaled score is a unit-variance sum of
    # products of standard normals, so the std error of module docstring applies
    assert abs(scaled.std() - 1) < Z * rel_se_std(64, n)
    assert np.std(page["qs"]) == pytest.approx(2.0, rel=0.01)
