"""Each chapter of the explanation says how long it takes to read, under its title, and the
home page shows the path with each chapter's time and the total.

The time is what a reader who reads the code and its output needs (``qkv_site.reading``):
prose at 200 words a minute, code and printed output at 15 lines a minute, folded blocks at
half. The expected times are counted here from each built page, its code's output as the
build printed it, and the pages must state them.
"""

from __future__ import annotations

import re

from bs4 import BeautifulSoup
from qkv_site import reading
from support import nav_section

CHAPTERS = [path for _, path in nav_section("The explanation")]


def page(built_site, source: str) -> BeautifulSoup:
    built = "index.html" if source == "index.md" else source.removesuffix(".md") + "/index.html"
    return BeautifulSoup((built_site / built).read_text(encoding="utf-8"), "html.parser")


def readings(built_site) -> dict[str, reading.Reading]:
    return {c: reading.reading_of(str(page(built_site, c).select_one("article"))) for c in CHAPTERS}


def test_every_chapter_states_its_reading_time_under_its_title(built_site):
    wrong = {}
    for chapter, counted in readings(built_site).items():
        soup = page(built_site, chapter)
        title = soup.select_one("article h1")
        shown = title.find_next_sibling() if title else None
        stated = shown.get_text(" ", strip=True) if shown is not None else ""
        minutes = counted.minutes
        if stated != f"About {minutes} minute{'s' if minutes > 1 else ''} to read":
            wrong[chapter] = (stated, minutes)
    assert wrong == {}, f"reading times missing or wrong under the title: {wrong}"


def test_the_home_page_shows_the_path_with_each_chapters_time_and_the_total(built_site):
    counted = readings(built_site)
    soup = page(built_site, "index.md")
    heading = soup.find(id="the-chapters")
    items = heading.find_next("ol").find_all("li", recursive=False)
    shown = {}
    for item in items:
        link = item.find("a")["href"].strip("./").split("#")[0]
        time = item.select_one(".reading-time")
        shown[f"{link}.md"] = time.get_text(strip=True) if time else None
    assert shown == {c: f"({counted[c].minutes} min)" for c in CHAPTERS}
    total = reading.path_minutes(counted.values())
    summary = heading.find_next("p", class_="reading-time").get_text(" ", strip=True)
    assert re.fullmatch(rf"{len(CHAPTERS)} chapters, about {total} minutes of reading in all\.", summary)
    assert total >= sum(r.words for r in counted.values()) / 200  # prose alone is a floor


def test_every_chapter_reads_within_its_budget_and_the_path_within_its_own(built_site):
    """At most ``reading.CHAPTER_MINUTES`` a chapter and ``reading.PATH_MINUTES`` for the path,
    by the same count the pages show: a chapter over budget moves its library listings and
    expert asides to its depth page, one click away."""
    counted = readings(built_site)
    over = {c: r.minutes for c, r in counted.items() if r.minutes > reading.CHAPTER_MINUTES}
    assert over == {}, f"chapters over {reading.CHAPTER_MINUTES} minutes of reading: {over}"
    assert reading.path_minutes(counted.values()) <= reading.PATH_MINUTES
