"""Figures on the built site: every figure placed, every image resolving, same bytes as a
fresh render; and the plugin in a small project (nested pages, failures, disabled).

The figures are the modules of ``sitebuild/qkv_site/figures/``; the build computes them with
the qkv-artifacts plugin (``sitebuild/qkv_site/artifacts/``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from bs4 import BeautifulSoup
from bs4.element import Comment
from qkv_site.artifacts.figures import site_path
from qkv_site.figures import names
from qkv_site.figures.render import load, variants
from support import HANG, ROOT, build_site, html_pages

NAMES = names()


def _site_figures(site: Path):
    """(page, figure names, <img>/<source> tags) for every built page that shows a figure."""
    found = []
    for page in html_pages(site):
        soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
        figures = soup.select("figure.qkv-figure")
        if figures:
            found.append(
                (
                    page,
                    [f["data-figure"] for f in figures],
                    [tag for f in figures for tag in f.select("img, source")],
                )
            )
    return found


def test_every_figure_is_placed_and_every_placed_figure_exists(built_site):
    placed = {name for _, names_, _ in _site_figures(built_site) for name in names_}
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
    for page, names_, images in _site_figures(built_site):
        imgs = [i for i in images if i.name == "img"]
        assert len(imgs) == 2 * len(names_), page
        for img in imgs:
            assert img.get("alt", "").strip(), f"{page}: {img['src']} has no alt text"
            assert img["src"].endswith(("#only-light", "#only-dark")), img["src"]
            assert int(img["width"]) > 0 and int(img["height"]) > 0


def test_no_figure_token_is_left_in_the_built_pages(built_site):
    def has_token(page: Path) -> bool:
        soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
        return any(re.match(r"\s*figure:", c) for c in soup.find_all(string=lambda s: isinstance(s, Comment)))

    assert [p.relative_to(built_site).as_posix() for p in html_pages(built_site) if has_token(p)] == []


def test_the_render_command_gives_the_bytes_the_build_placed(built_site, tmp_path):
    """``python -m qkv_site.figures.render`` (what a contributor runs to look at a figure)
    gives what the build placed, which renders in children forked from a worker process.

    One figure with all four variants is enough here: that every figure renders to the same
    bytes in another build, by other processes at another time, is
    tests/site/test_reproducible.py's clean build.
    """
    name = "masks"
    assert variants(load(name)) == ["light", "dark", "light-narrow", "dark-narrow"]
    out = tmp_path / "fresh"
    done = subprocess.run(
        [sys.executable, "-m", "qkv_site.figures.render", name, str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG,
        env={"MPLBACKEND": "svg", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    for variant in variants(load(name)):
        built = (built_site / site_path(name, variant)).read_bytes()
        fresh = (out / f"{name}-{variant}.svg").read_bytes()
        assert fresh == built, f"{name}-{variant}.svg differs between two renders"


# ---- the plugin in a small project: nested pages, failures, disabled ----------------------


def _mini_project(tmp_path: Path, pages: dict[str, str], keep: set[str]) -> Path:
    root = tmp_path / "project"
    for package in ("qkv", "sitebuild/qkv_site"):
        shutil.copytree(ROOT / package, root / package, ignore=shutil.ignore_patterns("__pycache__"))
    for name in set(NAMES) - keep:
        (root / "sitebuild" / "qkv_site" / "figures" / f"{name.replace('-', '_')}.py").unlink()
    (root / "mkdocs.yml").write_text(
        "site_name: figures test\ntheme: {name: mkdocs}\n"
        "plugins:\n  - qkv-artifacts:\n      enabled: !ENV [QKV_ARTIFACTS, true]\n"
        "      cache_dir: !ENV QKV_CACHE\n"
    )
    for path, text in pages.items():
        (root / "docs" / path).parent.mkdir(parents=True, exist_ok=True)
        (root / "docs" / path).write_text(text)
    return root


def _build(root: Path, cache: Path, **env) -> subprocess.CompletedProcess:
    return build_site(root / "site", {"QKV_CACHE": str(cache), **env}, cwd=root)


FIGURE_PAGE = "# Memory\n\n<!-- figure: kv-cache-memory -->\n\n```\n<!-- figure: in-code -->\n```\n"


def test_mini_build_places_figures_with_paths_relative_to_nested_pages(tmp_path):
    pages = {
        "index.md": FIGURE_PAGE,
        "deep/er/page.md": FIGURE_PAGE,
        "twice.md": FIGURE_PAGE + "\n<!-- figure: kv-cache-memory -->\n",
    }
    root = _mini_project(tmp_path, pages, keep={"kv-cache-memory"})
    done = _build(root, tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    assert "artifacts: 1 computed (1 figures), 0 from the cache" in done.stderr
    nested = BeautifulSoup((root / "site" / "deep" / "er" / "page" / "index.html").read_text(), "html.parser")
    assert nested.select_one("figure img")["src"] == "../../../figures/kv-cache-memory-light.svg#only-light"
    assert nested.find("code").get_text().strip() == "<!-- figure: in-code -->", (
        "a token in a code block stays code"
    )
    assert (root / "site" / "figures" / "kv-cache-memory-dark.svg").is_file()
    twice = BeautifulSoup((root / "site" / "twice" / "index.html").read_text(), "html.parser")
    assert len(twice.select('figure[data-figure="kv-cache-memory"]')) == 2
    assert len(twice.select("#figure-kv-cache-memory")) == 1, "ids stay unique on a page"

    again = _build(root, tmp_path / "cache")
    assert "artifacts: 0 computed (none), 1 from the cache" in again.stderr, "a rebuild renders nothing"


def test_a_figure_no_page_places_is_not_rendered(tmp_path):
    root = _mini_project(tmp_path, {"index.md": FIGURE_PAGE}, keep={"kv-cache-memory", "masks"})
    done = _build(root, tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    assert "artifacts: 1 computed (1 figures), 0 from the cache" in done.stderr
    assert not list((root / "site" / "figures").glob("masks-*"))


def test_mini_build_fails_naming_a_failing_figure_script(tmp_path):
    root = _mini_project(tmp_path, {"index.md": "# Home\n\n<!-- figure: broken-demo -->\n"}, keep=set())
    (root / "sitebuild" / "qkv_site" / "figures" / "broken_demo.py").write_text(
        'ALT = CAPTION = "x"\n\ndef build(style):\n    return 1 / 0\n'
    )
    done = _build(root, tmp_path / "cache")
    assert done.returncode != 0
    assert "sitebuild/qkv_site/figures/broken_demo.py: computing this figures artifact failed" in done.stderr
    assert "ZeroDivisionError" in done.stderr


def test_mini_build_fails_naming_the_page_and_an_unknown_token(tmp_path):
    pages = {"index.md": "# Home\n", "a.md": "# A\n\n<!-- figure: nope -->\n"}
    root = _mini_project(tmp_path, pages, keep={"kv-cache-memory"})
    done = _build(root, tmp_path / "cache", QKV_ARTIFACTS="false")  # names are checked even off
    assert done.returncode != 0
    assert "a.md: unknown figure in '<!-- figure: nope -->'" in done.stderr


def test_mini_build_with_artifacts_disabled_renders_nothing_and_says_so(tmp_path):
    root = _mini_project(tmp_path, {"index.md": FIGURE_PAGE}, keep={"kv-cache-memory"})
    done = _build(root, tmp_path / "cache", QKV_ARTIFACTS="false")
    assert done.returncode == 0, done.stderr
    page = BeautifulSoup((root / "site" / "index.html").read_text(), "html.parser")
    assert "is not rendered in this build" in page.select_one("p.qkv-figure-off").get_text()
    assert page.find("img") is None
    assert not (root / "site" / "figures").exists()
    assert not (tmp_path / "cache").exists()


def test_the_whole_site_builds_strict_with_artifacts_off(tmp_path):
    """``QKV_ARTIFACTS=false`` (contributing.md, the benchmarks' baseline) is a build that
    passes ``--strict``: nothing computed, and every link of every page still resolves, the
    model licence the explorer page links included (copied, not computed)."""
    done = build_site(tmp_path / "site", {"QKV_ARTIFACTS": "false", "QKV_CACHE": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr[-5000:]
    assert "artifacts: 0 computed (none), 0 from the cache" in done.stderr
    assert "Apache License" in (tmp_path / "site" / "explorer" / "smollm2" / "LICENSE.txt").read_text()
    assert not (tmp_path / "site" / "figures").exists()
