"""Guards for the claims of docs/attention-at-scale.md (chapter 13) that rest on what the page
prints; the properties of qkv.online_softmax, tiled_attention and linear_attention are in
test_tiled.py.

Every expected value is derived here: by hand from the update rule, from a formula, or from
qkv.attention; the page's printed output (``page_output``) is then checked against it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from prose import check_prose
from qkv_site.figures import tiled_memory
from qkv_site.figures.tiled_memory import peak_mib
from support import numbers

import qkv
from qkv.exercises import check_online_softmax

PAGE = "attention-at-scale.md"


@pytest.fixture(scope="module")
def shown(page_output):
    return page_output(PAGE)


def _update(scores):
    """The online update, written from the chapter's formula: (factor, m, s) after each score."""
    m, s, steps = -math.inf, 0.0, []
    for z in scores:
        m_new = max(m, z)
        factor = math.exp(m - m_new)
        s = s * factor + math.exp(z - m_new)
        m = m_new
        steps.append((factor, m, s))
    return steps


@pytest.mark.claim("tiled-online-by-hand")
def test_the_worked_example_by_hand(shown):
    # by hand: s = 1, then 1·e⁻² + 1, then + e⁻¹
    s2, s3 = math.exp(-2) + 1, math.exp(-2) + 1 + math.exp(-1)
    weights = [math.exp(-2) / s3, 1 / s3, math.exp(-1) / s3]
    assert [s for _, _, s in _update([1.0, 3.0, 2.0])] == pytest.approx([1.0, s2, s3], rel=1e-15)
    np.testing.assert_allclose(weights, qkv.softmax([1.0, 3.0, 2.0]), rtol=1e-12)
    printed = shown["attention_at_scale.py:by_hand"]
    assert numbers(shown.line("attention_at_scale.py:by_hand", "read 3:"))[-1] == round(s2, 4)
    assert numbers(shown.line("attention_at_scale.py:by_hand", "read 2:"))[-1] == round(s3, 4)
    assert numbers(shown.line("attention_at_scale.py:by_hand", "online:")) == [round(w, 4) for w in weights]
    assert "softmax: [0.09, 0.6652, 0.2447]" in printed
    check_prose("tiled-online-by-hand", 3, 1, 3, 1, math.exp(-2), 1, s2, 2, math.exp(-1), s3, *weights)


@pytest.mark.claim("tiled-snippet-equal")
def test_odd_blocks_single_scores_and_one_block_all_equal_attention(shown):
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(3, 50, 16))
    mask = qkv.causal_mask(50)
    want = qkv.attention(q, k, v, mask=mask).output
    for bq, bk in [(7, 6), (1, 1), (50, 50)]:
        got = qkv.tiled_attention(q, k, v, mask, block_q=bq, block_k=bk).output
        assert np.abs(got - want).max() < 1e-15
    assert 50 % 7 and 50 % 6 and 7 % 6  # "divide neither T = 50 nor each other"
    gaps = [
        numbers(line)[-1] for line in shown["attention_at_scale.py:tiled"].splitlines() if "largest" in line
    ]
    assert len(gaps) == 3 and max(gaps) < 1e-15
    assert shown.line("attention_at_scale.py:tiled", "row 9 rebuilt").endswith("True")
    assert numbers(shown["attention_at_scale.py:float32"])[-1] < 1e-5  # the docstring's float32 promise
    check_prose("tiled-snippet-equal", 7, 6, 50, 1e-15)


@pytest.mark.claim("tiled-memory-figure")
def test_the_memory_figure_attention_grows_as_t_squared_tiled_does_not():
    d = tiled_memory.data()
    t = d.lengths[-1]
    matrix = t * t * 4 / 2**20  # one float32 T × T array, by the formula
    full, tiled = d.attention_mib[-1], d.tiled_mib[-1]
    assert matrix <= full <= matrix + 4  # the matrix and little else
    # measured again here, with tiled_attention's default blocks
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((t, tiled_memory.D), dtype=np.float32) for _ in range(3))
    again = peak_mib(lambda: qkv.tiled_attention(q, k, v))
    assert abs(again - tiled) < 0.05
    # the direction: attention about x4 per doubling, tiled well under x2
    big = [i for i, n in enumerate(d.lengths) if n >= 2048]
    growth_full = d.attention_mib[big[1:]] / d.attention_mib[big[:-1]]
    growth_tiled = d.tiled_mib[big[1:]] / d.tiled_mib[big[:-1]]
    assert np.all((growth_full > 3.8) & (growth_full < 4.1)) and np.all(growth_tiled < 1.5)
    assert full / tiled > 20  # the alt text's "more than 20 times less"
    assert f"about {round(tiled)} MiB at T = {t:,}" in tiled_memory.ALT
    assert f"to {full:g} MiB at T = {t:,}" in tiled_memory.ALT
    check_prose("tiled-memory-figure", t, full, matrix, tiled, full / tiled, ...)


@pytest.mark.claim("tiled-exercise-predict")
def test_the_predicted_running_maximum_and_sum(page_output):
    (f1, m1, s1), (f2, m2, s2), (f3, _, s3) = _update([2.0, 0.0, 4.0])
    assert (f1, m1, s1) == (0.0, 2.0, 1.0) and (f2, m2) == (1.0, 2.0)
    assert s2 == pytest.approx(1 + math.exp(-2)) and f3 == pytest.approx(math.exp(-2))
    assert s3 == pytest.approx((1 + math.exp(-2)) * math.exp(-2) + 1)
    printed = page_output(PAGE)["attention_at_scale_exercises.py:predict"].splitlines()
    assert [numbers(line) for line in printed] == [
        [z, round(f, 3), m, round(s, 3)]
        for z, (f, m, s) in zip([2.0, 0.0, 4.0], _update([2.0, 0.0, 4.0]), strict=True)
    ]
    check_prose("tiled-exercise-predict", 2, m1, s1, f1, 0, f2, m2, s2, 4, f3, 1, s3)


@pytest.mark.claim("tiled-exercise-write")
def test_the_hand_written_online_softmax_matches_where_the_formula_overflows(shown):
    row = 1000 + np.random.default_rng(3).normal(size=1000) * 3
    with np.errstate(over="ignore", invalid="ignore"):
        assert np.isnan(np.exp(row) / np.exp(row).sum()).all()
    # the checker passes the solution: its first line is the sentence it gives qkv's own
    passed = str(check_online_softmax(qkv.online_softmax))
    assert shown["attention_at_scale_exercises.py:write_it"].startswith(passed + "\n")
    printed = shown.line("attention_at_scale_exercises.py:write_it", "largest difference")
    assert numbers(printed)[-1] < 1e-15
    assert numbers(shown.line("attention_at_scale_exercises.py:write_it", "weights sum to:")) == [1.0]
    check_prose("tiled-exercise-write", len(row), 1000, 1e-15)


@pytest.mark.claim("tiled-memory-variations")
def test_tiled_attention_saves_memory_under_every_variation_but_one_block(shown):
    t = 2048
    # (d, float type, causal, block_q, block_k): the page's variations
    tried = [
        (64, np.float32, False, 128, 128),
        (64, np.float32, False, 256, 256),
        (64, np.float32, False, 1024, 2048),
        (64, np.float32, False, t, t),
        (64, np.float64, False, 256, 256),
        (64, np.float32, True, 256, 256),
        (128, np.float32, False, 256, 256),
    ]
    peaks = []
    for d, dtype, causal, bq, bk in tried:
        rng = np.random.default_rng(1)  # other numbers than the page's: the sizes matter
        q, k, v = (rng.standard_normal((t, d)).astype(dtype) for _ in range(3))
        mask = np.tril(np.ones((t, t), dtype=bool)) if causal else None
        peaks.append(
            (
                # the figure's measure (tracemalloc's peak, to 0.01 MiB), not the page's
                peak_mib(lambda q=q, k=k, v=v, m=mask: qkv.attention(q, k, v, mask=m)),
                peak_mib(
                    lambda q=q, k=k, v=v, m=mask, bq=bq, bk=bk: qkv.tiled_attention(
                        q, k, v, m, block_q=bq, block_k=bk
                    )
                ),
            )
        )
    blocked = [p for p, (*_, bq, bk) in zip(peaks, tried, strict=True) if bq * bk < t * t]
    one_block = [p for p, (*_, bq, bk) in zip(peaks, tried, strict=True) if bq * bk == t * t]
    # the direction: smaller blocks than the matrix, less memory, under every variation; one
    # block holding every score, no saving
    assert all(tiled < full / 1.5 for full, tiled in blocked)
    assert all(tiled >= full for full, tiled in one_block)
    matrix = t * t * 4 / 2**20  # one float32 T × T array
    assert all(full >= matrix for full, _ in peaks)  # attention always holds the matrix
    full_b, tiled_b = zip(*blocked, strict=True)
    check_prose(
        "tiled-memory-variations",
        min(tiled_b),
        max(tiled_b),
        min(full_b),
        max(full_b),
        64,
        128,
        t,
        t,
        one_block[0][1],
        one_block[0][0],
    )
    printed = shown["attention_at_scale.py:memory_variations"].splitlines()[1:]
    assert len(printed) == len(peaks)
    for line, (full, tiled) in zip(printed, peaks, strict=True):
        assert numbers(line)[-2:] == pytest.approx([full, tiled], abs=0.06)
