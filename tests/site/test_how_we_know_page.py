"""The generated pages "How we know" list every claim with the tests that guard it: the
explanation's and the other pages' on one, the claims of Going further on two more (split by
chapter, to keep each page light), each grouped by chapter, and each claim's tick links to the
page that lists it."""

from __future__ import annotations

from bs4 import BeautifulSoup
from qkv_site import claims
from qkv_site.site import page_title
from support import ROOT, nav_section

CHAPTERS = [path for _, path in nav_section("The explanation")]
FURTHER = [path for _, path in nav_section("Going further")]


def listing(built_site, name: str) -> str:
    return (built_site / name / "index.html").read_text(encoding="utf-8")


def heading_text(tag) -> str:
    return tag.get_text(" ", strip=True).rstrip("¶").strip()


def test_each_claim_is_listed_with_its_tests_on_the_page_its_tick_links_to(built_site):
    names = [name.removesuffix(".md") for name in claims.LISTINGS]
    pages = {name: listing(built_site, name) for name in names}
    tests_of = {}
    for guard in claims.find_guards(ROOT / "tests"):
        tests_of.setdefault(guard.claim_id, []).append(guard.test)
    for claim in claims.find_claims(ROOT / "docs"):
        # a deep dive's claims by the chapter it extends: chapters 1 to FURTHER_SPLIT on one
        # page of Going further, the later ones (and deep dives that extend none) on the other
        if claim.page in FURTHER:
            text = (ROOT / "docs" / claim.page).read_text(encoding="utf-8")
            extended = claims.extended_chapter(text, CHAPTERS)
            early = extended in CHAPTERS and CHAPTERS.index(extended) < claims.FURTHER_SPLIT
            home = "how-we-know-further" if early else "how-we-know-further-later"
        else:
            home = "how-we-know"
        others = [name for name in names if name != home]
        assert f'id="{claim.id}"' in pages[home], claim.id
        assert not any(f'id="{claim.id}"' in pages[other] for other in others), claim.id
        assert f"#claim-{claim.id}" in pages[home]
        assert all(test in pages[home] for test in tests_of[claim.id]), claim.id
        # the tick on the claim's own page leads to that listing
        built = "" if claim.page == "index.md" else claim.page.removesuffix(".md")
        source = (built_site / built / "index.html").read_text(encoding="utf-8")
        up = "" if claim.page == "index.md" else "../"
        assert f'href="{up}{home}/#{claim.id}"' in source, (claim.page, claim.id)


def test_the_claims_are_grouped_by_chapter_with_the_deep_dives_under_theirs(built_site):
    labels = [label for label, _ in nav_section("The explanation")]
    main = BeautifulSoup(listing(built_site, "how-we-know"), "html.parser")
    numbered = [h for h in map(heading_text, main.select("article h2")) if h[:1].isdigit()]
    assert numbered == [c for c in labels if c in numbered], "chapters out of reading order"
    assert len(numbered) >= len(labels) - 1  # the recap may make no claim; the others do
    assert main.select_one("#claim-filter-input") is not None
    # each deep dive sits under the chapter its first paragraph names
    found = {}
    for name in ("how-we-know-further", "how-we-know-further-later"):
        deep = BeautifulSoup(listing(built_site, name), "html.parser")
        assert deep.select_one("#claim-filter-input") is not None
        for h3 in deep.select("article h3"):
            found[heading_text(h3).removeprefix("Going further: ")] = heading_text(h3.find_previous("h2"))
    for path in FURTHER:
        text = (ROOT / "docs" / path).read_text(encoding="utf-8")
        if "<!-- claim:" not in text:
            continue
        extended = claims.extended_chapter(text, CHAPTERS)
        expected = labels[CHAPTERS.index(extended)]
        assert found.get(page_title(ROOT / "docs" / path)) == expected, f"{path} is not under {expected}"
