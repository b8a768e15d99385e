"""The generated page "How we know" lists every claim with the tests that guard it."""

from __future__ import annotations

from qkv_site import claims
from support import ROOT


def test_how_we_know_page_lists_each_claim_with_its_test(built_site):
    page = (built_site / "how-we-know" / "index.html").read_text(encoding="utf-8")
    for claim in claims.find_claims(ROOT / "docs"):
        assert f'id="{claim.id}"' in page
        assert f"#claim-{claim.id}" in page
    for guard in claims.find_guards(ROOT / "tests"):
        assert guard.test in page


def test_the_claims_are_grouped_by_chapter_with_the_deep_dives_under_theirs(built_site):
    from bs4 import BeautifulSoup
    from support import nav_section

    soup = BeautifulSoup(
        (built_site / "how-we-know" / "index.html").read_text(encoding="utf-8"), "html.parser"
    )
    chapters = [label for label, _ in nav_section("The explanation")]
    h2s = [h.get_text(" ", strip=True).rstrip("¶").strip() for h in soup.select("article h2")]
    numbered = [h for h in h2s if h[:1].isdigit()]
    assert numbered == [c for c in chapters if c in numbered], "chapters out of reading order"
    assert len(numbered) >= len(chapters) - 1  # the recap may make no claim; the others do
    # each deep dive sits under the chapter its first paragraph names
    further = [path for _, path in nav_section("Going further")]
    found = {}
    for h3 in soup.select("article h3"):
        chapter = h3.find_previous("h2").get_text(" ", strip=True).rstrip("¶").strip()
        found[h3.get_text(" ", strip=True).rstrip("¶").strip().removeprefix("Going further: ")] = chapter
    for path in further:
        text = (ROOT / "docs" / path).read_text(encoding="utf-8")
        if "<!-- claim:" not in text:
            continue
        extended = claims.extended_chapter(text, [p for _, p in nav_section("The explanation")])
        title = claims.page_title(ROOT / "docs" / path)
        expected = next(lbl for lbl, p in nav_section("The explanation") if p == extended)
        assert found.get(title) == expected, f"{path} is not under {expected}"
    assert soup.select_one("#claim-filter-input") is not None
