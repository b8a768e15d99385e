"""Figures: deterministic, cached, placed by the chapters, and showing what their alt text says.

The build hook is ``hooks/figures.py``; the figures are the modules of ``sitebuild/qkv_site/figures/``.
Tests that change code work on a temporary copy of ``qkv/`` and a temporary cache, never
on the real tree.
"""

from __future__ import annotations

import importlib.util
import io
import math
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from chapter_snippets import snippet_globals
from qkv_site.figures import (
    cross_attention,
    four_stages,
    kv_cache_memory,
    kv_cache_work,
    masks,
    multi_head,
    saturation,
    score_spread,
    soft_vs_hard,
    tied_qk,
    vanishing_gradient,
)
from qkv_site.figures.render import load
from qkv_site.figures.style import DARK, LIGHT
from support import ROOT, build_site, html_pages

from qkv import MODELS, kv_cache_bytes, toy


def _load_hook():
    spec = importlib.util.spec_from_file_location("figures_hook", ROOT / "hooks" / "figures.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


hook = _load_hook()
NAMES = hook.figure_names()


def copy_project_qkv(dest: Path, keep: set[str] | None = None) -> Path:
    """Copy ``qkv/`` and the site package to ``dest``; with ``keep``, drop every figure module
    not named in it."""
    for package in ("qkv", "sitebuild/qkv_site"):
        shutil.copytree(ROOT / package, dest / package, ignore=shutil.ignore_patterns("__pycache__"))
    if keep is not None:
        for name in set(NAMES) - keep:
            hook.module_path(name, dest).unlink()
    return dest


# ---- the built site: every placed figure exists, every figure is placed ---------------------


class _FigureParser(HTMLParser):
    def __init__(self):
        super().__init__()
        self.figures: list[str] = []  # ids of <figure class="qkv-figure">
        self.images: list[dict] = []  # attributes of <img> and <source> inside them
        self._depth = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "figure" and "qkv-figure" in (attrs.get("class") or ""):
            self.figures.append(attrs["data-figure"])
            self._depth = 1
        elif self._depth and tag in ("img", "source"):
            self.images.append({"tag": tag, **attrs})

    def handle_endtag(self, tag):
        if tag == "figure":
            self._depth = 0


def _site_figures(site: Path):
    """(page, figure ids, image attributes) for every built page that shows a figure."""
    found = []
    for page in html_pages(site):
        parser = _FigureParser()
        parser.feed(page.read_text(encoding="utf-8"))
        if parser.figures:
            found.append((page, parser.figures, parser.images))
    return found


def test_every_figure_is_placed_and_every_placed_figure_exists(built_site):
    placed = {name for _, names, _ in _site_figures(built_site) for name in names}
    assert placed - set(NAMES) == set(), "pages show figures that sitebuild/qkv_site/figures/ does not have"
    assert set(NAMES) - placed == set(), "figures that no page places"


def test_every_image_of_a_figure_resolves_and_every_generated_file_is_used(built_site):
    used = set()
    for page, _, images in _site_figures(built_site):
        for image in images:
            url = (image.get("src") or image.get("srcset")).split("#")[0]
            target = (page.parent / url).resolve()
            assert target.is_file(), f"{page.relative_to(built_site)}: {url} does not exist"
            used.add(target)
    generated = {p.resolve() for p in (built_site / "figures").glob("*.svg")}
    assert generated, "the build generated no figures"
    assert generated - used == set(), "generated figures that no page shows"


def test_every_figure_image_has_alt_text_and_a_theme(built_site):
    for page, names, images in _site_figures(built_site):
        imgs = [i for i in images if i["tag"] == "img"]
        assert len(imgs) == 2 * len(names), page
        for img in imgs:
            assert img.get("alt", "").strip(), f"{page}: {img['src']} has no alt text"
            assert img["src"].endswith(("#only-light", "#only-dark")), img["src"]
            assert int(img["width"]) > 0 and int(img["height"]) > 0


def test_no_figure_token_is_left_in_the_built_pages(built_site):
    leftovers = [p.relative_to(built_site).as_posix() for p in html_pages(built_site)
                 if re.search(r"<!--\s*figure:", p.read_text(encoding="utf-8"))]
    assert leftovers == []


# ---- determinism and the cache --------------------------------------------------------------


def test_a_fresh_render_is_byte_identical_to_the_built_site(built_site, tmp_path):
    """Two renders, by different processes at different times, give the same bytes.

    The build renders in children forked from a zygote process; this renders each figure
    in a plain ``python -m qkv_site.figures.render`` subprocess, so it also checks that the two
    ways agree.
    """
    def fresh(name):
        return hook.render_cached(name, tmp_path / "cache", ROOT, NAMES,
                                  run=hook.run_in_subprocess)

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for figure in pool.map(fresh, NAMES):
            assert figure.rendered, f"{figure.name} came from a cache that should be empty"
            for variant, svg in figure.svgs.items():
                built = (built_site / hook.site_path(figure.name, variant)).read_bytes()
                assert svg == built, f"{figure.name}-{variant}.svg differs between two renders"


# ---- the hook in a small project: failing builds, nested pages, QKV_FIGURES=off -----------


def _mini_project(tmp_path: Path, pages: dict[str, str], keep: set[str]) -> Path:
    root = copy_project_qkv(tmp_path / "project", keep=keep)
    (root / "hooks").mkdir()
    shutil.copy(ROOT / "hooks" / "figures.py", root / "hooks" / "figures.py")
    (root / "mkdocs.yml").write_text(
        "site_name: figures test\ntheme: {name: mkdocs}\nhooks: [hooks/figures.py]\n")
    for path, text in pages.items():
        (root / "docs" / path).parent.mkdir(parents=True, exist_ok=True)
        (root / "docs" / path).write_text(text)
    return root


def _build(root: Path, cache: Path, **env) -> subprocess.CompletedProcess:
    return build_site(root / "site", {"QKV_FIGURES_CACHE": str(cache), **env}, cwd=root)


FIGURE_PAGE = "# Memory\n\n<!-- figure: kv-cache-memory -->\n\n```\n<!-- figure: in-code -->\n```\n"


def test_mini_build_places_figures_with_paths_relative_to_nested_pages(tmp_path):
    pages = {"index.md": FIGURE_PAGE, "deep/er/page.md": FIGURE_PAGE,
             "twice.md": FIGURE_PAGE + "\n<!-- figure: kv-cache-memory -->\n"}
    root = _mini_project(tmp_path, pages, keep={"kv-cache-memory"})
    done = _build(root, tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    assert "figures: 1 rendered, 0 from cache;" in done.stderr
    nested = (root / "site" / "deep" / "er" / "page" / "index.html").read_text()
    assert 'src="../../../figures/kv-cache-memory-light.svg#only-light"' in nested
    assert "&lt;!-- figure: in-code --&gt;" in nested, "a token in a code block stays code"
    assert (root / "site" / "figures" / "kv-cache-memory-dark.svg").is_file()
    twice = (root / "site" / "twice" / "index.html").read_text()
    assert twice.count('data-figure="kv-cache-memory"') == 2
    assert twice.count('id="figure-kv-cache-memory"') == 1, "ids stay unique on a page"

    again = _build(root, tmp_path / "cache")
    assert "figures: 0 rendered, 1 from cache;" in again.stderr, "a rebuild renders nothing"


def test_mini_build_fails_naming_a_failing_figure_script(tmp_path):
    root = _mini_project(tmp_path, {"index.md": "# Home\n"}, keep=set())
    (hook.figures_folder(root) / "broken_demo.py").write_text(
        'ALT = CAPTION = "x"\n\ndef build(style):\n    return 1 / 0\n')
    done = _build(root, tmp_path / "cache")
    assert done.returncode != 0
    assert "figure script sitebuild/qkv_site/figures/broken_demo.py failed" in done.stderr
    assert "ZeroDivisionError" in done.stderr


def test_mini_build_fails_naming_the_page_and_an_unknown_token(tmp_path):
    pages = {"index.md": "# Home\n", "a.md": "# A\n\n<!-- figure: nope -->\n"}
    root = _mini_project(tmp_path, pages, keep={"kv-cache-memory"})
    done = _build(root, tmp_path / "cache", QKV_FIGURES="off")  # names are checked even off
    assert done.returncode != 0
    assert "a.md: unknown figure in '<!-- figure: nope -->'" in done.stderr


def test_mini_build_with_figures_off_renders_nothing_and_says_so(tmp_path):
    root = _mini_project(tmp_path, {"index.md": FIGURE_PAGE}, keep={"kv-cache-memory"})
    done = _build(root, tmp_path / "cache", QKV_FIGURES="off")
    assert done.returncode == 0, done.stderr
    page = (root / "site" / "index.html").read_text()
    assert "QKV_FIGURES=off" in page and "<img" not in page
    assert not (root / "site" / "figures").exists()
    assert not (tmp_path / "cache").exists()
