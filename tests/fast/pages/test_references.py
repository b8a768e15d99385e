"""The References page (docs/references.md): its entries are in order, named by author and
year, and each is cited by some page.

The other direction, that every ``references.md#id`` link names an entry, is the strict
build's: MkDocs' anchor validation (``validation: anchors: warn`` in mkdocs.yml, fatal under
``strict``) collects every ``id`` of the rendered page after attr_list has set the entries'
``{ #id }``, so a link to a missing entry stops ``./dev build``. It is not repeated here.
"""

from __future__ import annotations

import re
import unicodedata

from support import ROOT

DOCS = ROOT / "docs"
ENTRY_ID = re.compile(r"\n\{ #([a-z0-9-]+) \}\Z")
COMMENT = re.compile(r"<!--.*?-->", re.S)


def entries() -> list[tuple[str, str]]:
    """(id, text) of every entry: a paragraph that ends with ``{ #id }`` on a line of its own."""
    text = COMMENT.sub("", (DOCS / "references.md").read_text(encoding="utf-8"))
    found = []
    for paragraph in re.split(r"\n\s*\n", text):
        m = ENTRY_ID.search(paragraph.strip())
        if m:
            found.append((m.group(1), paragraph.strip()))
    return found


def expected_id(entry: str) -> str:
    """firstauthor-year, from the entry's own text: "Vaswani, A., ... (2017)" gives
    vaswani-2017, "Gemma Team (2024b)" gemmateam-2024b (accents dropped)."""
    author = re.split(r"[,(]", entry, maxsplit=1)[0]
    ascii_author = unicodedata.normalize("NFKD", author).encode("ascii", "ignore").decode()
    year = re.search(r"\((\d{4}[a-z]?)\)", entry).group(1)  # 2024a, 2024b: one author, one year
    return re.sub(r"[^a-z]", "", ascii_author.lower()) + "-" + year


def test_the_page_has_entries_and_each_is_named_by_its_first_author_and_year():
    found = entries()
    assert len(found) >= 2
    wrong = [(i, expected_id(text)) for i, text in found if i != expected_id(text)]
    assert not wrong, f"entries whose id is not firstauthor-year: {wrong}"
    ids = [i for i, _ in found]
    assert len(ids) == len(set(ids)), "two entries share an id"


def test_entries_are_in_alphabetical_order_of_author_then_year():
    keys = [(expected_id(text).rsplit("-", 1)[0], text) for _, text in entries()]
    assert keys == sorted(keys), "docs/references.md: entries out of alphabetical order"


def citations() -> dict[str, set[str]]:
    """Every page's links to an entry: {entry id: {pages}}, HTML comments left out."""
    cited: dict[str, set[str]] = {}
    for page in sorted(DOCS.rglob("*.md")):
        if page.name == "references.md":
            continue
        text = COMMENT.sub("", page.read_text(encoding="utf-8"))
        for ref in re.findall(r"\]\((?:\.\./)*references\.md#([a-z0-9-]+)\)", text):
            cited.setdefault(ref, set()).add(page.name)
    return cited


def test_every_entry_is_cited_by_a_page():
    uncited = [i for i, _ in entries() if i not in citations()]
    assert uncited == [], (
        f"docs/references.md lists {uncited}, and no page links to references.md#<id>: "
        "cite each where its result is used, or remove it"
    )


def test_an_entry_that_says_where_it_is_used_names_a_page_that_cites_it():
    cited = citations()
    # (entry, the page it says uses it): "Used on [the ... page](file.md)", "Used in [chapter {n}](file.md)"
    said = []
    for i, text in entries():
        said += [(i, page) for page in re.findall(r"\bUsed (?:on|in) \[[^\]]+\]\(([a-z0-9-]+\.md)\)", text)]
    assert said, "no entry says where it is used: the test has nothing to check"
    wrong = [(i, page, sorted(cited.get(i, ()))) for i, page in said if page not in cited.get(i, ())]
    assert not wrong, f"entries that name a page that does not cite them (id, page, citing pages): {wrong}"
