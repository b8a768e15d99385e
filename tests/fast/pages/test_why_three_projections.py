"""Guards for the claims of docs/why-three-projections.md, "Only two products matter".

Each test derives its fact itself, from qkv's public API applied to ``qkv.toy`` data, from
hand-written NumPy or from algebra, and then checks that what the page prints under its
executed blocks (``page_output``) agrees with it, to the printed rounding. No expected value
is copied from the printed output, and no test reads a name a snippet defines.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pages_support import (
    CUP,
    E_4,
    E_8,
    FROM,
    assert_printed,
    line_of,
    random_tied_case,
    scores_of,
    seeds,
    stated,
    widths,
)
from prose import check_prose
from support import ROOT, numbers

import qkv
from qkv import toy
from qkv.exercises import check_merged_scores

# ---- 4. Only two products matter: query-key and value-output -------------------------


@pytest.fixture(scope="module")
def shown_three(page_output):
    return page_output("why-three-projections.md")


def invertible(seed, n):
    """A random n x n matrix, checked to be well conditioned enough to invert."""
    m = np.random.default_rng(seed).normal(size=(n, n))
    assert np.linalg.cond(m) < 1e6
    return m


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


def section_code(name: str) -> str:
    text = (ROOT / "snippets" / "tie_query_key.py").read_text(encoding="utf-8")
    return text.split(f"# --8<-- [start:{name}]\n", 1)[1].split(f"# --8<-- [end:{name}]", 1)[0]


def test_the_skeleton_runs_its_checker_which_says_it_is_not_written_yet(capsys):
    # the page shows the skeleton; run alone, as a reader copies it, the checker answers
    exec(compile(section_code("write_merged_skeleton"), "write_merged_skeleton", "exec"), {})
    printed = " ".join(capsys.readouterr().out.split())
    assert printed.startswith("Your function raised NotImplementedError: your code here (")


@pytest.mark.claim("three-ex-write-merged")
def test_the_merged_scores_solution_passes_and_the_other_divisor_and_sides_do_not(shown_three):
    def right(x, w_q, w_k):
        q, k, _ = qkv.project(x, qkv.Projections(w_q, w_k, w_k))
        return q @ k.T / np.sqrt(w_q.shape[1])

    passed = str(check_merged_scores(right))
    assert shown_three["tie_query_key.py:write_merged"].startswith(passed + "\n")
    # "divide by √d_k, the width of the dot products rather than of the merged matrix"
    by_d_model = check_merged_scores(lambda x, w_q, w_k: x @ w_q @ w_k.T @ x.T / np.sqrt(x.shape[1]))
    assert not by_d_model.ok and "√d_model" in by_d_model.message
    # "the words on both sides of the merged matrix"
    outside_in = check_merged_scores(lambda x, w_q, w_k: x.T @ x @ w_q @ w_k.T / np.sqrt(w_q.shape[1]))
    assert not outside_in.ok and "not (T, T)" in outside_in.message


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
