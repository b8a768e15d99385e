"""The text the fast tests read as "what a page shows" is what the built page shows.

Tests in tests/fast/ check a page's claims against ``page_output(page)``: what the blocks
the build executes printed, in page order, read from the build's artifact cache by the
build's keys or run into it (root conftest.py). Here every page's ``page_output`` is compared
with the output blocks of the built page, in order, so a test cannot pass on text that
readers never see (a block attributed to the wrong section, a cache entry not the page's).
"""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup
from support import ROOT

PAGES = sorted(
    p.relative_to(ROOT / "docs").as_posix()
    for p in (ROOT / "docs").rglob("*.md")
    if 'exec="on"' in p.read_text(encoding="utf-8")
)


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip("\n").splitlines()]


def test_pages_with_executed_blocks_are_found():
    assert {"index.md", "traps.md", "why-scale.md", "trained-model.md"} <= set(PAGES)


@pytest.mark.parametrize("page", PAGES)
def test_page_output_is_what_the_built_page_shows(built_site, page_output, page):
    folder = built_site / ("" if page == "index.md" else page.removesuffix(".md")) / "index.html"
    soup = BeautifulSoup(folder.read_text(encoding="utf-8"), "html.parser")
    outputs = [_lines(pre.get_text()) for pre in soup.select("div.language-text pre")]
    printed = [_lines(block.text) for block in page_output(page).blocks if block.text.strip()]
    assert printed, f"docs/{page}: its executed blocks print nothing"
    # each block's printing is one output block of the page, in page order (a page may
    # also show plain text blocks of its own, so the outputs are a subsequence)
    remaining = iter(outputs)
    missing = [text for text in printed if not any(text == shown for shown in remaining)]
    assert missing == [], f"docs/{page}: printed but not shown in this order:\n{missing[0]}"
