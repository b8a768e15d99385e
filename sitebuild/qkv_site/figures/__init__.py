"""Figures for the qkv site, each drawn from qkv's own computations.

A figure is one module here, named after the figure with ``-`` spelled ``_``
(``score-spread`` lives in ``score_spread.py``). It exposes:

- ``ALT``: what the figure shows, stated as a finding (the ``alt`` text of its images);
- ``CAPTION``: one or two sentences printed under it;
- ``data()``: the numbers it plots, computed with ``qkv`` (tests check ``ALT`` against them);
- ``build(style) -> matplotlib.figure.Figure``: the drawing, in a :class:`~qkv_site.figures.style.Style`;
- optionally ``NARROW = True`` and ``build(style, narrow=True)``: a stacked layout that the
  site shows instead on screens narrower than 600 px.

Modules whose name starts with ``_``, and ``style``, are helpers, not figures.
``python -m qkv_site.figures.render NAME OUTDIR`` renders one figure in both themes; the site's
build plugin (``qkv_site.artifacts.figures``) does the same for every figure, and a chapter
places one with ``<!-- figure: NAME -->``.

This file imports nothing but the standard library, so the build can read the list of
figures without importing numpy or matplotlib.

Examples
--------
>>> "score-spread" in names()
True
>>> module_name("kv-cache-memory")
'qkv_site.figures.kv_cache_memory'
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
HELPERS = frozenset({"style", "render"})


def names(folder: Path = HERE) -> list[str]:
    """The name of every figure whose module is in ``folder``, sorted."""
    stems = (p.stem for p in folder.glob("*.py"))
    return sorted(s.replace("_", "-") for s in stems if not s.startswith("_") and s not in HELPERS)


def module_name(name: str) -> str:
    """The importable module of figure ``name``."""
    return "qkv_site.figures." + name.replace("-", "_")
