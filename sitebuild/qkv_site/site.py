"""The site as data, read one way by everything that needs it: the build's hooks and plugin,
the claims, the reading times, ``./dev new-chapter``, the tests and the benchmarks.

- :func:`mkdocs_config`: ``mkdocs.yml`` as data (MkDocs' ``!ENV`` tag resolved as MkDocs
  resolves it);
- :class:`Site`: its nav: the pages in reading order, the parts, and the chapters of
  "The explanation" with the numbers their position gives them;
- :func:`front_matter`, :func:`page_title`: a page's YAML header and title;
- :data:`INCLUDE`, :func:`includes`: pymdownx.snippets' ``--8<-- "file:section"`` lines;
- :func:`number_chapters`: chapter links written by name, given their current numbers.

A chapter's number is its place in the nav's "The explanation", never typed: the nav lists
the chapters' titles alone, and a page refers to a chapter by its file. A link's text may
hold two placeholders, filled in at build time from the nav::

    [chapter {n}](why-scale.md)       ->  [chapter 7](why-scale.md)
    [{n}. {title}](why-scale.md)      ->  [7. Scores grow with head width; ...](why-scale.md)

so inserting a chapter (``./dev new-chapter SLUG "Title" --after SLUG``) renumbers every
link, the nav and the home page's list with it.

This module imports only the standard library, PyYAML and MkDocs' front-matter reader.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

EXPLANATION = "The explanation"
FURTHER = "Going further"

# --8<-- "file" or --8<-- "file:section" alone on its line (pymdownx.snippets' block form);
# a leading ; escapes it (the line is shown, not included), so it is not an include
INCLUDE = re.compile(
    r'^(?P<indent>[ \t]*)--8<--[ \t]+"(?P<file>[^":]+)(?::(?P<section>[^"]*))?"[ \t]*$', re.M
)

# [text](chapter.md) or [text](chapter.md#anchor): a Markdown link to a page beside this one
_LINK = re.compile(r"\[(?P<text>[^\]\n]*)\]\((?P<file>[a-z0-9][a-z0-9-]*\.md)(?P<anchor>#[^)\s]*)?\)")
_PLACEHOLDER = re.compile(r"\{(n|title)\}")
# a chapter number typed by hand: "chapter 7", "Chapter 7's", "chapters 5 and 12"
_TYPED_NUMBER = re.compile(r"\b[Cc]hapters? \d")


def mkdocs_config(root: Path, environ: Mapping[str, str] | None = None) -> dict:
    """``root/mkdocs.yml`` as data (MkDocs' own loader would also import the hooks).

    An ``!ENV [NAME, ..., default]`` value is resolved as MkDocs resolves it (the first of
    the variables set, its text read as YAML, else the default), from ``environ`` alone: by
    default none is set, so each takes its default, whatever this process's environment holds.
    """
    import yaml

    environ = {} if environ is None else environ

    def env(loader, node):
        if isinstance(node, yaml.ScalarNode):
            names, default = [loader.construct_scalar(node)], None
        else:
            *names, default = loader.construct_sequence(node)
            names, default = (names, default) if names else ([default], None)
        found = next((environ[n] for n in names if n in environ), None)
        return default if found is None else yaml.safe_load(found)

    loader = type("MkDocsYaml", (yaml.SafeLoader,), {})
    loader.add_constructor("!ENV", env)
    return yaml.load((Path(root) / "mkdocs.yml").read_text(encoding="utf-8"), Loader=loader)


@dataclass(frozen=True)
class Chapter:
    """One chapter of the explanation: its number (its place in the nav), title and file."""

    number: int
    title: str  # as the nav lists it, without the number
    file: str  # under docs/, e.g. "why-scale.md"

    @property
    def label(self) -> str:
        """The chapter as the nav and the links show it: ``"7. Scores grow ..."``."""
        return f"{self.number}. {self.title}"


def _files(entry) -> list[str]:
    """The Markdown files of a nav entry (a file, a {title: entry} or a list), in order."""
    if isinstance(entry, str):
        return [entry]
    if isinstance(entry, dict):
        return [f for value in entry.values() for f in _files(value)]
    if isinstance(entry, list):
        return [f for item in entry for f in _files(item)]
    return []


@dataclass(frozen=True)
class Site:
    """The site's nav (``mkdocs.yml``'s ``nav``, or MkDocs' ``config["nav"]``)."""

    nav: list

    @classmethod
    def read(cls, root: Path) -> Site:
        """The site of the project at ``root``."""
        return cls(mkdocs_config(root)["nav"])

    def pages(self) -> list[str]:
        """Every file the nav lists, in reading order."""
        return _files(self.nav)

    def part(self, title: str) -> list[str]:
        """The files under the nav's part ``title``, in reading order."""
        parts = [item[title] for item in self.nav if isinstance(item, dict) and title in item]
        if len(parts) != 1:
            raise ValueError(f"mkdocs.yml's nav has {len(parts)} parts named {title!r}, expected one")
        return _files(parts[0])

    def chapters(self) -> list[Chapter]:
        """The chapters of "The explanation", numbered by their place in it."""
        (part,) = [item[EXPLANATION] for item in self.nav if isinstance(item, dict) and EXPLANATION in item]
        chapters = []
        for number, entry in enumerate(part, start=1):
            if not (isinstance(entry, dict) and len(entry) == 1):
                raise ValueError(
                    f"mkdocs.yml: the entry {entry!r} of {EXPLANATION!r} is not 'Title: file.md'"
                )
            ((title, file),) = entry.items()
            if re.match(r"\d+\.\s", str(title)):
                raise ValueError(
                    f"mkdocs.yml: the chapter title {title!r} starts with a number; the nav numbers "
                    "the chapters by their place, so write the title alone"
                )
            chapters.append(Chapter(number, str(title), file))
        return chapters

    def chapter(self, file: str) -> Chapter | None:
        """The chapter ``file`` is (None: not a chapter)."""
        return next((c for c in self.chapters() if c.file == file), None)

    def further(self) -> list[str]:
        """The files of "Going further"."""
        return self.part(FURTHER)


def front_matter(text: str) -> tuple[dict, str]:
    """A page's YAML front matter and the Markdown after it, read as MkDocs reads them."""
    from mkdocs.utils import meta

    body, data = meta.get_data(text)
    return data, body


def page_title(path: Path) -> str:
    """A page's title: its front matter's ``title``, else its first heading, else its name."""
    data, body = front_matter(path.read_text(encoding="utf-8"))
    if data.get("title"):
        return str(data["title"])
    heading = re.search(r"^#\s+(.+)$", body, re.M)
    return heading.group(1).strip() if heading else path.stem


@dataclass(frozen=True)
class Include:
    """One ``--8<--`` line: the file it includes (as written) and the section (None: all)."""

    file: str
    section: str | None
    indent: str

    @property
    def snippet(self) -> str:
        """The file under ``snippets/`` (pages may write ``snippets/x.py`` or ``x.py``)."""
        return self.file.removeprefix("snippets/")


def includes(text: str) -> list[Include]:
    """The ``--8<--`` include lines of ``text``, in order.

    >>> [(i.snippet, i.section) for i in includes('  --8<-- "snippets/traps.py:same"\\n--8<-- "a.md"')]
    [('traps.py', 'same'), ('a.md', None)]
    """
    return [Include(m["file"], m["section"], m["indent"]) for m in INCLUDE.finditer(text)]


def number_chapters(markdown: str, chapters: list[Chapter], where: str = "the page") -> str:
    """``markdown`` with each chapter link's ``{n}`` and ``{title}`` filled in from the nav.

    A ValueError names a placeholder in a link to a page that is no chapter, a placeholder
    outside a link, and a chapter number typed by hand ("chapter 7"), which the next
    inserted chapter would make wrong.

    >>> ch = [Chapter(7, "Scores grow", "why-scale.md")]
    >>> number_chapters("see [chapter {n}](why-scale.md#x) and [{n}. {title}](why-scale.md)", ch)
    'see [chapter 7](why-scale.md#x) and [7. Scores grow](why-scale.md)'
    """
    problems = []
    filled = fill_chapter_links(markdown, chapters, problems)
    for lineno, line in _prose_lines(filled):
        if _PLACEHOLDER.search(line):
            problems.append(f"line {lineno}: {{n}} or {{title}} outside a link to a chapter: {line.strip()}")
    problems += typed_chapter_numbers(markdown)
    if problems:
        raise ValueError(f"{where}: " + "; ".join(problems))
    return filled


def fill_chapter_links(markdown: str, chapters: list[Chapter], problems: list[str] | None = None) -> str:
    """``markdown`` with each chapter link's ``{n}`` and ``{title}`` filled in; a placeholder
    in a link to a page that is no chapter is left as it is, and said in ``problems``."""
    by_file = {c.file: c for c in chapters}

    def fill(match: re.Match) -> str:
        text = match["text"]
        if not _PLACEHOLDER.search(text):
            return match.group(0)
        chapter = by_file.get(match["file"])
        if chapter is None:
            if problems is not None:
                problems.append(
                    f"the link [{text}]({match['file']}) numbers a page that is not a chapter "
                    f"of {EXPLANATION!r}; {{n}} and {{title}} are for links to chapters"
                )
            return match.group(0)
        filled = _PLACEHOLDER.sub(lambda p: str(chapter.number) if p[1] == "n" else chapter.title, text)
        return f"[{filled}]({match['file']}{match['anchor'] or ''})"

    # code (fenced blocks, inline spans) shows the placeholders as they are written
    return "".join(part if code else _LINK.sub(fill, part) for part, code in _code_and_prose(markdown))


_CODE = re.compile(r"^([ \t]*)(`{3,}|~{3,}).*?^\1\2[ \t]*$|`[^`\n]*`", re.M | re.S)


def _code_and_prose(text: str):
    """``text`` cut into (part, is_code): fenced blocks and inline code spans, and the rest."""
    at = 0
    for match in _CODE.finditer(text):
        yield text[at : match.start()], False
        yield match.group(0), True
        at = match.end()
    yield text[at:], False


def typed_chapter_numbers(text: str) -> list[str]:
    """Where ``text`` types a chapter's number by hand ("chapter 7") outside code.

    >>> found = typed_chapter_numbers("as [chapter {n}](a.md) shows, and chapter 7 too")
    >>> found == ["line 1: a chapter number typed by hand; link the chapter as "
    ...           "[chapter {n}](file.md) instead: as [chapter {n}](a.md) shows, and chapter 7 too"]
    True
    """
    return [
        f"line {lineno}: a chapter number typed by hand; link the chapter as "
        f"[chapter {{n}}](file.md) instead: {line.strip()}"
        for lineno, line in _prose_lines(text)
        if _TYPED_NUMBER.search(line)
    ]


def _prose_lines(text: str):
    """(number, line) of ``text``'s lines outside fenced code, inline code spans removed."""
    fence = None
    for lineno, line in enumerate(text.splitlines(), start=1):
        opening = re.match(r"\s*(`{3,}|~{3,})", line)
        if fence is None and opening:
            fence = opening.group(1)
            continue
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
            continue
        yield lineno, re.sub(r"`[^`]*`", "", line)
