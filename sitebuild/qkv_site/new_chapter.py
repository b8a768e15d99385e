"""``./dev new-chapter SLUG "Title" [--after SLUG]``: a new chapter that passes every rule
the tests enforce.

The chapter goes after the chapter ``--after`` names (default: the last) in the nav's "The
explanation"; the nav numbers the chapters by their place, and every link to a chapter is
written by name (``[chapter {n}](file.md)``, :mod:`qkv_site.site`), so the chapters after it
renumber themselves. Written from the templates in ``chapter_template/`` (``MODULE`` is the
slug with ``_`` for ``-``):

- ``docs/SLUG.md``: front matter, the H1, a lead, a snippet shown and run, a figure, two
  exercises with folded solutions (the first asks for a prediction), each guarded, and the
  "Read next" paragraph the chapter before it had;
- ``snippets/MODULE.py``: the sections the page shows and runs;
- ``sitebuild/qkv_site/figures/MODULE.py``: the figure the page places, drawn from ``qkv``;
- ``tests/fast/pages/test_MODULE.py``: a guard for each claim the page marks, and a test of
  the figure's alt text;
- ``tests/figure_tables/MODULE.py``: the figure's table, rebuilt from its ``data()``, for
  tests/site/test_figure_data.py.

Edited: ``mkdocs.yml`` (the nav entry "Title" after the chapter before it), ``docs/index.md``
(the chapter's line under "The chapters") and the chapter before it (its "Read next" leads
here). No test file is edited. Every file is worked out before any is written, so a refusal
writes nothing.
"""

from __future__ import annotations

import argparse
import json
import keyword
import re
import sys
from pathlib import Path
from string import Template

import yaml

from qkv_site.site import EXPLANATION, Site

TEMPLATES = Path(__file__).resolve().parent / "chapter_template"
SLUG = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
MAX_SLUG = 40  # the longest line a slug goes into must still fit its file's width
# read as markup by Markdown, the nav, the tests' link patterns or the chapter links
MARKUP = set("[]*`$<>\\{}")
READ_NEXT = re.compile(r"^\*\*Read next:\*\*.*?(?=\n\n|\n*\Z)", re.M | re.S)
SUMMARY = "what the toy sentence's attention weights add up to, printed, drawn and checked."


def check_slug(slug: str) -> str:
    """``slug`` if it is kebab-case; a ValueError saying what is wanted otherwise.

    Examples
    --------
    >>> check_slug("attention-sinks")
    'attention-sinks'
    >>> check_slug("Attention_Sinks")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: the slug 'Attention_Sinks' is not kebab-case: ...
    """
    if not SLUG.fullmatch(slug) or len(slug) > MAX_SLUG:
        raise ValueError(
            f"the slug {slug!r} is not kebab-case: lowercase words of letters and digits "
            f"joined by single hyphens, starting with a letter, at most {MAX_SLUG} "
            "characters, such as 'attention-sinks'"
        )
    if keyword.iskeyword(slug):
        raise ValueError(f"the slug {slug!r} is a Python keyword, which cannot name its snippet module")
    return slug


def check_title(title: str) -> str:
    """``title`` without surrounding spaces if a chapter can carry it; a ValueError otherwise.

    Examples
    --------
    >>> check_title("  Why the first token collects the weight ")
    'Why the first token collects the weight'
    >>> check_title(" ")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: the title is empty: give the chapter's title in quotes, ...
    """
    title = title.strip()
    if not title:
        raise ValueError(
            "the title is empty: give the chapter's title in quotes, such as "
            './dev new-chapter attention-sinks "Why the first token collects the weight"'
        )
    if "\n" in title or "\r" in title:
        raise ValueError(f"the title {title!r} spans lines; a title is one line")
    if markup := "".join(sorted(MARKUP & set(title))):
        raise ValueError(
            f"the title {title!r} contains {markup!r}, which Markdown or the nav read as "
            "markup; write it in plain words"
        )
    if re.match(r"\d+\.\s", title):
        raise ValueError(f"the title {title!r} starts with a number; the nav adds the chapter's number")
    return title


def yaml_text(text: str) -> str:
    """``text`` as a YAML value: plain when YAML reads it back unchanged, else in quotes.

    Examples
    --------
    >>> yaml_text("What a key decides")
    'What a key decides'
    >>> yaml_text("Only two products matter: query-key and value-output")
    '"Only two products matter: query-key and value-output"'
    """
    try:
        if yaml.safe_load(f"- {text}: x") == [{text: "x"}]:
            return text
    except yaml.YAMLError:
        pass
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a YAML double-quoted one


def nav_lines(mkdocs_yml: str) -> dict[str, int]:
    """The line index of each chapter's entry under the nav's "The explanation", by file."""
    lines = mkdocs_yml.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == f"- {EXPLANATION}:"]
    if len(starts) != 1:
        raise ValueError(f"mkdocs.yml: {len(starts)} nav parts named {EXPLANATION!r}, expected one")
    depth = len(lines[starts[0]]) - len(lines[starts[0]].lstrip())
    found = {}
    for i in range(starts[0] + 1, len(lines)):
        line = lines[i]
        if not line.strip() or line.lstrip().startswith("#"):
            continue  # a blank line or a comment inside the part
        if len(line) - len(line.lstrip()) <= depth:
            break
        ((_, path),) = yaml.safe_load(line.strip())[0].items()
        found[path] = i
    if not found:
        raise ValueError(f"mkdocs.yml: the nav part {EXPLANATION!r} lists no chapter")
    return found


def plan(root: Path, slug: str, title: str, after: str | None = None) -> dict[str, str]:
    """The text of every file the new chapter writes or edits, by path under ``root``; it
    goes after the chapter ``after`` (a slug; default: the last chapter).

    Raises ValueError, naming the problem, for a bad slug or title, a slug already taken,
    an ``after`` that is no chapter, or a file that no longer has the shape this generator
    edits."""
    slug, title = check_slug(slug), check_title(title)
    module = slug.replace("-", "_")
    new = {
        f"docs/{slug}.md": "chapter.md.tmpl",
        f"snippets/{module}.py": "snippet.py.tmpl",
        f"sitebuild/qkv_site/figures/{module}.py": "figure.py.tmpl",
        f"tests/fast/pages/test_{module}.py": "test.py.tmpl",
        f"tests/figure_tables/{module}.py": "figure_table.py.tmpl",
    }
    if taken := [path for path in new if (root / path).exists()]:
        there = f"{' and '.join(taken)} {'exists' if len(taken) == 1 else 'exist'}"
        raise ValueError(f"the slug {slug!r} is taken: {there} already; choose another slug")
    claimed = [p.name for p in sorted((root / "docs").glob("*.md")) if f"<!-- claim: {slug}-" in read(p)]
    if claimed:
        raise ValueError(f"the slug {slug!r} starts claim ids already used in docs/{claimed[0]}")

    chapters = Site.read(root).chapters()
    if title in [c.title for c in chapters]:
        raise ValueError(f"the title {title!r} is taken by a chapter already; give this one its own")
    if after is None:
        before = chapters[-1]
    else:
        before = next((c for c in chapters if c.file == f"{after}.md"), None)
        if before is None:
            names = ", ".join(c.file.removesuffix(".md") for c in chapters)
            raise ValueError(
                f"--after {after!r} is not a chapter of {EXPLANATION!r}; its chapters are {names}"
            )
    mkdocs_yml = read(root / "mkdocs.yml")
    at = nav_lines(mkdocs_yml)[before.file]
    lines = mkdocs_yml.splitlines(keepends=True)
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
    lines.insert(at + 1, f"{indent}- {yaml_text(title)}: {slug}.md\n")

    # the chapter before leads here; where it led, the new chapter leads on
    previous = read(root / "docs" / before.file)
    found = list(READ_NEXT.finditer(previous))
    if len(found) != 1:
        raise ValueError(f"docs/{before.file}: {len(found)} '**Read next:**' paragraphs, expected one")
    lead_on = f"**Read next:** [{{n}}. {{title}}]({slug}.md): {SUMMARY}"
    previous = previous[: found[0].start()] + lead_on + previous[found[0].end() :]

    values = {
        "slug": slug,
        "module": module,
        "title": title,
        "title_yaml": yaml_text(title),
        "description_yaml": yaml_text(
            f"{title}: a new chapter's starting point, with the toy sentence's attention "
            "weights printed by its snippet, drawn by its figure and checked by its tests."
        ),
        "read_next": found[0].group(0),
        "test_file": f"tests/fast/pages/test_{module}.py",
    }
    files = {path: Template(read(TEMPLATES / name)).substitute(values) for path, name in new.items()}
    files["mkdocs.yml"] = "".join(lines)
    files[f"docs/{before.file}"] = previous
    files["docs/index.md"] = home_page(read(root / "docs" / "index.md"), before.file, slug)
    return files


def home_page(text: str, before: str, slug: str) -> str:
    """The home page with the new chapter's line after the line of chapter ``before`` under
    "## The chapters" (a list Markdown numbers itself: every item is written "1.")."""
    head = text.find("\n## The chapters\n")
    if head < 0:
        raise ValueError("docs/index.md has no '## The chapters' section")
    tail = text.find("\n## ", head + 1)
    section = text[head : tail if tail >= 0 else len(text)]
    items = [m for m in re.finditer(r"^\d+\. \[[^\]]*\]\(([a-z0-9-]+\.md)\).*$", section, re.M)]
    line = next((m for m in items if m.group(1) == before), None)
    if line is None:
        raise ValueError(f"docs/index.md lists no line for {before} under '## The chapters'")
    at = head + line.end()
    return text[:at] + f"\n1. [{{title}}]({slug}.md): {SUMMARY}" + text[at:]


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def create(root: Path, slug: str, title: str, after: str | None = None) -> list[str]:
    """Write the new chapter into the project at ``root``; the paths written, sorted."""
    files = plan(root, slug, title, after)
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
    return sorted(files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="./dev new-chapter",
        description="Add a chapter, with its snippet, figure and tests, after the last chapter "
        "or the one --after names.",
    )
    parser.add_argument("slug", help="the page's name in kebab-case, e.g. attention-sinks")
    parser.add_argument(
        "title", help='the chapter\'s title, in quotes, e.g. "Why the first token collects the weight"'
    )
    parser.add_argument(
        "--after", metavar="SLUG", help="the chapter the new one follows (default: the last chapter)"
    )
    args = parser.parse_args(argv)
    try:
        written = create(Path.cwd(), args.slug, args.title, args.after)
    except ValueError as error:
        print(f"./dev new-chapter: {error}", file=sys.stderr)
        return 2
    print("\n".join(["Wrote:", *(f"  {path}" for path in written)]))
    print(
        f"Next: make docs/{args.slug}.md your own (its first comment says how), keep its tests "
        "passing with ./dev check, and see it with ./dev serve. docs/contributing.md lists "
        "the rules the tests enforce."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
