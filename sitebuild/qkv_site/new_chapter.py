"""``./dev new-chapter SLUG "Title"``: a new chapter that passes every rule the tests enforce.

The chapter goes after the last one of the nav's "The explanation", numbered next. Written
from the templates in ``chapter_template/`` (``MODULE`` is the slug with ``_`` for ``-``):

- ``docs/SLUG.md``: front matter, the H1, a lead, a snippet shown and run, a figure, two
  exercises with folded solutions (the first asks for a prediction), each guarded, and the
  "Read next" paragraph the previous last chapter had (the last chapter leads back home);
- ``snippets/MODULE.py``: the sections the page shows and runs;
- ``sitebuild/qkv_site/figures/MODULE.py``: the figure the page places, drawn from ``qkv``;
- ``tests/fast/test_chapter_MODULE.py``: a guard for each claim the page marks, and a test
  of the figure's alt text.

Edited: ``mkdocs.yml`` (the nav entry "N. Title"), ``docs/index.md`` (the chapter's line
under "The chapters"), the previous last chapter (its "Read next" leads here) and
``tests/site/test_figure_data.py`` (the figure's table, rebuilt from its ``data()``).
Every file is worked out before any is written, so a refusal writes nothing.
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

TEMPLATES = Path(__file__).resolve().parent / "chapter_template"
PART = "The explanation"
SLUG = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
MAX_SLUG = 40  # the longest line a slug goes into must still fit its file's width
MARKUP = set("[]*`$<>\\")  # read as markup by Markdown, by the nav or by the tests' link patterns
READ_NEXT = re.compile(r"^\*\*Read next:\*\*.*?(?=\n\n|\n*\Z)", re.M | re.S)
SUMMARY = "what the toy sentence's attention weights add up to, printed, drawn and checked."
FIGURE_TABLES = "tests/site/test_figure_data.py"
NO_TABLE = '    raise AssertionError(f"no expected table for figure {name!r}: add one here")\n'
TABLE_BRANCH = """    if name == "{slug}":
        return [[[w, *row] for w, row in zip(d.words, d.weights, strict=True)]]
"""


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


def explanation(mkdocs_yml: str) -> tuple[list[tuple[int, str, str]], int]:
    """The chapters under the nav's "The explanation" as (number, title, file), in order,
    and the index of the line after the last one (where the next chapter goes)."""
    lines = mkdocs_yml.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == f"- {PART}:"]
    if len(starts) != 1:
        raise ValueError(f"mkdocs.yml: {len(starts)} nav parts named {PART!r}, expected one")
    depth = len(lines[starts[0]]) - len(lines[starts[0]].lstrip())
    chapters, end = [], starts[0] + 1
    for i in range(starts[0] + 1, len(lines)):
        line = lines[i]
        if not line.strip() or line.lstrip().startswith("#"):
            continue  # a blank line or a comment inside the part
        if len(line) - len(line.lstrip()) <= depth:
            break
        ((label, path),) = yaml.safe_load(line.strip())[0].items()
        numbered = re.fullmatch(r"(\d+)\. (.+)", label)
        if not numbered:
            raise ValueError(f"mkdocs.yml: the nav entry {label!r} is not 'N. Title'")
        chapters.append((int(numbered.group(1)), numbered.group(2), path))
        end = i + 1
    if not chapters:
        raise ValueError(f"mkdocs.yml: the nav part {PART!r} lists no chapter")
    return chapters, end


def plan(root: Path, slug: str, title: str) -> dict[str, str]:
    """The text of every file the new chapter writes or edits, by path under ``root``.

    Raises ValueError, naming the problem, for a bad slug or title, a slug already taken,
    or a file that no longer has the shape this generator edits."""
    slug, title = check_slug(slug), check_title(title)
    module = slug.replace("-", "_")
    new = {
        f"docs/{slug}.md": "chapter.md.tmpl",
        f"snippets/{module}.py": "snippet.py.tmpl",
        f"sitebuild/qkv_site/figures/{module}.py": "figure.py.tmpl",
        f"tests/fast/test_chapter_{module}.py": "test.py.tmpl",
    }
    if taken := [path for path in new if (root / path).exists()]:
        there = f"{' and '.join(taken)} {'exists' if len(taken) == 1 else 'exist'}"
        raise ValueError(f"the slug {slug!r} is taken: {there} already; choose another slug")
    claimed = [p.name for p in sorted((root / "docs").glob("*.md")) if f"<!-- claim: {slug}-" in read(p)]
    if claimed:
        raise ValueError(f"the slug {slug!r} starts claim ids already used in docs/{claimed[0]}")

    mkdocs_yml = read(root / "mkdocs.yml")
    chapters, end = explanation(mkdocs_yml)
    if title in [t for _, t, _ in chapters]:
        raise ValueError(f"the title {title!r} is taken by a chapter already; give this one its own")
    number, last = chapters[-1][0] + 1, chapters[-1][2]
    lines = mkdocs_yml.splitlines(keepends=True)
    indent = lines[end - 1][: len(lines[end - 1]) - len(lines[end - 1].lstrip())]
    lines.insert(end, f"{indent}- {yaml_text(f'{number}. {title}')}: {slug}.md\n")

    # the previous last chapter leads here; its way back home moves to the new last chapter
    previous = read(root / "docs" / last)
    found = list(READ_NEXT.finditer(previous))
    if len(found) != 1:
        raise ValueError(f"docs/{last}: {len(found)} '**Read next:**' paragraphs, expected one")
    lead_on = f"**Read next:** [{number}. {title}]({slug}.md): {SUMMARY}"
    previous = previous[: found[0].start()] + lead_on + previous[found[0].end() :]

    values = {
        "slug": slug,
        "module": module,
        "title": title,
        "number": number,
        "previous": number - 1,
        "title_yaml": yaml_text(title),
        "description_yaml": yaml_text(
            f"{title}: a new chapter's starting point, with the toy sentence's attention "
            "weights printed by its snippet, drawn by its figure and checked by its tests."
        ),
        "read_next": found[0].group(0),
    }
    files = {path: Template(read(TEMPLATES / name)).substitute(values) for path, name in new.items()}
    files["mkdocs.yml"] = "".join(lines)
    files[f"docs/{last}"] = previous
    files["docs/index.md"] = home_page(read(root / "docs" / "index.md"), number, title, slug)
    tables = read(root / FIGURE_TABLES)
    if tables.count(NO_TABLE) != 1:
        raise ValueError(f"{FIGURE_TABLES}: expected_tables() no longer ends in {NO_TABLE.strip()!r}")
    files[FIGURE_TABLES] = tables.replace(NO_TABLE, TABLE_BRANCH.format(slug=slug) + NO_TABLE)
    return files


def home_page(text: str, number: int, title: str, slug: str) -> str:
    """The home page with chapter ``number``'s line after the last line under "## The chapters"."""
    head = text.find("\n## The chapters\n")
    if head < 0:
        raise ValueError("docs/index.md has no '## The chapters' section")
    tail = text.find("\n## ", head + 1)
    section = text[head : tail if tail >= 0 else len(text)]
    items = list(re.finditer(r"^(\d+)\. .*$", section, re.M))
    if not items or int(items[-1].group(1)) != number - 1:
        listed = items[-1].group(1) if items else "none"
        raise ValueError(f"docs/index.md lists chapters up to {listed}; the nav's last is {number - 1}")
    at = head + items[-1].end()
    return text[:at] + f"\n{number}. [{title}]({slug}.md): {SUMMARY}" + text[at:]


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def create(root: Path, slug: str, title: str) -> list[str]:
    """Write the new chapter into the project at ``root``; the paths written, sorted."""
    files = plan(root, slug, title)
    for path, text in files.items():
        (root / path).write_text(text, encoding="utf-8")
    return sorted(files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="./dev new-chapter",
        description="Add a chapter after the last one, with its snippet, figure and tests.",
    )
    parser.add_argument("slug", help="the page's name in kebab-case, e.g. attention-sinks")
    parser.add_argument(
        "title", help='the chapter\'s title, in quotes, e.g. "Why the first token collects the weight"'
    )
    args = parser.parse_args(argv)
    try:
        written = create(Path.cwd(), args.slug, args.title)
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
