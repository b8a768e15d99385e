"""Every chapter of the explanation stays at most ~1,300 words of visible prose (issue 10).

Visible prose is what a reader meets without clicking: headings, paragraphs, lists, tables
and open admonitions. Code blocks, maths, HTML comments (claim markers, figure markers)
and folded ``???`` blocks (derivations, side notes, solutions) do not count; a link counts
by its text. A chapter that grows past the cap should fold a side note, not lose a claim.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
CHAPTERS = [
    "soft-lookup.md", "where-qkv-come-from.md", "keys-vs-values.md", "position.md",
    "why-three-projections.md", "step-by-step.md", "why-scale.md", "things-to-try.md",
    "three-kinds.md", "traps.md", "multi-head.md", "kv-cache.md", "trained-model.md",
    "coreference.md", "faq.md", "recap.md",
]  # the nav's "The explanation", in order
MAX_WORDS = 1300


def visible_prose(markdown: str) -> str:
    """The text of ``markdown`` a reader sees with every ``???`` block closed."""
    markdown = re.sub(r"\A---\n.*?\n---\n", "", markdown, flags=re.S)  # front matter
    markdown = re.sub(r"<!--.*?-->", " ", markdown, flags=re.S)
    kept, fence, folded_at = [], None, None
    for line in markdown.splitlines():
        text = line.lstrip()
        indent = len(line) - len(text)
        if folded_at is not None:  # inside a folded block: skip until the indent returns
            if not text or indent > folded_at:
                continue
            folded_at = None
        if fence is not None:  # inside a code fence: skip until it closes
            if text.startswith(fence):
                fence = None
            continue
        if text.startswith(("```", "~~~")):
            fence = text[:3]
        elif text.startswith("???") and not text.startswith("???+"):
            folded_at = indent  # its title is one short line; the body is hidden
        elif not text.startswith("--8<--"):
            kept.append(line)
    text = "\n".join(kept)
    text = re.sub(r"^\s*!!!\+?\s*[\w-]+", " ", text, flags=re.M)  # admonition type, not prose
    text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.S)  # display maths
    text = re.sub(r"\$[^$\n]+\$", " ", text)  # inline maths
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link reads as its text
    text = re.sub(r"\{[#.:][^}]*\}", " ", text)  # attribute lists: anchors, classes
    return re.sub(r"<[^>]+>", " ", text)  # raw HTML tags


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


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_chapter_is_at_most_1300_words_of_visible_prose(chapter):
    words = word_count(visible_prose((DOCS / chapter).read_text(encoding="utf-8")))
    assert words <= MAX_WORDS, (
        f"{chapter} has {words} words of visible prose (cap {MAX_WORDS}): "
        "fold a derivation or side note into a ??? block"
    )
