"""Every chapter of the explanation stays at most ~1,300 words of visible prose (issue 10).

Visible prose is what a reader meets without clicking: headings, paragraphs, lists, tables
and open admonitions. Code blocks, maths, HTML comments (claim markers, figure markers)
and folded ``???`` blocks (derivations, side notes, solutions) do not count; a link counts
by its text. The page is rendered with the site's own Markdown extensions (mkdocs.yml) and
read with BeautifulSoup. A chapter that grows past the cap should fold a side note, not
lose a claim.
"""

from __future__ import annotations

import functools
import re

import markdown
from bs4 import BeautifulSoup
from qkv_site.page_blocks import markdown_settings, site_extensions
from support import ROOT, nav_section

DOCS = ROOT / "docs"
CHAPTERS = [path for _, path in nav_section("The explanation")]  # in the nav's order
MAX_WORDS = 1300


@functools.cache
def site_markdown() -> tuple[list, dict]:
    """mkdocs.yml's Markdown extensions and their settings, with a block the build runs
    (exec="on") rendered as an empty code block: code and its output, none of it prose."""
    names, settings = site_extensions(ROOT)
    return markdown_settings(names, settings, lambda *_, **__: "<pre></pre>", root=ROOT)


def rendered(page: str) -> BeautifulSoup:
    """A page's Markdown (front matter dropped) rendered as the site renders it."""
    page = re.sub(r"\A---\n.*?\n---\n", "", page, flags=re.S)
    names, settings = site_markdown()
    return BeautifulSoup(markdown.markdown(page, extensions=names, extension_configs=settings), "html.parser")


def visible_prose(page: str) -> str:
    """The text a reader sees of a page's Markdown, rendered as the site renders it, with
    every ``???`` block (a closed ``<details>``) folded."""
    soup = rendered(page)
    # folded blocks; code blocks (with their titles); maths; permalink signs
    hidden = soup.select("details:not([open]), .highlight, pre, .arithmatex, .headerlink")
    for element in hidden:
        element.decompose()
    # a glossary mark inside a word ("multi-<abbr>head</abbr>") is not a word boundary
    for mark in soup.find_all(["abbr", "dfn"]):
        mark.unwrap()
    soup.smooth()
    return soup.get_text(" ")


def word_count(text: str) -> int:
    return len(re.findall(r"[^\W_]+(?:['’-][^\W_]+)*", text))


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


def test_every_chapter_is_at_most_1300_words_of_visible_prose():
    counts = {c: word_count(visible_prose((DOCS / c).read_text(encoding="utf-8"))) for c in CHAPTERS}
    over = {chapter: words for chapter, words in counts.items() if words > MAX_WORDS}
    assert over == {}, (
        f"words of visible prose over the cap of {MAX_WORDS}: {over}; "
        "fold a derivation or side note into a ??? block"
    )
