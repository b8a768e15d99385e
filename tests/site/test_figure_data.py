"""Every figure's numbers are one click away: a folded table under it, a CSV of each table
and the figure's SVG files to download.

The expected rows are built here from each figure's ``data()`` fields, not from the module's
``tables()``, so a table that drops, reorders or mislabels a number fails.
"""

from __future__ import annotations

import csv
import importlib
import io
import math
import urllib.parse
from pathlib import Path

import numpy as np
import pytest
from bs4 import BeautifulSoup
from qkv_site.figures import names
from qkv_site.figures.render import load
from support import html_pages

pytestmark = pytest.mark.build

RTOL = 1e-5  # the tables show 6 significant digits


def expected_tables(name: str, d) -> list[list[list]]:
    """Each table's body rows (row label first) from the figure's ``data()``, ``d``: the
    figure's module in tests/figure_tables/."""
    try:
        module = importlib.import_module(f"figure_tables.{name.replace('-', '_')}")
    except ModuleNotFoundError:
        raise AssertionError(
            f"no expected table for figure {name!r}: add tests/figure_tables/{name.replace('-', '_')}.py"
        ) from None
    return module.expected(d)


def assert_rows_equal(shown: list[list[str]], want: list[list], where: str) -> None:
    assert len(shown) == len(want), f"{where}: {len(shown)} rows, expected {len(want)}"
    for got_row, want_row in zip(shown, want, strict=True):
        assert len(got_row) == len(want_row), f"{where}: row {got_row} vs {want_row}"
        assert got_row[0] == str(want_row[0]), f"{where}: row label {got_row[0]!r}"
        for got, value in zip(got_row[1:], want_row[1:], strict=True):
            if isinstance(value, str):  # a label cell, such as a token
                assert got == value, f"{where}, row {got_row[0]!r}: shows {got!r}, data() has {value!r}"
                continue
            assert math.isclose(float(got), float(value), rel_tol=RTOL, abs_tol=1e-12), (
                f"{where}, row {got_row[0]!r}: shows {got}, data() has {value!r}"
            )


def figure_blocks(site: Path) -> dict[str, tuple[Path, object]]:
    """The first data block of each figure in the built site, with the page that holds it."""
    found = {}
    for page in html_pages(site):
        soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
        for block in soup.select("details.qkv-figure-data"):
            found.setdefault(block["data-figure-data"], (page, block))
    return found


@pytest.fixture(scope="module")
def figure_data(once_per_run):
    """``figure_data(name)``: the figure's ``data()``, once per run (scale-training's sweep
    takes 10 s; tests/fast/pages/test_why_scale_in_depth.py and test_figures.py read the same run)."""
    return lambda name: once_per_run(f"figure-data-{name}", load(name).data)


@pytest.fixture(scope="module")
def blocks(built_site):
    return figure_blocks(built_site)


def test_every_figure_has_a_folded_data_block(blocks):
    assert sorted(blocks) == names()
    for name, (_, block) in blocks.items():
        assert block.parent.name == "figure" and block.parent["data-figure"] == name
        assert "open" not in block.attrs, f"{name}: the data block starts folded"


@pytest.mark.parametrize("name", names())
def test_table_numbers_are_the_data_behind_the_figure(blocks, name, figure_data):
    _, block = blocks[name]
    tables = block.select("table.qkv-data")
    want = expected_tables(name, figure_data(name))
    assert len(tables) == len(want), f"{name}: {len(tables)} tables, expected {len(want)}"
    for i, (table, rows) in enumerate(zip(tables, want, strict=True)):
        assert table.caption and table.caption.get_text(strip=True), f"{name}: table {i} title"
        shown = [[c.get_text() for c in tr.find_all(["th", "td"])] for tr in table.tbody.find_all("tr")]
        assert_rows_equal(shown, rows, f"{name} table {i + 1}")
        assert all(tr.th and tr.th.get("scope") == "row" for tr in table.tbody.find_all("tr"))


@pytest.mark.parametrize("name", names())
def test_csv_download_holds_the_same_table(blocks, name):
    _, block = blocks[name]
    links = block.select('a[href^="data:text/csv"]')
    tables = block.select("table.qkv-data")
    assert len(links) == len(tables)
    for link, table in zip(links, tables, strict=True):
        assert link["download"].endswith(".csv")
        text = urllib.parse.unquote(link["href"].split(",", 1)[1])
        header, *rows = list(csv.reader(io.StringIO(text)))
        assert header == [th.get_text() for th in table.thead.find_all("th")]
        assert rows == [
            [c.get_text() for c in tr.find_all(["th", "td"])] for tr in table.tbody.find_all("tr")
        ]


@pytest.mark.parametrize("name", names())
def test_svg_downloads_resolve(blocks, name):
    page, block = blocks[name]
    svgs = block.select('a[download$=".svg"]')
    assert [a["download"] for a in svgs] == [f"{name}-light.svg", f"{name}-dark.svg"]
    for a in svgs:
        target = (page.parent / a["href"]).resolve()
        assert target.is_file() and target.read_bytes().lstrip().startswith((b"<?xml", b"<svg"))


def test_expected_tables_are_not_vacuous(figure_data):
    """The reference rows hold real numbers (a data() that returned nothing would pass)."""
    expected = {n: expected_tables(n, figure_data(n)) for n in names()}
    counts = {n: sum(len(rows) for rows in tables) for n, tables in expected.items()}
    assert all(c >= 2 for c in counts.values()), counts
    assert np.isfinite(
        [
            float(v)
            for tables in expected.values()
            for rows in tables
            for row in rows
            for v in row[1:]
            if not isinstance(v, str)
        ]
    ).all()
