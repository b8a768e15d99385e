"""The explanation is a short path, picture first (issue 33).

- Each chapter of "The explanation" is at most 700 words of visible prose and the whole path
  at most 9,000: about 45 minutes at 200 words a minute (``qkv_site.reading`` counts; visible
  prose is what a reader meets without clicking, so code, output, maths, comments and folded
  ``???`` blocks do not count).
- Each chapter opens with a plain lead: at most 80 words, and no statistic (no digit, no
  nats, no p-value).
- Each chapter places a figure before its first code block: the picture before the numbers.
- Each chapter ends by pointing at its depth (a "Go deeper" paragraph linking pages of
  "Going further"), and each page of "Going further" names, in its first paragraph, the
  chapter it extends.
"""

from __future__ import annotations

import re

from qkv_site import reading
from support import ROOT, nav_section

DOCS = ROOT / "docs"
CHAPTERS = [path for _, path in nav_section("The explanation")]  # in the nav's order
FURTHER = [path for _, path in nav_section("Going further")]
MAX_WORDS = 700  # a chapter: about three and a half minutes
MAX_TOTAL = 9000  # the path: about 45 minutes at 200 words a minute
MAX_LEAD = 80


def visible_prose(page: str) -> str:
    return reading.visible_prose(ROOT, page)


def word_count(text: str) -> int:
    return reading.word_count(text)


def text_of(chapter: str) -> str:
    return (DOCS / chapter).read_text(encoding="utf-8")


def test_the_counter_skips_what_a_reader_does_not_see():
    page = """---
title: t
---
# Two words

One two three, with $x^2 + y$ maths and a [link text](a.md#b). <!-- claim: c -->

```python
not counted at all
```

$$
a + b
$$

??? note "Solution: folded"
    Hidden words here.

        nested too

!!! note "Open note"
    Four visible words here.

Back.
"""
    # 2 (heading) + 9 (paragraph) + 2 (note title) + 4 (note body) + 1 = 18
    assert word_count(visible_prose(page)) == 18


def test_every_chapter_is_at_most_700_words_of_visible_prose():
    counts = {c: reading.chapter_words(ROOT, c) for c in CHAPTERS}
    over = {chapter: words for chapter, words in counts.items() if words > MAX_WORDS}
    assert over == {}, (
        f"words of visible prose over the cap of {MAX_WORDS}: {over}; "
        "move the depth to a page of Going further, or fold a side note into a ??? block"
    )


def test_the_path_is_at_most_9000_words():
    counts = {c: reading.chapter_words(ROOT, c) for c in CHAPTERS}
    assert sum(counts.values()) <= MAX_TOTAL, f"the explanation has {sum(counts.values())} words: {counts}"


STATISTIC = re.compile(r"[0-9%]|\bnats?\b|p-value", re.I)


def test_every_lead_is_short_and_plain():
    found = {c: reading.lead(ROOT, text_of(c)) for c in CHAPTERS}
    long = {c: reading.word_count(t) for c, t in found.items() if reading.word_count(t) > MAX_LEAD}
    assert long == {}, f"leads over {MAX_LEAD} words: {long}"
    numbers = {c: STATISTIC.findall(t) for c, t in found.items() if STATISTIC.search(t)}
    assert numbers == {}, f"leads that quote numbers or statistics: {numbers}"


def test_the_lead_reader_finds_a_statistic():
    page = "---\ntitle: t\n---\n# T\n\n**It costs 2.9 nats, with $d_k$ maths.**\n\nMore 5.\n"
    found = reading.lead(ROOT, page)  # the first paragraph only, its maths left out
    assert re.findall(r"[\w.]+", found) == ["It", "costs", "2.9", "nats", "with", "maths."]
    assert STATISTIC.findall(reading.lead(ROOT, page)) == ["2", "9", "nats"]


def test_every_chapter_shows_a_figure_before_its_first_code():
    late = [c for c in CHAPTERS if not reading.figure_comes_first(text_of(c))]
    assert late == [], f"chapters whose first figure comes after code, or that have none: {late}"


def test_figure_first_reads_the_order_of_figure_and_fence():
    assert reading.figure_comes_first("# T\n\n<!-- figure: a -->\n\n```python\nx\n```\n")
    assert not reading.figure_comes_first("# T\n\n```python\nx\n```\n\n<!-- figure: a -->\n")
    assert not reading.figure_comes_first("# T\n\nNo picture.\n")


GO_DEEPER = re.compile(r"^\*\*Go deeper:\*\*(.*?)(?:\n\n|\Z)", re.M | re.S)
LINK = re.compile(r"\]\(([a-z0-9-]+\.md)(?:#[^)]*)?\)")


def test_every_chapter_points_at_its_depth_and_every_deep_page_at_its_chapter():
    taught = [c for c in CHAPTERS if c != "recap.md"]  # the recap points back, not deeper
    missing, wrong = [], {}
    for chapter in taught:
        found = GO_DEEPER.search(text_of(chapter))
        if not found:
            missing.append(chapter)
            continue
        targets = LINK.findall(found.group(1))
        if not targets or any(t not in FURTHER for t in targets):
            wrong[chapter] = targets
    assert missing == [], f"chapters without a '**Go deeper:**' paragraph: {missing}"
    assert wrong == {}, f"'Go deeper' links that are not pages of Going further: {wrong}"
    pointed = {t for c in taught if (m := GO_DEEPER.search(text_of(c))) for t in LINK.findall(m.group(1))}
    orphans = [page for page in FURTHER if page not in pointed]
    assert orphans == [], f"pages of Going further that no chapter points at: {orphans}"
    unnamed = []
    for page in FURTHER:
        title = reading.rendered(ROOT, text_of(page)).find("h1")
        first = title.find_next("p") if title else None
        if first is None or not any(a.get("href", "").split("#")[0] in CHAPTERS for a in first.find_all("a")):
            unnamed.append(page)
    assert unnamed == [], f"pages of Going further whose first paragraph links no chapter: {unnamed}"


def test_the_home_page_lists_every_page_of_going_further_in_the_navs_order():
    home = text_of("index.md")
    section = home.split("\n## Going further\n", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^- \[[^\]]+\]\(([a-z0-9-]+\.md)\): \S", section, re.M)
    assert listed == FURTHER, "the home page's Going further list differs from the nav's"
