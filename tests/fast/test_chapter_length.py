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
import markdown_exec
from bs4 import BeautifulSoup
from support import ROOT, mkdocs_config, nav_section

DOCS = ROOT / "docs"
CHAPTERS = [path for _, path in nav_section("The explanation")]  # in the nav's order
MAX_WORDS = 1300


@functools.cache
def site_markdown() -> tuple[list, dict]:
    """mkdocs.yml's Markdown extensions and their settings (snippet paths from the root)."""
    names, settings = [], {}
    for entry in mkdocs_config()["markdown_extensions"]:
        name, options = next(iter(entry.items())) if isinstance(entry, dict) else (entry, {})
        names.append(name)
        settings[name] = options or {}
    settings["pymdownx.snippets"] = {
        **settings["pymdownx.snippets"],
        "base_path": [str(ROOT / "snippets"), str(ROOT)],
    }
    # a block the build runs (exec="on") is code and its output: none of it is prose
    executed = {"validator": markdown_exec.validator, "format": lambda *_, **__: "<pre></pre>"}
    settings["pymdownx.superfences"] = {
        **settings.get("pymdownx.superfences", {}),
        "custom_fences": [{"name": n, "class": n, **executed} for n in ("python", "py")],
    }
    return names, settings


def visible_prose(page: str) -> str:
    """The text a reader sees of a page's Markdown, rendered as the site renders it, with
    every ``???`` block (a closed ``<details>``) folded."""
    page = re.sub(r"\A---\n.*?\n---\n", "", page, flags=re.S)  # front matter
    names, settings = site_markdown()
    soup = BeautifulSoup(markdown.markdown(page, extensions=names, extension_configs=settings), "html.parser")
    # folded blocks; code blocks (with their titles); maths; permalink signs
    hidden = soup.select("details:not([open]), .highlight, pre, .arithmatex, .headerlink")
    for element in hidden:
        element.decompose()
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
