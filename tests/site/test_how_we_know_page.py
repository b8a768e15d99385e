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
