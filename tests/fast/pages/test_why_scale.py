"""Guards for the claims of docs/why-scale.md, "Scores grow with head width; √dₖ shrinks them
back": unit-variance projections and the chapter's exercises.
"""

from __future__ import annotations

import numpy as np
import pytest
from pages_support import DIMS, N, Z, printed, rel_se_std
from prose import check_prose

import qkv
from qkv.lab.scaling import draw_queries_keys, score_samples


@pytest.fixture(scope="module")
def exercises(page_output):
    """What the chapter's exercise solutions print."""
    return page_output("why-scale.md")


@pytest.fixture(scope="module")
def raw_scores(once_per_run):
    """The page's draws: N raw scores per d_k, seed 0, as its table's score_std calls."""
    return once_per_run("why-scale-raw", lambda: {d: score_samples(d, scale=False) for d in DIMS})


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
        check_prose("scale-init-unit-variance", comp.mean(), comp.var())


@pytest.mark.claim("scale-ex-d16")
def test_raw_scores_at_d_k_16_have_std_4(raw_scores, exercises):
    std = raw_scores[16].std()
    assert abs(std - 4) < Z * 4 * rel_se_std(16, N)
    d_k, shown_std, _, root = printed(exercises["why_scale.py:exercise_d16"], "d_k =")
    assert (d_k, root) == (16, 4)
    assert abs(shown_std - std) <= 0.005 + 1e-9
    assert abs(shown_std - 4) < Z * 4 * rel_se_std(16, N) + 0.005
    check_prose("scale-ex-d16", N, 16, std)


@pytest.mark.claim("scale-ex-sigma")
def test_dividing_by_sigma_squared_sqrt_d_k_restores_unit_std(exercises):
    sigma, d, n = 2.0, 64, 20_000
    # the page's draws: 20,000 pairs, seed 3, components scaled to std sigma
    chunks = list(draw_queries_keys(d_k=d, n_draws=n, seed=3))
    qs = np.concatenate([q for q, _ in chunks])[:, 0] * sigma
    ks = np.concatenate([k for _, k in chunks])[:, 0] * sigma
    assert qs.shape == ks.shape == (n, d)
    assert np.std(qs) == pytest.approx(sigma, rel=0.01)
    scaled = (qs * ks).sum(axis=-1) / (sigma**2 * np.sqrt(d))
    # a unit-variance sum of products of standard normals: the docstring's error applies
    assert abs(scaled.std() - 1) < Z * rel_se_std(d, n)
    _, divisor, shown_std = printed(exercises["why_scale.py:exercise_sigma"], "divide by")
    assert divisor == sigma**2 * np.sqrt(d) == 32
    assert abs(shown_std - scaled.std()) <= 0.0005 + 1e-9
    assert abs(shown_std - 1) < Z * rel_se_std(d, n) + 0.0005
    check_prose("scale-ex-sigma", ..., sigma**2 * np.sqrt(d), sigma, scaled.std())  # σ²: notation
