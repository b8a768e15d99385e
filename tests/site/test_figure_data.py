"""Every figure's numbers are one click away: a folded table under it, a CSV of each table
and the figure's SVG files to download.

The expected rows are built here from each figure's ``data()`` fields, not from the module's
``tables()``, so a table that drops, reorders or mislabels a number fails.
"""

from __future__ import annotations

import csv
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
    """Each table's body rows (row label first) from the figure's ``data()``, ``d``."""
    if name == "score-spread":
        return [[[int(k), u, s] for k, u, s in zip(d.dims, d.unscaled, d.scaled, strict=True)]]
    if name == "cross-attention":
        return [[[q, *w] for q, w in zip(d.query_words, d.weights, strict=True)]]
    if name == "explorer-widths":
        return [
            [[f"dₖ = {w}", *row] for w, row in zip(d.widths, weights, strict=True)]
            for weights in (d.scaled, d.unscaled)
        ]
    if name == "four-stages":
        return [
            [[w, r, s, p] for w, r, s, p in zip(d.words, d.raw, d.scaled, d.weights, strict=True)],
            [[w, *v] for w, v in zip([*d.words, "output"], [*d.values, d.output], strict=True)],
        ]
    if name == "kv-cache-growing":
        width = len(d.words)
        return [
            [
                [f"step {i}: {word}", len(keys), added, moved, *weights, *[""] * (width - len(weights))]
                for i, (word, keys, added, moved, weights) in enumerate(
                    zip(d.words, d.keys, d.added, d.moved, d.weights, strict=True), start=1
                )
            ]
        ]
    if name == "kv-cache-memory":
        return [[[f"{line.label} ({line.kind})", *line.gib] for line in d]]
    if name == "kv-cache-work":
        c, u = d.cached, d.uncached
        return [
            [
                [int(t), *cols]
                for t, *cols in zip(
                    d.position, c.kv_projections, u.kv_projections, c.scores, u.scores, strict=True
                )
            ]
        ]
    if name == "one-layer":
        return [
            [
                [
                    step.name,
                    "; ".join(f"{n} {' × '.join(map(str, d.arrays[n].shape))}" for n in step.outputs),
                    "yes" if d.mixes[step.name] else "no",
                ]
                for step in d.steps
            ]
        ]
    if name == "masks":
        return [
            [[w, *row] for w, row in zip(d.words, d.causal, strict=True)],
            [[w, *row] for w, row in zip(d.padded_words, d.padding, strict=True)],
        ]
    if name == "rope-pair":
        return [
            [[p, *xy, a] for p, xy, a in zip(d.positions, d.turned.tolist(), d.angles, strict=True)],
            [[m, n, b, s] for (m, n), b, s in zip(d.cases, d.between, d.scores, strict=True)],
        ]
    if name == "multi-head":
        heads = [[[w, *row] for w, row in zip(d.words, head, strict=True)] for head in d.weights]
        return [*heads, [[h, dh, f] for (h, dh), f in d.flops.items()]]
    if name == "saturation":
        return [
            [[int(k), *row] for k, row in zip(d.dims, values[scale], strict=True)]
            for values in (d.entropy, d.max_weight)
            for scale in (True, False)
        ]
    if name == "wide-scores":
        return [
            [
                [f"dₖ = {d_k}, {label}", *weights[i]]
                for i, d_k in enumerate(d.widths)
                for label, weights in (("q·k", d.unscaled), ("q·k / √dₖ", d.scaled))
            ]
        ]
    if name == "soft-vs-hard":
        return [
            [[n, s, h] for n, s, h in zip(d.names, d.soft, d.hard, strict=True)],
            [["soft (blend)", *d.soft_answer], ["hard (best key)", *d.hard_answer]],
        ]
    if name == "one-row-three-vectors":
        return [[[c, e] for c, e in zip(row.columns, row.values, strict=True)] for row in d]
    if name == "key-or-value":
        cases = ("as built", "milk's value changed", "milk's key wiped")
        return [[[c, *row] for c, row in zip(cases, m, strict=True)] for m in (d.weights, d.received)]
    if name == "tied-qk":
        return [[[w, *row] for w, row in zip(d.words, m, strict=True)] for m in (d.separate, d.tied)]
    if name == "vanishing-gradient":
        return [
            [[int(k), *row] for k, row in zip(d.dims, d.quartiles[scale], strict=True)]
            for scale in (True, False)
        ]
    if name == "data-flow":
        return [[[array, *shape] for array, shape in d.items()]]
    if name == "head-roles":
        return [[[w, *row] for w, row in zip(d.labels, m, strict=True)] for m in (d.previous, d.induction)]
    if name == "wrong-axis":
        return [[[w, *row] for w, row in zip(d.words, m, strict=True)] for m in (d.by_key, d.by_query)]
    if name == "multi-head-flow":
        return [[[w, *row] for w, row in zip(d.words, head, strict=True)] for head in d.weights]
    if name == "trained-head-types":
        return [
            [[layer + 1, *(round(x, 3) for x in row)] for layer, row in enumerate(scores)]
            for scores in d.scores.tolist()
        ]  # shown to 3 decimals
    if name == "kernel-regression":
        return [
            [[i + 1, n, r, a, k] for i, (n, r, a, k) in enumerate(zip(*panel, strict=True))]
            for panel in (d.same_norm, d.mixed_norm)
        ]
    if name == "tiled-memory":
        return [
            [
                [t, a, b, a / b]
                for t, a, b in zip(d.lengths, d.attention_mib.tolist(), d.tiled_mib.tolist(), strict=True)
            ]
        ]
    if name == "scale-training":
        from snippets.why_scale_sweep import SWEEP

        rates = SWEEP.learning_rates
        summary = [
            [f"dₖ {d_k}, T {t}, {arm_name}, rate {rate:g}", *stats]
            for (d_k, t), loss in d.loss.items()
            for arm, arm_name in ((1, "scaled"), (0, "unscaled"))
            for i, rate in enumerate(rates)
            for stats in [
                (
                    loss[:, arm, i, -1].mean(),
                    loss[:, arm, i, -1].min(),
                    loss[:, arm, i, -1].max(),
                    d.accuracy[d_k, t][:, arm, i, -1].mean(),
                )
            ]
        ]
        curves = []
        for loss in d.loss.values():
            final = loss[..., -1].mean(axis=0)  # (arm, rate): each arm's best rate, found here
            best_unscaled, best_scaled = int(np.argmin(final[0])), int(np.argmin(final[1]))
            lines = [loss[:, 1, best_scaled], loss[:, 0, best_unscaled], loss[:, 0, best_scaled]]
            means = [line.mean(axis=0) for line in lines]
            curves.append([[int(step), *(m[j] for m in means)] for j, step in enumerate(d.steps)])
        return [summary, *curves]
    if name == "dot-vs-cosine":
        columns = (d.names, d.lengths, d.angles, d.dot_scores, d.dot, d.cos_scores, d.cosine)
        return [[list(row) for row in zip(*columns, strict=True)]]
    raise AssertionError(f"no expected table for figure {name!r}: add one here")


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
    takes 10 s; tests/fast/test_why_scale.py and test_figures.py read the same run)."""
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
