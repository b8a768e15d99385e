"""Guards for the claims of docs/things-to-try-in-depth.md, the explorer's experiments in
depth, recomputed from qkv's public API on the explorer's states.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from pages_support import by_state, reference
from prose import check_prose, claim_sentence, written_numbers
from qkv_site.explorer_data import explorer_json

import qkv
from qkv import toy
from qkv.lab.scaling import score_std
from qkv.toy import D_K_MAX

WORDS = toy.SENTENCE


def stated(claim_id):
    """The numbers a guarded sentence writes, in order (the exercise's threshold)."""
    return [w.value for w in written_numbers(claim_sentence(claim_id))]


@pytest.fixture(scope="module")
def data() -> dict:
    return json.loads(explorer_json())


@pytest.mark.claim("try-gradient-vanishes")
def test_4_saturated_softmax_passes_almost_no_gradient():
    she = WORDS.index("she")
    unscaled = np.abs(qkv.softmax_jacobian(reference(64, False)[2][she])).max()
    scaled = np.abs(qkv.softmax_jacobian(reference(64, True)[2][she])).max()
    assert scaled > 1000 * unscaled
    check_prose("try-gradient-vanishes", 64, unscaled, scaled)


@pytest.mark.claim("try-unscaled-eight-times")
def test_unscaled_scores_at_64_are_typically_eight_times_the_scaled_ones_at_16():
    # std(q·k) = sqrt(d_k): raw at 64 is 8; scaled at 16 is 4 / 4 = 1. Tolerance: 5 standard
    # errors of a ratio of two independent sample stds (see tests/fast/pages/test_why_scale_in_depth.py).
    n = 20_000
    ratio = score_std(64, scale=False, n_draws=n) / score_std(16, scale=True, n_draws=n)
    rel_se = np.hypot(*(0.5 * np.sqrt((2 + 6 / d) / n) for d in (64, 16)))
    assert abs(ratio - 8) < 5 * 8 * rel_se
    check_prose("try-unscaled-eight-times", 8, ..., 64, 16, 4, 1)  # "experiment 1" is a label


# ---- the exercise moved from chapter 6 --------------------------------------------------------


@pytest.mark.claim("try-ex-first-dk")
def test_she_unscaled_first_passes_the_threshold_at_the_stated_width(data):
    threshold = stated("try-ex-first-dk")[0]
    largest = [reference(d_k, False)[2][WORDS.index("she")].max() for d_k in range(1, D_K_MAX + 1)]
    first = 1 + next(i for i, w in enumerate(largest) if w > threshold)
    assert by_state(data, "max_weight", "she", first, False) > threshold
    assert by_state(data, "max_weight", "she", first - 1, False) <= threshold
    check_prose("try-ex-first-dk", threshold, first)


def test_the_first_dk_solution_prints_what_the_test_computes(page_output):
    shown = page_output("things-to-try-in-depth.md")
    threshold = stated("try-ex-first-dk")[0]
    she = [reference(d_k, False)[2][WORDS.index("she")].max() for d_k in range(1, D_K_MAX + 1)]
    first = 1 + next(i for i, w in enumerate(she) if w > threshold)
    line = shown.line("things_to_try.py:exercise_first_dk", "she, scaling off:")
    assert (
        line.split()
        == (
            f"she, scaling off: largest weight first above {threshold:g} at "
            f"d_k = {first} ({she[first - 1]:.3f}; {she[first - 2]:.3f} at "
            f"d_k = {first - 1})"
        ).split()
    )
