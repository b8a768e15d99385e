"""A page's tests are found by the page's name (issue 42): the guards of docs/PAGE.md, its
printed numbers, its claims and its exercises, live in tests/fast/pages/test_PAGE.py, with
``-`` written ``_`` (docs/kv-cache-in-depth.md: tests/fast/pages/test_kv_cache_in_depth.py),
as ``./dev new-chapter`` writes them. Unit tests of the ``qkv`` package and of the build stay
in tests/fast/.

Both directions are checked on the real tree: every file in tests/fast/pages/ is named for a
page of docs/, and every chapter of "The explanation" has its file. The checks are plain
functions, shown failing on a tree that breaks them.
"""

from __future__ import annotations

from pathlib import Path

from qkv_site.new_chapter import plan
from support import ROOT, site

PAGES_TESTS = ROOT / "tests" / "fast" / "pages"
HELPERS = {"conftest.py"}  # the folder's fixtures, not a page's tests


def page_test_file(page: str) -> str:
    """The page test file of ``page`` ("kv-cache-in-depth.md"), relative to the tests folder."""
    return f"test_{Path(page).stem.replace('-', '_')}.py"


def misnamed(test_files: list[str], pages: list[str]) -> list[str]:
    """The files of tests/fast/pages/ that name no page of ``pages`` (docs/ file names)."""
    wanted = {page_test_file(p) for p in pages}
    return sorted(f for f in test_files if f not in HELPERS and f not in wanted)


def untested(chapters: list[str], test_files: list[str]) -> list[str]:
    """The chapters (docs/ file names) without their page test file among ``test_files``."""
    return [c for c in chapters if page_test_file(c) not in test_files]


def files_here() -> list[str]:
    return sorted(p.name for p in PAGES_TESTS.glob("*.py"))


def test_every_file_in_tests_fast_pages_is_named_for_a_page_of_docs():
    pages = [p.name for p in (ROOT / "docs").glob("*.md")]
    assert len(files_here()) > 30  # the folder holds the page tests (not an empty glob)
    assert misnamed(files_here(), pages) == [], "name each file test_<page>.py, for docs/<page>.md"
    assert [p.name for p in PAGES_TESTS.iterdir() if p.is_dir() and p.name != "__pycache__"] == []


def test_every_chapter_of_the_explanation_has_its_page_test_file():
    chapters = [c.file for c in site().chapters()]
    assert len(chapters) >= 10 and "soft-lookup.md" in chapters
    assert untested(chapters, files_here()) == []


def test_the_names_are_the_ones_new_chapter_writes():
    written = plan(ROOT, "attention-sinks-in-depth", "Attention sinks, in depth")  # writes nothing
    (test,) = [path for path in written if path.startswith("tests/fast/") and path.endswith(".py")]
    assert test == "tests/fast/pages/" + page_test_file("attention-sinks-in-depth.md")
    assert page_test_file("kv-cache-in-depth.md") == "test_kv_cache_in_depth.py"


def test_the_checks_fail_on_a_misnamed_file_and_a_missing_chapter():
    pages = ["faq.md", "kv-cache-in-depth.md"]
    assert misnamed(["test_faq.py", "conftest.py", "test_kv_cache_in_depth.py"], pages) == []
    # a file for no page, a chapter prefix, the old names: each is reported
    assert misnamed(["test_chapter_faq.py", "test_kv_cache_in_depth_windows.py", "test_faq.py"], pages) == [
        "test_chapter_faq.py",
        "test_kv_cache_in_depth_windows.py",
    ]
    assert untested(["faq.md", "recap.md"], ["test_faq.py", "test_recap_more.py"]) == ["recap.md"]
