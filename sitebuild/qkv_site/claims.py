"""Guarded claims: every number or code fact the prose states points at the test that checks it.

In a chapter, a claim is marked right after the sentence that makes it::

    Every row of weights sums to 1. <!-- claim: rows-sum-to-one -->

A test guards it with a marker::

    @pytest.mark.claim("rows-sum-to-one")
    def test_rows_sum_to_one(): ...

At build time ``hooks/claims.py`` (a MkDocs hook that re-exports this module's event
handlers) turns each marker into a small link to the generated page
"How we know" (``how-we-know.md``), which lists every claim, where it is made and
the tests that guard it. A claim with no guard, a guard naming no claim, or a claim
id used twice is reported as a warning, which fails ``mkdocs build --strict``.
"""

from __future__ import annotations

import ast
import functools
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from mkdocs.structure.files import File

from qkv_site.site import EXPLANATION, FURTHER, Chapter, Site, fill_chapter_links, page_title

log = logging.getLogger("mkdocs.hooks.claims")

CLAIM_MARK = re.compile(r"<!--\s*claim:\s*([a-z0-9][a-z0-9-]*)\s*-->")
LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+\.)\s")
# an admonition's or a fold's opening line ('??? info "Title"'): it heads a block, no sentence
BLOCK_OPENER = re.compile(r'^\s*(?:\?\?\?\+?|!!!)\s+[\w-]+(?:\s+"[^"]*")?\s*$')
PAGE = "how-we-know.md"  # the claims of the explanation and of every other page
FURTHER_PAGE = "how-we-know-further.md"  # the claims of the deep dives of chapters 1 to 7
FURTHER_LATER_PAGE = "how-we-know-further-later.md"  # of chapter 8 on, and of the rest of Going further
# Going further's claims fill two pages, split between two chapters' deep dives, so that each
# page stays under the site's 200 KB of HTML (tests/site/test_page_weight.py)
FURTHER_SPLIT = 7
LISTINGS = (PAGE, FURTHER_PAGE, FURTHER_LATER_PAGE)


@dataclass(frozen=True)
class Claim:
    id: str
    page: str  # source path under docs/, e.g. "why-scale.md"
    sentence: str  # the sentence the marker follows, markdown stripped


@dataclass(frozen=True)
class Guard:
    claim_id: str
    test: str  # pytest node id, e.g. "tests/fast/test_x.py::test_y"


def _last_sentence(text_before: str) -> str:
    text = re.sub(r"<[^>]+>", "", text_before)  # raw HTML
    # a link's attribute list ({ aria-label="..." }) belongs to the link; dropped with it,
    # or attr_list would pin it on whatever precedes it in the quoted sentence
    text = re.sub(r"(\]\([^)]*\))\{[^}]*\}", r"\1", text)
    text = re.sub(r"(\s*\[[^\]]*\]\([^)]*\))+\s*$", "", text)  # trailing links: navigation
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links -> their text
    text = re.sub(r"\*", "", text).strip()  # keep _ (subscripts in $...$) and `code`
    text = re.sub(r"^\s*(?:[-*+]|\d+\.)\s+", "", text)  # list bullets
    text = re.sub(r"\s+", " ", text)
    sentences = re.split(r"(?<=[.!?])\s+(?=[A-Z(\\$0-9])", text)
    return sentences[-1].strip() if sentences else text


def find_claims(docs_dir: Path, chapters: list[Chapter] | None = None) -> list[Claim]:
    """Every claim marker in the Markdown under ``docs_dir``, in file order.

    The sentence recorded is the last one before the marker in its paragraph, so a
    sentence that wraps over several source lines is kept whole; its chapter links carry
    their numbers (``chapters``; default: the nav of the project ``docs_dir`` is in).
    """
    if chapters is None:
        has_nav = (docs_dir.parent / "mkdocs.yml").is_file()
        chapters = Site.read(docs_dir.parent).chapters() if has_nav else []
    claims = []
    for path in sorted(docs_dir.rglob("*.md")):
        paragraph = ""  # the text of the current paragraph before this line
        text = fill_chapter_links(path.read_text(encoding="utf-8"), chapters)
        for line in text.splitlines():
            if not line.strip() or LIST_ITEM.match(line) or BLOCK_OPENER.match(line):
                paragraph = ""  # a blank line, a new list item or a block starts a paragraph
            if not line.strip() or BLOCK_OPENER.match(line):
                continue
            consumed = 0
            for match in CLAIM_MARK.finditer(line):
                sentence = _last_sentence(paragraph + " " + line[consumed : match.start()])
                claims.append(Claim(match.group(1), path.relative_to(docs_dir).as_posix(), sentence))
                paragraph, consumed = "", match.end()
            paragraph += " " + line[consumed:].strip()
    return claims


def _claim_ids(decorator: ast.expr) -> list[str]:
    """The ids in ``@pytest.mark.claim("a", "b")``, or [] for any other decorator."""
    if not (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute)):
        return []
    if decorator.func.attr != "claim" or ast.unparse(decorator.func.value) != "pytest.mark":
        return []
    return [a.value for a in decorator.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]


def find_guards(tests_dir: Path) -> list[Guard]:
    """Every ``@pytest.mark.claim`` on a test function or class under ``tests_dir``."""
    guards = []
    for path in sorted(tests_dir.rglob("test_*.py")):
        stat = path.stat()
        rel = path.relative_to(tests_dir.parent).as_posix()
        guards += _guards_in(path, rel, stat.st_mtime_ns, stat.st_size)
    return guards


@functools.lru_cache(maxsize=512)
def _guards_in(path: Path, rel: str, mtime_ns: int, size: int) -> tuple[Guard, ...]:
    """The guards in one test file (parsed again only when the file changes: each rebuild
    of ``mkdocs serve`` asks)."""
    guards = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        members = [(node, "")]
        if isinstance(node, ast.ClassDef):
            members += [(m, node.name + "::") for m in node.body]
        for member, prefix in members:
            if not isinstance(member, ast.FunctionDef | ast.ClassDef):
                continue
            for decorator in member.decorator_list:
                for claim_id in _claim_ids(decorator):
                    guards.append(Guard(claim_id, f"{rel}::{prefix}{member.name}"))
    return tuple(guards)


def problems(claims: list[Claim], guards: list[Guard]) -> list[str]:
    """What is wrong with the claims and guards, as sentences; empty when all is well."""
    found = []
    seen: dict[str, str] = {}
    for claim in claims:
        if claim.id in seen:
            found.append(f"claim '{claim.id}' is marked twice ({seen[claim.id]} and {claim.page})")
        seen[claim.id] = claim.page
    guarded = {g.claim_id for g in guards}
    for claim in claims:
        if claim.id not in guarded:
            found.append(
                f"claim '{claim.id}' in {claim.page} has no test marked @pytest.mark.claim('{claim.id}')"
            )
    for guard in guards:
        if guard.claim_id not in seen:
            found.append(f"{guard.test} guards claim '{guard.claim_id}', which no page makes")
    return found


FILTER = (
    '<div class="claim-filter" data-testid="claim-filter">\n'
    '<label for="claim-filter-input">Show the claims that mention</label>\n'
    '<input type="search" id="claim-filter-input" autocomplete="off" '
    'placeholder="a word, a number or a test">\n'
    '<output id="claim-filter-count" for="claim-filter-input" aria-live="polite"></output>\n'
    "</div>"
)


def extended_chapter(text: str, chapters: list[str]) -> str | None:
    """The chapter a page of "Going further" extends: the first chapter of the explanation
    its first paragraph after the title links to.

    >>> extended_chapter("# Deep\\n\\nThis extends [chapter 7](why-scale.md#x).\\n", ["why-scale.md"])
    'why-scale.md'
    """
    body = re.split(r"^# .+$", text, maxsplit=1, flags=re.M)[-1].strip()
    first = body.split("\n\n", 1)[0]
    for target in re.findall(r"\]\(([a-z0-9-]+\.md)", first):
        if target in chapters:
            return target
    return None


def reading_groups(
    pages: list[str], chapters: list[str], extends: dict[str, str | None]
) -> list[tuple[str, list[str]]]:
    """The pages that make claims, grouped for "How we know": each chapter of the explanation
    in order with the pages of "Going further" that extend it, then every other page.

    >>> reading_groups(["b.md", "deep.md", "a.md", "x.md"], ["a.md", "b.md"], {"deep.md": "a.md"})
    [('a.md', ['a.md', 'deep.md']), ('b.md', ['b.md']), ('', ['x.md'])]
    """
    groups = []
    for chapter in chapters:
        members = [chapter] if chapter in pages else []
        members += [p for p in pages if extends.get(p) == chapter]
        if members:
            groups.append((chapter, members))
    grouped = {p for _, members in groups for p in members}
    rest = [p for p in pages if p not in grouped]
    return groups + ([("", rest)] if rest else [])


def how_we_know_markdown(
    claims: list[Claim],
    guards: list[Guard],
    titles: dict[str, str],
    order: list[str] | None = None,
    chapters: list[str] | None = None,
    extends: dict[str, str | None] | None = None,
    listing: str = PAGE,
    elsewhere: int = 0,
) -> str:
    """A page "How we know": a filter, then ``claims`` grouped by chapter, each chapter of the
    explanation (``chapters``, numbered) with the deep dives that extend it (``extends``).
    ``listing``: which of :data:`LISTINGS` this is (the explanation's and the other pages'
    claims, or one of the two pages of Going further's); ``elsewhere``: how many claims the
    other two list, for their links."""
    tests_by_claim: dict[str, list[str]] = {}
    for guard in guards:
        tests_by_claim.setdefault(guard.claim_id, []).append(guard.test)
    listed = {c.id for c in claims}
    guarding = {g.test for g in guards if g.claim_id in listed}
    later = f"chapters {FURTHER_SPLIT + 1} on and the rest"
    if listing == PAGE:
        title, description = (
            "How we know",
            "Every claim the site makes about code or numbers, with the test that checks it.",
        )
        scope = (
            "This page lists the claims of the explanation, chapter by chapter, and of the other "
            f"pages; the {elsewhere} of the pages of *Going further* are on their own two pages, "
            f"[chapters 1 to {FURTHER_SPLIT}]({FURTHER_PAGE}) and [{later}]({FURTHER_LATER_PAGE})."
        )
    else:
        first = listing == FURTHER_PAGE
        part = f"chapters 1 to {FURTHER_SPLIT}" if first else later
        other = (FURTHER_LATER_PAGE, later) if first else (FURTHER_PAGE, f"chapters 1 to {FURTHER_SPLIT}")
        title, description = (
            f"How we know: Going further, {part}",
            f"Every claim the deep dives of {part} make about code or numbers, with the test that checks it.",
        )
        scope = (
            f"This page lists the claims of the pages of *Going further* that extend {part}, "
            f"grouped by the chapter each page extends; the {elsewhere} others are on "
            f"[How we know]({PAGE}) (the explanation's) and [{other[1]}]({other[0]})."
        )
    lines = [
        "---",
        f'title: "{title}"',  # quoted: a colon in a title would end the YAML key
        f"description: {description}",
        "---",
        "",
        f"# {title}",
        "",
        "Every sentence on this site that states a fact about code or numbers is marked with a",
        "small tick ✓ and checked by a test that runs on every change. These pages are generated",
        "while the site builds, from the marks in the pages and the `@pytest.mark.claim` markers",
        "in `tests/`; a claim without a test stops the build. " + scope,
        "",
        f"**{len(claims)} claims** here, guarded by **{len(guarding)} tests**.",
        "",
        FILTER,
        "",
    ]
    by_page: dict[str, list[Claim]] = {}
    for claim in claims:
        by_page.setdefault(claim.page, []).append(claim)
    order = order or []
    chapters = chapters or []
    pages = sorted(by_page, key=lambda p: (order.index(p) if p in order else len(order), p))

    def table(page: str) -> list[str]:
        rows = ["| Claim | Guarded by |", "|---|---|"]
        for claim in by_page[page]:
            tests = "<br>".join(f"`{t}`" for t in tests_by_claim.get(claim.id, [])) or "**none**"
            sentence = claim.sentence.replace("|", "\\|") or claim.id
            rows.append(f'| <span id="{claim.id}"></span>[{sentence}]({page}#claim-{claim.id}) | {tests} |')
        return [*rows, ""]

    for chapter, members in reading_groups(pages, chapters, extends or {}):
        if chapter:
            number = chapters.index(chapter) + 1
            lines += [f"## {number}. {titles.get(chapter, chapter)}", ""]
        else:
            lines += ["## Elsewhere on the site", ""]
        for page in members:
            if page != chapter:
                kind = "Going further" if chapter else "Page"
                lines += [f"### {kind}: {titles.get(page, page)}", ""]
            lines += table(page)
    return "\n".join(lines)


# ---- MkDocs event handlers -------------------------------------------------------------


def listing_of(page: str, further: list[str], chapters: list[str], extends: dict[str, str | None]) -> str:
    """The page of :data:`LISTINGS` that lists ``page``'s claims: a deep dive's by the chapter
    it extends, the first :data:`FURTHER_SPLIT` chapters' on :data:`FURTHER_PAGE`.

    >>> chapters = [f"c{i}.md" for i in range(1, 10)]
    >>> extends = {"d1.md": "c1.md", "d9.md": "c9.md"}
    >>> for p in ("c1.md", "d1.md", "d9.md", "x.md"):
    ...     print(p, listing_of(p, ["d1.md", "d9.md", "x.md"], chapters, extends))
    c1.md how-we-know.md
    d1.md how-we-know-further.md
    d9.md how-we-know-further-later.md
    x.md how-we-know-further-later.md
    """
    if page not in further:
        return PAGE
    chapter = extends.get(page)
    early = chapter in chapters and chapters.index(chapter) < FURTHER_SPLIT
    return FURTHER_PAGE if early else FURTHER_LATER_PAGE


# each page of the nav -> the page of LISTINGS that lists its claims; set by on_files, which
# MkDocs runs before it renders any page
_LISTED: dict[str, str] = {}


def on_files(files, config):
    docs_dir = Path(config["docs_dir"])
    site = Site(config["nav"])
    claims = find_claims(docs_dir, site.chapters())
    guards = find_guards(Path(config.config_file_path).resolve().parent / "tests")
    for problem in problems(claims, guards):
        log.warning(problem)
    titles = {c.page: page_title(docs_dir / c.page) for c in claims}
    chapters, further = site.part(EXPLANATION), site.part(FURTHER)
    extends = {p: extended_chapter((docs_dir / p).read_text(encoding="utf-8"), chapters) for p in further}
    _LISTED.clear()  # a rebuild under `mkdocs serve` reads the pages again
    _LISTED.update({p: listing_of(p, further, chapters, extends) for p in site.pages()})
    where = {c.id: listing_of(c.page, further, chapters, extends) for c in claims}
    order = site.pages()
    for name in LISTINGS:
        mine = [c for c in claims if where[c.id] == name]
        page = how_we_know_markdown(
            mine, guards, titles, order, chapters, extends, listing=name, elsewhere=len(claims) - len(mine)
        )
        files.append(File.generated(config, name, content=page))
    return files


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri in LISTINGS:
        return markdown
    # A Markdown link (not raw HTML) so MkDocs resolves it and validates the anchor.
    depth = page.file.src_uri.count("/")
    listed = _LISTED.get(page.file.src_uri, PAGE)
    target = "../" * depth + listed

    def mark(match: re.Match) -> str:
        claim_id = match.group(1)
        return (
            f"[✓]({target}#{claim_id}){{: .claim-mark #claim-{claim_id} "
            f'title="Checked by a test: see How we know" }}'
        )

    return CLAIM_MARK.sub(mark, markdown)
