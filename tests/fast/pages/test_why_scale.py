"""Guards for the claims of docs/why-scale.md, "Scores grow with head width; √dₖ shrinks them
back": unit-variance projections and the chapter's exercises (the one on components wider
than 1 is on the deep dive, test_why_scale_in_depth.py).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from pages_support import DIMS, N, Z, printed, rel_se_std
from prose import check_prose

import qkv
from qkv.exercises import check_scaled_scores
from qkv.lab.scaling import score_samples


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


@pytest.mark.claim("scale-ex-write-scores")
def test_the_written_scores_pass_and_spread_about_1_where_raw_ones_spread_about_8(exercises):
    result = check_scaled_scores(lambda q, k: q @ k.T / np.sqrt(q.shape[-1]))
    assert result.ok
    verdict = " ".join(exercises["why_scale.py:write_scaled_scores"].split())
    assert verdict == result.message
    ((scaled, raw),) = re.findall(
        r"deviation (\d+\.\d+), where the raw scores spread with (\d+\.\d+)", verdict
    )
    d_k = 64
    assert abs(float(scaled) - 1) < 0.05 and abs(float(raw) - np.sqrt(d_k)) < 0.4
    # "about 1 at d_k = 64, where the raw scores spread about 8": to the units written
    check_prose("scale-ex-write-scores", round(float(scaled)), d_k, round(float(raw)))
