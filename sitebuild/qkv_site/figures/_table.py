"""The numbers behind a figure, as tables a reader can read, copy or download.

A figure module may define ``tables() -> list[Table]`` built from its own ``data()``: the
render step stores them in the figure's JSON meta, and the site shows them folded under the
figure (``details_html``), with a CSV download of each and the figure's SVG files. A screen
reader user gets the numbers one click away; everyone gets them to reuse.

Imports only the standard library: the build plugin formats the tables without numpy.

Examples
--------
>>> t = Table("Spread", ("d_k", "std"), ((1, 0.98765432), (64, 8.0)))
>>> print(t.csv(), end="")
d_k,std
1,0.987654
64,8
>>> t.html().startswith('<table class="qkv-data"><caption>Spread</caption>')
True
"""

from __future__ import annotations

import csv
import html
import io
import urllib.parse
from dataclasses import dataclass

SIGNIFICANT = 6  # digits shown of each number: more than any figure can show


def cell(value) -> str:
    """A number to ``SIGNIFICANT`` digits (a true integer as it is); text unchanged."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    number = float(value)
    if number.is_integer() and abs(number) < 1e15:
        return str(int(number))
    return f"{number:.{SIGNIFICANT}g}"


@dataclass(frozen=True)
class Table:
    """A titled table; the first cell of each row labels the row (a ``th``)."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple, ...]

    def __post_init__(self):
        for row in self.rows:
            if len(row) != len(self.columns):
                raise ValueError(
                    f"table {self.title!r}: a row has {len(row)} cells for "
                    f"{len(self.columns)} columns: {row!r}"
                )

    def cells(self) -> list[list[str]]:
        return [[cell(v) for v in row] for row in self.rows]

    def csv(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(self.columns)
        writer.writerows(self.cells())
        return out.getvalue()

    def html(self) -> str:
        esc = html.escape
        head = "".join(f'<th scope="col">{esc(c)}</th>' for c in self.columns)
        body = "".join(
            f'<tr><th scope="row">{esc(row[0])}</th>'
            + "".join(f"<td>{esc(c)}</td>" for c in row[1:])
            + "</tr>"
            for row in self.cells()
        )
        return (
            f'<table class="qkv-data"><caption>{esc(self.title)}</caption>'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        )

    def as_json(self) -> dict:
        return {"title": self.title, "columns": list(self.columns), "rows": self.cells()}

    @classmethod
    def from_json(cls, meta: dict) -> Table:
        return cls(meta["title"], tuple(meta["columns"]), tuple(map(tuple, meta["rows"])))


def matrix(title: str, corner: str, row_labels, column_labels, values) -> Table:
    """A table of a 2-D array: one row per ``row_labels`` entry, one column per column label."""
    rows = tuple((str(label), *map(float, line)) for label, line in zip(row_labels, values, strict=True))
    return Table(title, (corner, *map(str, column_labels)), rows)


def details_html(name: str, tables: list[Table], svg_urls: dict[str, str]) -> str:
    """The folded block under figure ``name``: its tables, a CSV of each, its SVG files.

    ``svg_urls`` maps a label ("light", "dark") to the URL of that SVG from the page.
    """
    parts = []
    for i, table in enumerate(tables, start=1):
        href = "data:text/csv;charset=utf-8," + urllib.parse.quote(table.csv())
        filename = f"{name}-data{'' if len(tables) == 1 else f'-{i}'}.csv"
        parts.append(
            f'<div class="qkv-data-wrap">{table.html()}</div>'
            f'<p class="qkv-data-links"><a href="{href}" download="{filename}">'
            f"Download this table as CSV ({html.escape(filename)})</a></p>"
        )
    svgs = " · ".join(
        f'<a href="{url}" download="{name}-{label}.svg">SVG, {label} theme</a>'
        for label, url in svg_urls.items()
    )
    summary = "The numbers behind this figure" if tables else "Download this figure"
    return (
        f'<details class="qkv-figure-data" data-figure-data="{name}"><summary>{summary}'
        f'</summary>{"".join(parts)}<p class="qkv-data-links">Download the figure: {svgs}</p>'
        f"</details>"
    )
