"""The chapter ``./dev new-chapter`` writes passes, as written, the tests that hold a chapter
to the site's rules and the strict build.

In a copy of the repository (tests/checkout.py) the generator writes a chapter; then pytest
runs there the tests that read every chapter (the nav's numbering, the Read-next chain, the
home page's list, exercises, the word limit, claims and their numbers, the snippet's width
and run, the figure's alt text), the new chapter's own tests, and the site tests that read
the built page (its figure, the figure's table, its output, its title and description),
whose build is the copy's ``mkdocs build --strict``. The new page's code then runs as a
reader pastes it. docs/contributing.md lists these rules under "Add a chapter".

The copy shares the artifact cache of the build that computed this run's pages, so the copy's
build computes the new chapter's snippet and figure and reads everything else from the
cache. The chapter goes in the middle of the path (``--after``), so every later chapter is
renumbered. Taking the chapter out of the nav makes the chapter tests fail: they read the
rules' subject from mkdocs.yml, so this test can fail.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

from checkout import clean_env, copy_project
from test_copy_paste import run_blocks, runnable_blocks

SLUG, TITLE = "sinks-example", "Where the weight goes: an example chapter"
AFTER = "why-scale"  # in the middle of the path: every later chapter's number and link moves
MODULE = SLUG.replace("-", "_")
RULES = [
    "tests/fast/test_chapter_sequence.py",
    "tests/fast/test_chapter_length.py",
    "tests/fast/test_claims.py",
    "tests/fast/test_prose_numbers.py",
    "tests/fast/test_lint.py",
    "tests/fast/test_snippets.py::test_every_snippet_is_shown_on_a_page_and_every_page_shows_a_snippet_that_exists",
    f"tests/fast/test_snippets.py::test_snippet_runs_and_prints[{MODULE}.py]",
    "tests/fast/test_figures.py::test_every_figure_has_alt_text_stating_a_finding_and_a_caption",
    f"tests/fast/pages/test_{MODULE}.py",
    # these read the copy's strict build
    "tests/site/test_site.py::test_every_page_built",
    "tests/site/test_page_meta.py",
    "tests/site/test_page_output.py",  # for the new page only: ONLY_NEW_PAGE
    "tests/site/test_figures_built.py::test_every_figure_is_placed_and_every_placed_figure_exists",
    "tests/site/test_figures_built.py::test_every_image_of_a_figure_resolves_and_every_generated_file_is_used",
    "tests/site/test_figures_built.py::test_every_figure_image_has_alt_text_and_a_theme",
    "tests/site/test_figure_data.py::test_every_figure_has_a_folded_data_block",
    f"tests/site/test_figure_data.py::test_table_numbers_are_the_data_behind_the_figure[{SLUG}]",
    f"tests/site/test_figure_data.py::test_csv_download_holds_the_same_table[{SLUG}]",
    f"tests/site/test_figure_data.py::test_svg_downloads_resolve[{SLUG}]",
    "tests/site/test_how_we_know_page.py",
]
# the test of every page's output is parametrized by a fixture named `page`, which gives it
# an id pytest-playwright's plugin prefixes: chosen by keyword instead
ONLY_NEW_PAGE = f"not test_page_output_is_what_the_built_page_shows or {SLUG}"


def generate(folder):
    """A copy of the repository in ``folder`` with the chapter written into it, after ``AFTER``."""
    root = copy_project(folder / "qkv")
    done = subprocess.run(
        [sys.executable, "-m", "qkv_site.new_chapter", "--after", AFTER, SLUG, TITLE],
        cwd=root,
        env=copy_env(root),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return root


def copy_env(root, **extra):
    """The copy's own qkv, qkv_site and tests first on the path."""
    return clean_env(PYTHONPATH=os.pathsep.join([str(root), str(root / "sitebuild")]), **extra)


def pytest_in(root, args, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "0", "-v", *args],
        cwd=root,
        env=copy_env(root, **env),
        capture_output=True,
        text=True,
        timeout=1500,
    )


def test_the_new_chapter_passes_the_chapter_rules_and_the_strict_build(
    computed_cache, reader_python, tmp_path
):
    # the cache of the build that computed this run's pages (in a fresh clone, the clean
    # build's: the tree's own stays empty), which the copy's build reads
    cache = computed_cache
    root = generate(tmp_path)
    run = tmp_path / "run"  # the copy's pytest builds its site into run/session-build/site
    done = pytest_in(root, [f"--basetemp={run}", "-k", ONLY_NEW_PAGE, *RULES], QKV_CACHE=str(cache))
    build_log = run / "session-build" / "build.log"
    log = build_log.read_text(encoding="utf-8") if build_log.exists() else "(no build log)"
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:] + "\nbuild:\n" + log[-3000:]
    assert "skipped" not in done.stdout.splitlines()[-1], done.stdout[-3000:]
    ran_for_the_page = rf"test_page_output_is_what_the_built_page_shows\[[^\]]*{SLUG}\.md\] PASSED"
    assert re.search(ran_for_the_page, done.stdout), done.stdout[-3000:]
    # what a reader copies from the new page runs in a fresh interpreter, block after block
    page = (run / "session-build" / "site" / SLUG / "index.html").read_text(encoding="utf-8")
    blocks = runnable_blocks(page)
    assert len(blocks) == 3, blocks  # the chapter's code and one block per solution
    (tmp_path / "paste").mkdir()
    pasted = run_blocks(reader_python, blocks, tmp_path / "paste")
    assert pasted.returncode == 0, pasted.stderr


def test_out_of_the_nav_the_new_chapter_fails_the_chapter_tests(tmp_path):
    root = generate(tmp_path)
    config = root / "mkdocs.yml"
    lines = config.read_text(encoding="utf-8").splitlines(keepends=True)
    kept = [line for line in lines if not line.rstrip().endswith(f": {SLUG}.md")]
    assert len(kept) == len(lines) - 1
    config.write_text("".join(kept), encoding="utf-8")
    done = pytest_in(root, ["tests/fast/test_chapter_sequence.py"])
    assert done.returncode == 1, done.stdout[-3000:]
    # the chapter before it now leads to a page the nav does not list
    assert "test_every_read_next_leads_to_the_next_chapter FAILED" in done.stdout, done.stdout[-3000:]
    assert "numbers a page that is not a chapter" in done.stdout
