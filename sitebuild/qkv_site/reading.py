"""How long the explanation takes to read, and what a reader meets first on each chapter.

*Visible prose* is what a reader meets without clicking: headings, paragraphs, lists,
tables and open admonitions. Code blocks, their output, maths, HTML comments (claim and
figure marks) and folded ``???`` blocks (derivations, side notes, solutions) are not; a
link counts by its text. A page is rendered with the site's own Markdown extensions
(mkdocs.yml), its executed blocks shown as empty code blocks, and read with BeautifulSoup.

The explanation is the nav's part "The explanation". Each of its chapters shows, under its
title, how long it takes to read at :data:`WORDS_PER_MINUTE`, and the home page shows the
path with each chapter's time and the total (:func:`on_page_markdown`, the hook
``hooks/reading_time.py``). tests/fast/test_chapter_length.py holds the chapters to their
budgets with the same counter.
"""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path

import markdown as md
from bs4 import BeautifulSoup

from qkv_site.site import Site, front_matter

WORDS_PER_MINUTE = 200
_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")
_H1 = re.compile(r"^# .+$", re.M)
_HOME_ITEM = re.compile(r"^(\d+)\. (\[[^\]]+\]\(([a-z0-9-]+\.md)\).*)$", re.M)


def word_count(text: str) -> int:
    """Words in ``text``: runs of letters or digits, joined by an apostrophe or a hyphen.

    >>> word_count("Multi-head attention isn't one head: it's 3 heads.")
    8
    """
    return len(_WORD.findall(text))


def minutes(words: int) -> int:
    """Whole minutes to read ``words`` at 200 words a minute, rounded up, at least one.

    >>> minutes(1), minutes(200), minutes(201), minutes(9000)
    (1, 1, 2, 45)
    """
    if words < 0:
        raise ValueError(f"a word count is never negative; got {words}")
    return max(1, math.ceil(words / WORDS_PER_MINUTE))


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


def _time_line(minutes_: int) -> str:
    unit = "minute" if minutes_ == 1 else "minutes"
    return f'<p class="reading-time">About {minutes_} {unit} to read</p>'


def on_page_markdown(markdown_text, page, config, files):
    """Under each chapter's title, its reading time; on the home page, each chapter's time
    after its line under "The chapters", and the path's total before the list."""
    root = Path(config["config_file_path"]).parent
    chapters = [c.file for c in Site(config["nav"]).chapters()]
    source = page.file.src_uri
    if source in chapters:
        words = _words(root, markdown_text)
        return _H1.sub(lambda m: m.group(0) + "\n\n" + _time_line(minutes(words)), markdown_text, count=1)
    if source == "index.md":
        times = {c: minutes(chapter_words(root, c)) for c in chapters}
        total = minutes(sum(chapter_words(root, c) for c in chapters))

        def timed(match: re.Match) -> str:
            chapter = match.group(3)
            if chapter not in times:
                return match.group(0)
            return f'{match.group(0)} <span class="reading-time">({times[chapter]} min)</span>'

        text = _HOME_ITEM.sub(timed, markdown_text)
        path_line = (
            f'<p class="reading-time">{len(chapters)} chapters, about {total} minutes of reading in all.</p>'
        )
        return text.replace("## The chapters\n", f"## The chapters\n\n{path_line}\n", 1)
    return markdown_text
