"""The chapters read as one numbered sequence, in the order mkdocs.yml's nav gives them,
under titles of our own.

A chapter's number is its place in the nav's "The explanation" (:mod:`qkv_site.site`);
pages refer to chapters by name (``[chapter {n}](why-scale.md)``), never by a typed number.
Every chapter's H1 and front-matter title are its nav title; its "**Read next:**" link leads
to the next chapter of the nav, named "N. Title" (the last one back to the home page); the
home page's list of chapters holds every nav chapter in order, with its title, a link to it
and a line on what it teaches; and no title or heading is one of the explained text's
headings. Everything is read from mkdocs.yml, so a chapter added to the nav is checked
without editing this file.
"""

from __future__ import annotations

import json
import re

from qkv_site.site import front_matter, number_chapters, typed_chapter_numbers
from support import ROOT, site

DOCS = ROOT / "docs"
CHAPTERS = site().chapters()
PAGES = sorted(p.name for p in DOCS.glob("*.md"))


def front_matter_and_body(path: str) -> tuple[dict, str]:
    """A page's front matter and its body, chapter links numbered as the build numbers them."""
    meta, body = front_matter((DOCS / path).read_text(encoding="utf-8"))
    return meta, number_chapters(body, CHAPTERS, f"docs/{path}")


def home_list() -> list[str]:
    """The items of the home page's numbered list under "## The chapters", in order."""
    _, body = front_matter_and_body("index.md")
    section = body.split("\n## The chapters", 1)[1].split("\n## ", 1)[0]
    return [m.group(1) for m in re.finditer(r"^\d+\.\s+(.+)$", section, re.M)]


def test_every_chapter_is_titled_as_the_nav_names_it():
    wrong = []
    for chapter in CHAPTERS:
        path, title = chapter.file, chapter.title
        if not path.endswith(".md"):
            wrong.append(f"{path}: the explanation's chapters are Markdown pages")
            continue
        meta, body = front_matter_and_body(path)
        h1 = (re.findall(r"^# (.+?)\s*$", body, re.M) or [""])[0]
        if meta.get("title") != title:
            wrong.append(f"docs/{path}: front matter title {meta.get('title')!r}, nav title {title!r}")
        if h1.replace("*", "") != title:  # the H1 may set a word in italics (*it*)
            wrong.append(f"docs/{path}: H1 {h1!r}, nav title {title!r}")
    assert wrong == []


def test_every_read_next_leads_to_the_next_chapter():
    wrong = []
    for index, chapter in enumerate(CHAPTERS):
        _, body = front_matter_and_body(chapter.file)
        paragraphs = re.findall(r"^\*\*Read next:\*\*(.*?)(?:\n\n|\Z)", body, re.M | re.S)
        if len(paragraphs) != 1:
            wrong.append(f"docs/{chapter.file}: {len(paragraphs)} '**Read next:**' paragraphs")
            continue
        links = re.findall(r"\[([^\]]+)\]\(([^)#]+)(?:#[^)]*)?\)", paragraphs[0])
        if index + 1 == len(CHAPTERS):
            if "index.md" not in [target for _, target in links]:
                wrong.append(f"docs/{chapter.file}: the last chapter leads back home")
            continue
        following = CHAPTERS[index + 1]
        if links[:1] != [(following.label, following.file)]:
            wrong.append(
                f"docs/{chapter.file}: reads next {links[:1]}, not [{following.label}]({following.file})"
            )
    assert wrong == []


def test_the_home_page_lists_every_chapter_in_order():
    listed = home_list()
    assert len(listed) == len(CHAPTERS), (
        f"the home page lists {len(listed)} chapters; the nav has {len(CHAPTERS)}"
    )
    for chapter, line in zip(CHAPTERS, listed, strict=True):
        found = re.match(r"^\[([^\]]+)\]\(([^)]+)\):\s+(.+)$", line)
        assert found, f"home page, {chapter.file}: {line!r} is not '[title](file): what it teaches'"
        assert found.group(1, 2) == (chapter.title, chapter.file), f"home page, chapter {chapter.number}"
        assert len(found.group(3).split()) >= 5, f"home page, {chapter.file}: say what it teaches"


def test_no_page_types_a_chapter_number_and_every_chapter_link_is_numbered_by_the_nav():
    wrong = []
    for doc in PAGES:
        meta, body = front_matter((DOCS / doc).read_text(encoding="utf-8"))
        try:
            filled = number_chapters(body, CHAPTERS, f"docs/{doc}")
        except ValueError as error:
            wrong.append(str(error))
            continue
        wrong += [
            f"docs/{doc}, description: {p}" for p in typed_chapter_numbers(str(meta.get("description", "")))
        ]
        # what the reader sees: "chapter N" links to the page the nav numbers N
        for n, path in re.findall(r"\[(?:[^\]]* )?[Cc]hapter (\d+)(?:'s [^\]]*)?\]\(([^)#]+)", filled):
            if (found := site().chapter(path)) is None or found.number != int(n):
                wrong.append(f"docs/{doc}: chapter {n} -> {path}")
    assert wrong == []


def test_the_numbering_fills_a_chapter_link_and_refuses_a_typed_number():
    one = [c for c in CHAPTERS if c.file == "why-scale.md"]
    assert (
        number_chapters("[chapter {n}](why-scale.md#x)", one) == f"[chapter {one[0].number}](why-scale.md#x)"
    )
    for wrong in ("see chapter 7", "[chapter {n}](faq-long-answers.md)", "a stray {n}"):
        try:
            number_chapters(wrong, CHAPTERS)
        except ValueError:
            continue
        raise AssertionError(f"{wrong!r} was accepted")


def test_the_notebook_names_no_chapter_by_number():
    """The notebook is downloaded and read outside the site, where no number is filled in:
    it names a chapter by its subject ("[the traps chapter](../traps/)")."""
    notebook = json.loads((DOCS / "notebook.ipynb").read_text(encoding="utf-8"))
    text = "\n".join("".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "markdown")
    assert re.findall(r"\]\(\.\./[a-z0-9-]+/", text), "the notebook links the chapters"
    assert typed_chapter_numbers(text) == []


# The pages of the explanation that are not taught with exercises: the questions page and the
# recap (issue 18); every other chapter has at least two.
WITHOUT_EXERCISES = {"faq.md", "recap.md"}
SOLUTION = re.compile(r'^\?\?\? note "Solution[^"]*"\n((?:    .*\n|\n)+)', re.M)
EXERCISE = re.compile(r"^\*\*(\d+)\. ([^*]+)\*\*(.*?)(?=^\?\?\? note \"Solution)", re.M | re.S)


TAUGHT = [c.file for c in CHAPTERS if c.file not in WITHOUT_EXERCISES]


def exercises_section(path: str) -> str | None:
    """What follows a chapter's "## Exercises" heading; None without one."""
    parts = front_matter_and_body(path)[1].split("\n## Exercises\n", 1)
    return parts[1] if len(parts) == 2 else None


def test_every_taught_chapter_has_two_exercises_with_folded_run_and_guarded_solutions():
    wrong = []
    for path in TAUGHT:
        section = exercises_section(path)
        if section is None:
            wrong.append(f"docs/{path}: no '## Exercises' section")
            continue
        solutions = SOLUTION.findall(section)
        if len(solutions) < 2:
            wrong.append(f"docs/{path}: {len(solutions)} folded 'Solution' blocks")
        for solution in solutions:  # each runs code at build time, and a test guards its answer
            if 'exec="on"' not in solution:
                wrong.append(f"docs/{path}: a solution that runs nothing")
            if "<!-- claim:" not in solution:
                wrong.append(f"docs/{path}: a solution no test guards")
        asks = [" ".join(m.group(2, 3)).lower() for m in EXERCISE.finditer(section)]
        if len(asks) != len(solutions):
            wrong.append(f"docs/{path}: an exercise without its solution")
        if not any("predict" in ask for ask in asks):
            wrong.append(
                f"docs/{path}: no exercise asks the reader to predict a number before running the code"
            )
    assert wrong == []


# A solution's title may name the exercise it answers, or give a hint without a number, but
# never the answer (issue 24): "Solution", "Solution 2", "Solution (hint: the weights move)".
NEUTRAL_TITLE = re.compile(r"Solution(?: (?P<number>\d+)| \(hint: [^\d]+\))?")
SOLUTION_TITLE = re.compile(r'^\?\?\? note "(Solution[^"]*)"', re.M)


def test_no_solution_title_gives_the_answer_away():
    wrong = []
    for path in TAUGHT:
        section = exercises_section(path) or ""
        numbers = [int(m.group(1)) for m in EXERCISE.finditer(section)]
        titles = SOLUTION_TITLE.findall(section)
        if len(titles) != len(numbers):
            wrong.append(f"docs/{path}: {len(titles)} titles, {len(numbers)} exercises")
            continue
        for number, title in zip(numbers, titles, strict=True):
            found = NEUTRAL_TITLE.fullmatch(title)
            if not found:
                wrong.append(f"docs/{path}: the title {title!r} says more than 'Solution {number}'")
            elif found.group("number") is not None and int(found.group("number")) != number:
                wrong.append(f"docs/{path}: {title!r} answers exercise {number}")
    assert wrong == []


def test_the_title_rule_tells_a_neutral_title_from_an_answer():
    for neutral in ("Solution", "Solution 3", "Solution (hint: compare the two rows)"):
        assert NEUTRAL_TITLE.fullmatch(neutral)
    for answer in ("Solution: at 33 times its norm", "Solution: no, only ever nearly", "Solution (hint: 4)"):
        assert not NEUTRAL_TITLE.fullmatch(answer)


# Every heading of the explanation this site covers (/work/shared/seed, issue 18): none may be
# a title or heading here, nor may any page point readers at "the source".
EXPLAINED_HEADINGS = {
    "query, key and value",
    "a soft dictionary lookup",
    "where they come from",
    "why keys and values are separate",
    "why three separate projections",
    "the computation, step by step",
    "why three projections and not one",
    "things to try",
    "why divide by √d k",
    "why divide by √dₖ",
    "the three kinds of attention",
    "traps worth knowing",
    "summing up",
    "multiple heads, and where they come from",
    "cross-attention, and the caching trick",
    "questions people ask",
    "recap in one screen",
    # and the shortenings the issue found
    "three kinds of attention",
    "recap",
    "dropping the scaling",
    "why three projections",
    "where q, k and v come from",
}


def _plain(heading: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[*`$\\{}]", "", heading)).strip().lower()


def test_no_title_or_heading_is_one_of_the_explained_texts():
    wrong = [f"nav: {c.title!r}" for c in CHAPTERS if _plain(c.title) in EXPLAINED_HEADINGS]
    for doc in PAGES:
        text = (DOCS / doc).read_text(encoding="utf-8")
        headings = {_plain(h) for h in re.findall(r"^#+ ([^{\n]+)", text, re.M)}
        headings |= {_plain(t) for t in re.findall(r"^title: (.+)$", text, re.M)}
        wrong += [f"docs/{doc}: {h!r}" for h in sorted(headings & EXPLAINED_HEADINGS)]
        if "the source" in text.lower():
            wrong.append(f"docs/{doc} points readers at the source")
    assert wrong == []
