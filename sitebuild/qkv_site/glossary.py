"""The glossary: terms defined where the reading first meets them, and shown in place.

``includes/glossary.md`` holds one line per form of a term (``*[token]: definition``,
``*[tokens]: definition``), in the syntax of Markdown's ``abbr`` extension. pymdownx.snippets
appends it to every page (``auto_append`` in mkdocs.yml), so ``abbr`` wraps each use of a
term in ``<abbr title="definition">``: a reader sees the definition on hover. This module
then keeps, on each page, only the first mark of each term and makes it focusable
(``tabindex="0"``), so the definition shows on keyboard focus too (``assets/css/qkv.css``)
and a page does not carry the same definition a hundred times.

A chapter defines each term in its own words where the reading order first meets it,
inside ``<dfn>...</dfn>`` (HTML's element for the defining instance of a term). The page
"Glossary" (``glossary.md``) is generated from the file and those places: each term, its
definition and a link to where it is defined. tests/fast/test_glossary.py checks the order.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path

from mkdocs.structure.files import File

SOURCE = Path("includes") / "glossary.md"  # from the project's root
PAGE = "glossary.md"
_LINE = re.compile(r"^\*\[([^\]]+)\]:[ \t]*(.+?)[ \t]*$", re.M)
_DFN = re.compile(r"<dfn>([^<]+)</dfn>")
_ABBR = re.compile(r'<abbr title="([^"]*)">(.*?)</abbr>', re.S)
_HEADING = re.compile(r"<h([1-6])\b[^>]*>.*?</h\1>", re.S)


@dataclass(frozen=True)
class Term:
    forms: tuple[str, ...]  # as the pages write it: ("token", "tokens")
    definition: str

    @property
    def name(self) -> str:
        return self.forms[0]


def read_terms(root: Path) -> list[Term]:
    """The glossary's terms in file order, the forms that share a definition as one term.
    ValueError when a form is listed twice or a line is not ``*[form]: definition``."""
    text = (Path(root) / SOURCE).read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line.strip()]
    found: dict[str, list[str]] = {}
    seen: set[str] = set()
    for line in lines:
        match = _LINE.match(line)
        if not match:
            raise ValueError(f"{SOURCE}: {line!r} is not a line '*[term]: definition'")
        form, definition = match.groups()
        if form in seen:
            raise ValueError(f"{SOURCE}: {form!r} is listed twice")
        seen.add(form)
        found.setdefault(definition, []).append(form)
    return [Term(tuple(forms), definition) for definition, forms in found.items()]


def defined_in(docs_dir: Path, order: list[str]) -> dict[str, str]:
    """``{form: page}`` for every ``<dfn>form</dfn>`` in the pages of ``order`` (forms in
    lower case: a sentence may start with one)."""
    where = {}
    for page in order:
        path = Path(docs_dir) / page
        if path.suffix == ".md" and path.is_file():
            for form in _DFN.findall(path.read_text(encoding="utf-8")):
                where.setdefault(form.strip().casefold(), page)
    return where


def glossary_markdown(terms: list[Term], where: dict[str, str], titles: dict[str, str]) -> str:
    lines = [
        "---",
        "title: Glossary",
        "description: Every term the explanation uses, in plain words, and where it is first explained.",
        "---",
        "",
        "# Glossary",
        "",
        "Each term is defined in the chapter where the reading first meets it; hover over it,",
        "or reach it with the keyboard, on any page to see its definition there.",
        "",
    ]
    for term in sorted(terms, key=lambda t: t.name.lower()):
        page = next((where[f.casefold()] for f in term.forms if f.casefold() in where), None)
        place = f" [{titles.get(page, page)}]({page})" if page else ""
        lines += [f"**{', '.join(term.forms)}**", f":   {term.definition}{place}", ""]
    return "\n".join(lines)


def first_marks_only(page_html: str) -> str:
    """Keep the first ``<abbr>`` of each definition on a page's text, focusable; the later
    ones, and any in a heading (a title is not where a term is explained), become plain text."""
    page_html = _HEADING.sub(lambda m: _ABBR.sub(r"\2", m.group(0)), page_html)
    seen: set[str] = set()

    def keep(match: re.Match) -> str:
        title, text = match.groups()
        if title in seen:
            return text
        seen.add(title)
        return f'<abbr title="{title}" tabindex="0">{text}</abbr>'

    return _ABBR.sub(keep, page_html)


# ---- MkDocs event handlers -------------------------------------------------------------------


def on_files(files, config):
    from qkv_site.site import Site, page_title

    root = Path(config.config_file_path).resolve().parent
    docs_dir = Path(config["docs_dir"])
    order = Site(config["nav"]).pages()
    where = defined_in(docs_dir, order)
    titles = {page: html.unescape(page_title(docs_dir / page)) for page in set(where.values())}
    files.append(File.generated(config, PAGE, content=glossary_markdown(read_terms(root), where, titles)))
    return files


def on_page_content(page_html, page, config, files):
    return first_marks_only(page_html)
