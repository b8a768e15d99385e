"""Render a figure to SVG, the same bytes every time.

``python -m qkv_site.figures.render NAME OUTDIR`` writes ``NAME-light.svg``, ``NAME-dark.svg``
(and ``NAME-light-narrow.svg``, ``NAME-dark-narrow.svg`` for a figure with ``NARROW = True``,
a stacked layout for phones) and ``NAME.json`` (alt text, caption, variants) into
``OUTDIR`` (with the figure's data tables, from its ``tables()``). The site's build runs
it in a fresh interpreter per figure, so no figure sees another's matplotlib settings.

Byte-identical output needs three things: seeded data (each figure's ``data()``), no
timestamp (``metadata={"Date": None}``) and SVG ids that do not depend on memory
addresses (a fixed ``svg.hashsalt`` per figure and theme).
"""

from __future__ import annotations

import importlib
import io
import json
import re
import sys
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.collections import QuadMesh

from qkv_site.figures import module_name, names
from qkv_site.figures.style import STYLES

THEMES = ("light", "dark")


def load(name: str):
    """The module of figure ``name``; ValueError naming the known figures if there is none."""
    if name not in names():
        raise ValueError(f"no figure named {name!r}; the figures are {', '.join(names())}")
    return importlib.import_module(module_name(name))


def variants(module) -> list[str]:
    """The file suffixes a figure is rendered to: ``light``, ``dark`` (+ ``-narrow``).

    Examples
    --------
    >>> variants(load("score-spread"))
    ['light', 'dark']
    >>> variants(load("masks"))  # stacks its panels on phones
    ['light', 'dark', 'light-narrow', 'dark-narrow']
    """
    layouts = ("", "-narrow") if getattr(module, "NARROW", False) else ("",)
    return [theme + layout for layout in layouts for theme in THEMES]


def render_svg(name: str, variant: str) -> bytes:
    """The SVG of figure ``name`` as ``variant`` ("light", "dark", "light-narrow", ...)."""
    module = load(name)
    if variant not in variants(module):
        raise ValueError(f"figure {name!r} has variants {variants(module)}, not {variant!r}")
    theme, _, layout = variant.partition("-")
    style = STYLES[theme]
    with matplotlib.rc_context({**style.rc(), "svg.hashsalt": f"{name}-{variant}"}):
        figure = module.build(style, narrow=True) if layout else module.build(style)
        out = io.BytesIO()
        figure.savefig(out, format="svg", metadata={"Date": None})
        check_text_inside(figure, f"{name}-{variant}")
        check_heatmaps_have_a_scale(figure, f"{name}-{variant}")
    return stable_clip_ids(out.getvalue())


def stable_clip_ids(svg: bytes) -> bytes:
    """Name the SVG's clip paths ``clip0``, ``clip1``, ... in order of first use.

    matplotlib names a clip rectangle by a hash of its coordinates, and constrained
    layout can place a rectangle a few ulps differently from one process to another
    (same drawing, another id), so hashed names would make two renders differ.

    Examples
    --------
    >>> stable_clip_ids(b'<g clip-path="url(#p3f)"/><clipPath id="p3f"/>')
    b'<g clip-path="url(#clip0)"/><clipPath id="clip0"/>'
    """
    ids = set(re.findall(rb'<clipPath id="([^"]+)"', svg))
    for n, old in enumerate(sorted(ids, key=svg.index)):  # first use: a url(#...) reference
        svg = svg.replace(b'"' + old + b'"', b'"clip%d"' % n).replace(b"#" + old + b")", b"#clip%d)" % n)
    return svg


def check_text_inside(figure, label: str) -> None:
    """Raise ValueError if anything drawn in ``figure`` sticks out past its edge.

    A layout engine that cannot fit everything (too many labels for the figure size)
    quietly pushes titles and labels past the edge; this makes that a failure instead.
    """
    tolerance = 1 / 72  # inches: text metrics differ slightly between backends
    edge = figure.bbox_inches.padded(tolerance)
    drawn = figure.get_tightbbox()  # inches; only what was drawn
    if (
        edge.containsx(drawn.x0)
        and edge.containsx(drawn.x1)
        and edge.containsy(drawn.y0)
        and edge.containsy(drawn.y1)
    ):
        return
    culprits = []
    for ax in figure.get_axes():
        box = ax.get_tightbbox().transformed(figure.dpi_scale_trans.inverted())
        if not (
            edge.containsx(box.x0)
            and edge.containsx(box.x1)
            and edge.containsy(box.y0)
            and edge.containsy(box.y1)
        ):
            culprits.append(repr(ax.get_title() or ax.get_xlabel() or ax.get_ylabel()))
    raise ValueError(
        f"{label}: the axes {', '.join(culprits) or '(a figure-level text)'} "
        f"stick out past the edge of the figure (drawn: {_inches(drawn)}, figure: "
        f"{_inches(figure.bbox_inches)}); make the figure larger or its text shorter"
    )


def check_heatmaps_have_a_scale(figure, label: str) -> None:
    """Raise ValueError if a heatmap's colours can be read by no scale.

    A colour means a number only beside a colour bar, unless every cell prints its number
    (then the colour is only a reading aid): a heatmap needs one or the other.
    """

    def scale(mappable) -> tuple:
        return mappable.cmap.name, float(mappable.norm.vmin), float(mappable.norm.vmax)

    axes = figure.get_axes()
    # one colour bar serves every heatmap drawn with its colours and its limits
    read = {scale(ax._colorbar.mappable) for ax in axes if hasattr(ax, "_colorbar")}
    bare = []
    for ax in axes:
        if hasattr(ax, "_colorbar"):
            continue  # a colour bar's own swatches
        for mesh in ax.collections:
            if not isinstance(mesh, QuadMesh) or scale(mesh) in read:
                continue
            cells = int(np.isfinite(np.ma.filled(mesh.get_array(), np.nan)).sum())
            if len(ax.texts) < cells:
                bare.append(
                    repr(ax.get_title() or ax.get_title(loc="left") or ax.get_ylabel() or "(untitled)")
                )
    if bare:
        raise ValueError(
            f"{label}: the heatmaps {', '.join(bare)} have no colour bar and do not print their "
            "numbers in their cells; add fig.colorbar(mesh, ...) so a reader can read the colours"
        )


def _inches(box) -> str:
    return f"x {box.x0:.2f} to {box.x1:.2f} in, y {box.y0:.2f} to {box.y1:.2f} in"


def write(name: str, outdir: Path) -> list[Path]:
    """Render every variant of ``name`` into ``outdir``, with its alt text and caption."""
    module = load(name)
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    for variant in variants(module):
        path = outdir / f"{name}-{variant}.svg"
        path.write_bytes(render_svg(name, variant))
        written.append(path)
    tables = [t.as_json() for t in module.tables()] if hasattr(module, "tables") else []
    meta = {
        "alt": module.ALT,
        "caption": module.CAPTION,
        "variants": variants(module),
        "tables": tables,
    }  # the numbers behind the figure (see _table.py)
    meta_path = outdir / f"{name}.json"
    meta_path.write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
    return [*written, meta_path]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m qkv_site.figures.render NAME OUTDIR", file=sys.stderr)
        return 2
    write(argv[0], Path(argv[1]))
    return 0


if __name__ == "__main__":
    matplotlib.use("svg")  # no GUI backend, nothing to probe
    sys.exit(main(sys.argv[1:]))
