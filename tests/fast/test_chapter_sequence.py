"""Chapters 8-12, 15 and 16 keep to the sequence of the nav (mkdocs.yml): each page's title and
heading are its nav title, its "Read next" leads to the next chapter, and every "chapter N" it
links to is the page the nav numbers N.

(Issue 18. The same checks would hold for every chapter; this file covers the pages of the
helper that wrote it, and its list can grow to all of them.)
"""

from __future__ import annotations

import json
import re

import pytest
import yaml
from support import ROOT

PAGES = ["three-kinds.md", "position.md", "traps.md", "multi-head.md", "kv-cache.md", "faq.md",
         "recap.md"]


class _Loader(yaml.SafeLoader):
    """mkdocs.yml with its ``!ENV`` and ``!!python/name`` tags read as plain values."""


_Loader.add_multi_constructor("", lambda loader, suffix, node: None)


def _chapters() -> list[tuple[int, str, str]]:
    """The nav's chapters, in order: (number, title, file)."""
    nav = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_Loader)["nav"]
    (explanation,) = [entry["The explanation"] for entry in nav
                      if isinstance(entry, dict) and "The explanation" in entry]
    chapters = []
    for entry in explanation:
        ((label, path),) = entry.items()
        number, title = re.fullmatch(r"(\d+)\. (.+)", label).groups()
        chapters.append((int(number), title, path))
    return chapters


CHAPTERS = _chapters()
BY_FILE = {path: (number, title) for number, title, path in CHAPTERS}


def _text(page: str) -> str:
    return (ROOT / "docs" / page).read_text(encoding="utf-8")


def test_the_nav_numbers_the_chapters_in_order_without_halves():
    numbers = [number for number, _, _ in CHAPTERS]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)


@pytest.mark.parametrize("page", PAGES)
def test_title_and_heading_are_the_nav_title(page):
    text = _text(page)
    _, title = BY_FILE[page]
    front = re.match(r"---\n(.*?)\n---\n", text, re.S).group(1)
    assert yaml.safe_load(front)["title"] == title
    (heading,) = re.findall(r"^# (.+)$", text, re.M)
    assert heading == title


@pytest.mark.parametrize("page", PAGES)
def test_read_next_leads_to_the_next_chapter(page):
    read_next = re.findall(r"\*\*Read next:\*\*(.*?)(?:\n\n|\Z)", _text(page), re.S)
    assert len(read_next) == 1, f"{page}: one Read next, at the end"
    targets = re.findall(r"\]\(([^)#]+)", read_next[0])
    order = [path for _, _, path in CHAPTERS]
    following = order[order.index(page) + 1] if page != order[-1] else "index.md"
    assert following in targets, f"{page} should lead to {following}, leads to {targets}"
    if following in BY_FILE:  # "[12. Title](file.md)": the number and the title of the nav
        number, title = BY_FILE[following]
        assert f"[{number}. {title}]({following})" in read_next[0]


@pytest.mark.parametrize("page", PAGES)
def test_every_numbered_chapter_link_names_the_right_number(page):
    links = re.findall(r"\[(?:chapter|Chapter) (\d+)\]\(([^)#]+)", _text(page))
    links += re.findall(r"\[(\d+) →\]\(([^)#]+)", _text(page))  # the recap's arrows
    wrong = [(n, path) for n, path in links if BY_FILE[path][0] != int(n)]
    assert not wrong, f"{page} names chapters by the wrong number: {wrong}"


@pytest.mark.parametrize("page", PAGES)
def test_no_page_quotes_a_heading_of_the_explained_text(page):
    """Headings the issue found borrowed (issue 18, item 1) are gone from these pages."""
    borrowed = {"three kinds of attention", "traps worth knowing", "questions people ask",
                "recap", "dropping the scaling", "multiple heads, and where they come from",
                "cross-attention, and the caching trick", "summing up", "recap in one screen"}
    headings = {h.strip().lower() for h in re.findall(r"^#+ ([^{\n]+)", _text(page), re.M)}
    assert not headings & borrowed
    assert "the source" not in _text(page).lower()


def test_the_notebook_names_chapters_by_their_numbers():
    notebook = json.loads((ROOT / "docs" / "notebook.ipynb").read_text(encoding="utf-8"))
    text = "\n".join("".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "markdown")
    links = re.findall(r"\[chapter (\d+)\]\(\.\./([^/)#]+)/", text)
    assert links
    wrong = [(n, slug) for n, slug in links if BY_FILE[slug + ".md"][0] != int(n)]
    assert not wrong, f"the notebook names chapters by the wrong number: {wrong}"
