"""The readers tests use on what a page prints: a value by its label or its row's first
cells, whatever the spacing, and a loud error when a label names no line or several."""

from __future__ import annotations

import pytest

TABLE = """keys  width  ceiling
   6      4    0.596
  64      4    0.105
  64    512    1,024
Mistral 7B      32 of 32       512 MiB
Mistral 7B at 32,768 tokens: 8x smaller
sum of weights: 1.0
weights identical: True
"""


@pytest.fixture
def shown(printed_page):
    return printed_page({"x.py:table": TABLE})


def test_a_row_is_found_by_its_first_cells_whatever_the_column_widths(shown, printed_page):
    assert shown.row("x.py:table", 64, 4) == [0.105]
    assert shown.row("x.py:table", "64", "512") == [1024.0]  # thousands separators dropped
    assert shown.row("x.py:table", "Mistral 7B", 32, "of") == [32.0, 512.0]
    respaced = printed_page({"x.py:table": TABLE.replace("  64    512", "64 512")})
    assert respaced.row("x.py:table", 64, 512) == [1024.0]


def test_a_row_or_label_that_names_no_line_or_several_is_an_error(shown):
    with pytest.raises(KeyError, match="0 rows start with"):
        shown.row("x.py:table", 6, 16)
    with pytest.raises(KeyError, match="2 rows start with"):
        shown.row("x.py:table", "Mistral 7B")
    with pytest.raises(KeyError, match="2 printed lines start with"):
        shown.values("x.py:table", "Mistral")


def test_a_value_and_a_flag_are_read_by_their_label(shown):
    assert shown.values("x.py:table", "sum of weights:") == [1.0]
    assert shown.flag("x.py:table", "weights identical:") is True
    with pytest.raises(ValueError, match=r"ends with '1\.0'"):
        shown.flag("x.py:table", "sum of weights:")
