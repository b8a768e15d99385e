"""The chapters read as one numbered sequence, in the order mkdocs.yml's nav gives them,
under titles of our own.

The nav's "The explanation" names each chapter "N. Title". Every chapter's H1 and
front-matter title are that title; its "**Read next:**" link leads to the next chapter of
the nav, named "N. Title" (the last one back to the home page); and the home page's list of
chapters holds every nav chapter under its number, with its nav title, a link to it and a
line on what it teaches; every "chapter N" link leads to the page the nav numbers N; and no
title or heading is one of the explained text's headings. Everything is read from
mkdocs.yml, so a chapter added to the nav is checked without editing this file.
"""

from __future__ import annotations

import json
import re

import yaml
from support import ROOT, nav_section

DOCS = ROOT / "docs"
PART = "The explanation"
NAV_TITLE = re.compile(r"^(\d+)\. (.+)$")


def explanation() -> list[tuple[int, str, str]]:
    """(number, title, file) of every chapter under the nav's "The explanation", in order."""
    chapters = []
    for label, path in nav_section(PART):
        found = NAV_TITLE.match(label)
        assert found, f"nav entry {label!r} is not 'N. Title'"
        chapters.append((int(found.group(1)), found.group(2), path))
    return chapters


CHAPTERS = explanation()


def front_matter_and_body(path: str) -> tuple[dict, str]:
    text = (DOCS / path).read_text(encoding="utf-8")
    found = re.match(r"\A---\n(.*?)\n---\n(.*)\Z", text, re.S)
    assert found, f"docs/{path} has no front matter"
    return yaml.safe_load(found.group(1)), found.group(2)


BY_FILE = {path: (number, title) for number, title, path in CHAPTERS}
PAGES = sorted(p.name for p in DOCS.glob("*.md"))


def home_list() -> dict[int, str]:
    """The home page's numbered list under "## The chapters": number -> the rest of the line."""
    _, body = front_matter_and_body("index.md")
    section = body.split("\n## The chapters", 1)[1].split("\n## ", 1)[0]
    items = [re.match(r"^(\d+)\.\s+(.+)$", line) for line in section.splitlines()]
    return {int(m.group(1)): m.group(2) for m in items if m}


def test_the_nav_numbers_the_chapters_in_order_without_repeats():
    numbers = [n for n, _, _ in CHAPTERS]
    assert numbers == sorted(set(numbers)) and numbers[0] == 1, numbers


def test_every_chapter_is_titled_as_the_nav_names_it():
    wrong = []
    for _, title, path in CHAPTERS:
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
    for index, (_, _, path) in enumerate(CHAPTERS):
        _, body = front_matter_and_body(path)
        paragraphs = re.findall(r"^\*\*Read next:\*\*(.*?)(?:\n\n|\Z)", body, re.M | re.S)
        if len(paragraphs) != 1:
            wrong.append(f"docs/{path}: {len(paragraphs)} '**Read next:**' paragraphs")
            continue
        links = re.findall(r"\[([^\]]+)\]\(([^)#]+)(?:#[^)]*)?\)", paragraphs[0])
        if index + 1 == len(CHAPTERS):
            if "index.md" not in [target for _, target in links]:
                wrong.append(f"docs/{path}: the last chapter leads back home")
            continue
        number, title, following = CHAPTERS[index + 1]
        if links[:1] != [(f"{number}. {title}", following)]:
            wrong.append(f"docs/{path}: reads next {links[:1]}, not [{number}. {title}]({following})")
    assert wrong == []


def test_the_home_page_lists_every_chapter_in_order():
    listed = home_list()
    assert sorted(listed) == list(range(1, max(listed) + 1)), "numbered 1..N without a gap"
    assert max(listed) >= CHAPTERS[-1][0]
    for number, title, path in CHAPTERS:
        line = listed.get(number, "")
        found = re.match(r"^\[([^\]]+)\]\(([^)]+)\):\s+(.+)$", line)
        assert found, f"home page, chapter {number}: {line!r} is not '[title](file): what it teaches'"
        assert found.group(1, 2) == (title, path), f"home page, chapter {number}"
        assert len(found.group(3).split()) >= 5, f"home page, chapter {number}: say what it teaches"


# The pages of the explanation that are not taught with exercises: the questions page and the
# recap (issue 18); every other chapter has at least two.
WITHOUT_EXERCISES = {"faq.md", "recap.md"}
SOLUTION = re.compile(r'^\?\?\? note "Solution[^"]*"\n((?:    .*\n|\n)+)', re.M)
EXERCISE = re.compile(r"^\*\*(\d+)\. ([^*]+)\*\*(.*?)(?=^\?\?\? note \"Solution)", re.M | re.S)


TAUGHT = [path for _, _, path in CHAPTERS if path not in WITHOUT_EXERCISES]


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


def test_every_numbered_chapter_link_names_the_right_number():
    wrong = []
    for doc in PAGES:
        text = (DOCS / doc).read_text(encoding="utf-8")
        links = re.findall(r"\[(?:chapter|Chapter) (\d+)\]\(([^)#]+)", text)
        links += re.findall(r"\[(\d+) →\]\(([^)#]+)", text)  # the recap's arrows
        wrong += [
            f"docs/{doc}: chapter {n} -> {path}"
            for n, path in links
            if BY_FILE.get(path, (None,))[0] != int(n)
        ]
    assert wrong == [], "chapters named by the wrong number"


def test_the_notebook_names_chapters_by_their_numbers():
    notebook = json.loads((DOCS / "notebook.ipynb").read_text(encoding="utf-8"))
    text = "\n".join("".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "markdown")
    links = re.findall(r"\[chapter (\d+)\]\(\.\./([^/)#]+)/", text)
    assert links
    wrong = [(n, slug) for n, slug in links if BY_FILE[slug + ".md"][0] != int(n)]
    assert not wrong, f"the notebook names chapters by the wrong number: {wrong}"


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
    wrong = [f"nav: {t!r}" for _, t, _ in CHAPTERS if _plain(t) in EXPLAINED_HEADINGS]
    for doc in PAGES:
        text = (DOCS / doc).read_text(encoding="utf-8")
        headings = {_plain(h) for h in re.findall(r"^#+ ([^{\n]+)", text, re.M)}
        headings |= {_plain(t) for t in re.findall(r"^title: (.+)$", text, re.M)}
        wrong += [f"docs/{doc}: {h!r}" for h in sorted(headings & EXPLAINED_HEADINGS)]
        if "the source" in text.lower():
            wrong.append(f"docs/{doc} points readers at the source")
    assert wrong == []
