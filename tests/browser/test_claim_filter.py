"""The filter of "How we know" keeps the claims that mention what the reader types."""

from __future__ import annotations

from qkv_site import claims
from support import ROOT, nav_section


def test_typing_keeps_only_the_claims_that_mention_every_word(page, site_url):
    page.goto(site_url + "how-we-know/")
    field = page.locator("#claim-filter-input")
    further = {path for _, path in nav_section("Going further")}  # listed on the other page
    total = len([c for c in claims.find_claims(ROOT / "docs") if c.page not in further])
    count = page.locator("#claim-filter-count")
    assert count.inner_text() == f"{total} of {total} claims shown"

    field.fill("softmax weights")  # two words, each in some rows: rows must hold both
    rows = page.locator("article table tbody tr")
    texts = [rows.nth(i).inner_text().lower() for i in range(rows.count())]
    expected = [t for t in texts if "softmax" in t and "weights" in t]
    visible = page.locator("article table tbody tr:not([hidden])")
    assert visible.count() == len(expected) > 0
    assert count.inner_text() == f"{len(expected)} of {total} claims shown"
    assert all("softmax" in t.lower() and "weights" in t.lower() for t in visible.all_inner_texts())

    field.fill("no claim says this zqxj")
    assert visible.count() == 0
    assert page.locator("article h2:not([hidden])").count() == 0
    field.fill("")
    assert visible.count() == total
