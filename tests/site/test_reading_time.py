"""Each chapter of the explanation says how long it takes to read, under its title, and the
home page shows the path with each chapter's time and the total (issue 33).

The expected times are computed here from the page sources with the counter the chapter
length test uses, and 200 words a minute rounded up; the built pages must state them.
"""

from __future__ import annotations

import math
import re

from bs4 import BeautifulSoup
from qkv_site import reading
from support import ROOT, nav_section

CHAPTERS = [path for _, path in nav_section("The explanation")]


def expected_minutes(chapter: str) -> int:
    return max(1, math.ceil(reading.chapter_words(ROOT, chapter) / 200))


def page(built_site, source: str) -> BeautifulSoup:
    built = "index.html" if source == "index.md" else source.removesuffix(".md") + "/index.html"
    return BeautifulSoup((built_site / built).read_text(encoding="utf-8"), "html.parser")


def test_every_chapter_states_its_reading_time_under_its_title(built_site):
    wrong = {}
    for chapter in CHAPTERS:
        soup = page(built_site, chapter)
        title = soup.select_one("article h1")
        shown = title.find_next_sibling() if title else None
        stated = shown.get_text(" ", strip=True) if shown is not None else ""
        minutes = expected_minutes(chapter)
        if stated != f"About {minutes} minute{'s' if minutes > 1 else ''} to read":
            wrong[chapter] = stated
    assert wrong == {}, f"reading times missing or wrong under the title: {wrong}"


def test_the_home_page_shows_the_path_with_each_chapters_time_and_the_total(built_site):
    soup = page(built_site, "index.md")
    heading = soup.find(id="the-chapters")
    items = heading.find_next("ol").find_all("li", recursive=False)
    shown = {}
    for item in items:
        link = item.find("a")["href"].strip("./").split("#")[0]
        time = item.select_one(".reading-time")
        shown[f"{link}.md"] = time.get_text(strip=True) if time else None
    assert shown == {c: f"({expected_minutes(c)} min)" for c in CHAPTERS}
    total = math.ceil(sum(reading.chapter_words(ROOT, c) for c in CHAPTERS) / 200)
    summary = heading.find_next("p", class_="reading-time").get_text(" ", strip=True)
    assert re.fullmatch(rf"{len(CHAPTERS)} chapters, about {total} minutes of reading in all\.", summary)
