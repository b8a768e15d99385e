"""The sinusoids figure of chapter 9: the table is Vaswani et al.'s sin/cos position vectors
worked out by hand, and what its ALT text says of the columns' speeds holds."""

from __future__ import annotations

import math

import numpy as np
from qkv_site.figures import sinusoids as figure


def test_each_row_is_the_sines_and_cosines_of_its_position():
    d = figure.data()
    assert d.vectors.shape == (figure.T, figure.D) == (32, 16)
    for p in (0, 1, 7, 31):
        for i in range(figure.D // 2):
            angle = p / 10_000 ** (2 * i / figure.D)
            assert math.isclose(d.vectors[p, 2 * i], math.sin(angle), abs_tol=1e-12)
            assert math.isclose(d.vectors[p, 2 * i + 1], math.cos(angle), abs_tol=1e-12)
    assert d.vectors.min() >= -1 and d.vectors.max() <= 1  # "coloured from -1 to 1"


def test_alt_states_each_traced_columns_period_and_that_the_columns_slow_down():
    d = figure.data()
    assert d.traced == (0, 4, 8)
    periods = [2 * math.pi * 10_000 ** (c / figure.D) for c in d.traced]  # column 2i: pair i
    np.testing.assert_allclose(d.periods, periods, rtol=1e-12)
    assert [f"{p:.0f}" for p in periods] == ["6", "63", "628"]
    assert "about every 6 positions, column 4 about every 63" in figure.ALT
    assert "column 8 about every 628" in figure.ALT
    assert 0.4 < figure.T / periods[1] < 0.6  # "only half a wave fits" in 32 positions
    # "further right the colours change more and more slowly": the row-to-row change of the
    # sine columns shrinks from left to right
    steps = np.abs(np.diff(d.vectors[:, 0::2], axis=0)).mean(axis=0)
    assert (np.diff(steps) < 0).all()
    assert np.abs(np.diff(d.vectors[:, -2:], axis=0)).max() < 0.01  # "barely change at all"
