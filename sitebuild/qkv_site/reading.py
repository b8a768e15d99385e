"""How long the explanation takes to read, and what a reader meets first on each chapter.

*Visible prose* is what a reader meets without clicking: headings, paragraphs, lists,
tables and open admonitions. Code blocks, their output, maths, HTML comments (claim and
figure marks) and folded ``???`` blocks (derivations, side notes, solutions) are not; a
link counts by its text. A page is rendered with the site's own Markdown extensions
(mkdocs.yml), its executed blocks shown as empty code blocks, and read with BeautifulSoup.
tests/fast/test_chapter_length.py holds the chapters to their prose budget with it.

*Reading time* is what a reader who reads the code and its output needs: the built page's
prose at :data:`WORDS_PER_MINUTE`, its lines of code and printed output at
:data:`LINES_PER_MINUTE`, and what sits in folded blocks at :data:`FOLDED` of that (not every
reader opens them); a figure's folded data table is not read (:func:`reading_of`). Each
chapter of the nav's "The explanation" shows its time under its title, and the home page
shows the path with each chapter's time and the total (the hook ``hooks/reading_time.py``:
the times are taken from each chapter's rendered HTML, its code's output included).
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from pathlib import Path

import markdown as md
from bs4 import BeautifulSoup

from qkv_site.site import Site, front_matter

WORDS_PER_MINUTE = 200  # prose
LINES_PER_MINUTE = 15  # code and printed output: read line by line, with the prose beside it
FOLDED = 0.5  # what sits in a folded block counts at half: not every reader opens it
# The explanation's reading budget (issue 40): a chapter fits a short sitting, the path an
# evening. tests/site/test_reading_time.py holds the built pages to it.
CHAPTER_MINUTES = 8
PATH_MINUTES = 75
_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")
_HOME_ITEM = re.compile(r"^(\d+)\. (\[[^\]]+\]\(([a-z0-9-]+\.md)\).*)$", re.M)


def word_count(text: str) -> int:
    """Words in ``text``: runs of letters or digits, joined by an apostrophe or a hyphen.

    >>> word_count("Multi-head attention isn't one head: it's 3 heads.")
    8
    """
    return len(_WORD.findall(text))


def minutes(words: int) -> int:
    """Whole minutes to read ``words`` of prose at 200 words a minute, rounded up, at least one.

    >>> minutes(1), minutes(200), minutes(201), minutes(9000)
    (1, 1, 2, 45)
    """
    if words < 0:
        raise ValueError(f"a word count is never negative; got {words}")
    return max(1, math.ceil(words / WORDS_PER_MINUTE))


@dataclass(frozen=True)
class Reading:
    """What a page asks of a reader: words of prose and lines of code or output, shown and
    folded."""

    words: int
    lines: int
    folded_words: int
    folded_lines: int

    @property
    def exact_minutes(self) -> float:
        shown = self.words / WORDS_PER_MINUTE + self.lines / LINES_PER_MINUTE
        folded = self.folded_words / WORDS_PER_MINUTE + self.folded_lines / LINES_PER_MINUTE
        return shown + FOLDED * folded

    @property
    def minutes(self) -> int:
        """Whole minutes, rounded up, at least one.

        >>> Reading(words=400, lines=15, folded_words=200, folded_lines=30).minutes  # 2 + 1 + 1.5
        5
        """
        return max(1, math.ceil(self.exact_minutes - 1e-9))


def path_minutes(readings) -> int:
    """The whole path's minutes: the chapters' exact times added, then rounded up."""
    return max(1, math.ceil(sum(r.exact_minutes for r in readings) - 1e-9))


def reading_of(html: str) -> Reading:
    """What the rendered page ``html`` (a page's content, or a whole page: its ``article``)
    asks of a reader. Prose is counted in words, code and printed output (``pre``) in lines
    that hold something; display maths counts as a line; a folded block (``details`` without
    ``open``) is counted apart; a figure's data table, claim marks, permalinks and the reading
    time itself are not counted.

    >>> reading_of("<p>Two words</p><pre>a = 1\\n\\nprint(a)</pre>"
    ...            "<details><summary>More</summary><p>one</p><pre>x</pre></details>")
    Reading(words=2, lines=2, folded_words=2, folded_lines=1)
    """
    soup = BeautifulSoup(html, "html.parser")
    root = soup.select_one("article") or soup
    skipped = ".headerlink, .claim-mark, details.qkv-figure-data, .reading-time, script, style"
    for node in root.select(skipped):
        node.decompose()
    folded = [d for d in root.select("details:not([open])") if not d.find_parent("details")]
    for block in folded:
        block.extract()
    words, lines = _count(root)
    counts = [_count(block) for block in folded]
    return Reading(words, lines, sum(w for w, _ in counts), sum(n for _, n in counts))


def _count(node) -> tuple[int, int]:
    lines = 0
    for pre in node.select("pre"):
        lines += sum(1 for line in pre.get_text().splitlines() if line.strip())
        pre.decompose()
    for maths in node.select(".arithmatex"):
        lines += 1 if maths.name == "div" else 0
        maths.decompose()
    for mark in node.find_all(["abbr", "dfn"]):
        mark.unwrap()  # a glossary mark inside a word is not a word boundary
    return word_count(node.get_text(" ")), lines


@functools.cache
def _site_markdown(root: Path) -> tuple[list, dict]:
    from qkv_site.page_blocks import markdown_settings, site_extensions

    names, settings = site_extensions(root)
    return markdown_settings(names, settings, lambda *_, **__: "<pre></pre>", root=root)


def rendered(root: Path, page: str) -> BeautifulSoup:
    """A page's Markdown (front matter dropped) rendered as the site renders it, its
    executed blocks as empty code blocks (code and output, none of it prose)."""
    names, settings = _site_markdown(Path(root))
    html = md.markdown(front_matter(page)[1], extensions=names, extension_configs=settings)
    return BeautifulSoup(html, "html.parser")


def visible_prose(root: Path, page: str) -> str:
    """The text a reader sees of a page's Markdown, every ``???`` block folded."""
    soup = rendered(root, page)
    hidden = soup.select("details:not([open]), .highlight, pre, .arithmatex, .headerlink")
    for element in hidden:
        element.decompose()
    # a glossary mark inside a word ("multi-<abbr>head</abbr>") is not a word boundary
    for mark in soup.find_all(["abbr", "dfn"]):
        mark.unwrap()
    soup.smooth()
    return soup.get_text(" ")


def lead(root: Path, page: str) -> str:
    """The text of a page's lead, the first paragraph after its title, maths left out."""
    soup = rendered(root, page)
    title = soup.find("h1")
    first = title.find_next("p") if title else None
    if first is None:
        return ""
    for maths in first.select(".arithmatex"):
        maths.decompose()
    return first.get_text(" ")


def figure_comes_first(page: str) -> bool:
    """Whether a page places a figure (``<!-- figure: NAME -->``) before its first code
    fence: a picture before any code or printed number."""
    body = front_matter(page)[1]
    figure, fence = body.find("<!-- figure:"), body.find("```")
    return figure != -1 and (fence == -1 or figure < fence)


@functools.cache
def _words(root: Path, text: str) -> int:
    return word_count(visible_prose(root, text))


def chapter_words(root: Path, chapter: str) -> int:
    """Words of visible prose in ``docs/CHAPTER``."""
    return _words(Path(root), (Path(root) / "docs" / chapter).read_text(encoding="utf-8"))


def time_line(minutes_: int) -> str:
    """The line under a chapter's title."""
    unit = "minute" if minutes_ == 1 else "minutes"
    return f'<p class="reading-time">About {minutes_} {unit} to read</p>'


class ReadingTimes:
    """The hook's state for one site: each chapter's reading, taken from its rendered HTML
    once its figures are in it, and its time put under its title (``on_env``: the figures
    are computed in parallel and put in their pages in the artifacts plugin's ``on_env``,
    which runs before a hook's), then the home page's list filled in (``on_post_page``:
    MkDocs renders every page's content and runs ``on_env`` before it writes any page). Under
    ``mkdocs serve --dirty`` a chapter not rendered again keeps the reading it had."""

    PLACE = '<span class="reading-time" data-chapter="{}"></span>'
    PATH = '<p class="reading-time" data-path></p>'

    def __init__(self):
        self.readings: dict[str, Reading] = {}
        self._rendered: dict[str, object] = {}  # this build's chapter pages, until on_env

    def on_page_markdown(self, markdown_text, page, config, files):
        if page.file.src_uri != "index.md":
            return markdown_text
        chapters = {c.file for c in Site(config["nav"]).chapters()}

        def placed(match: re.Match) -> str:
            chapter = match.group(3)
            return f"{match.group(0)} {self.PLACE.format(chapter)}" if chapter in chapters else match.group(0)

        text = _HOME_ITEM.sub(placed, markdown_text)
        return text.replace("## The chapters\n", f"## The chapters\n\n{self.PATH}\n", 1)

    def on_page_content(self, html, page, config, files):
        chapters = {c.file for c in Site(config["nav"]).chapters()}
        if page.file.src_uri in chapters:
            self._rendered[page.file.src_uri] = page
        return html

    def on_env(self, env, config, files):
        for chapter, page in self._rendered.items():
            reading = self.readings[chapter] = reading_of(page.content)
            page.content = page.content.replace("</h1>", "</h1>\n" + time_line(reading.minutes), 1)
        self._rendered = {}
        return env

    def on_post_page(self, output, page, config):
        if page.file.src_uri != "index.md":
            return output
        chapters = [c.file for c in Site(config["nav"]).chapters()]
        for chapter in chapters:
            if chapter in self.readings:
                shown = f'<span class="reading-time">({self.readings[chapter].minutes} min)</span>'
                output = output.replace(self.PLACE.format(chapter), shown)
        if all(c in self.readings for c in chapters):
            total = path_minutes(self.readings[c] for c in chapters)
            summary = f"{len(chapters)} chapters, about {total} minutes of reading in all."
            output = output.replace(self.PATH, f'<p class="reading-time">{summary}</p>')
        return output
