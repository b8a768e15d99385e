"""Every claim a chapter marks has a test that guards it, and the generated page lists them."""

from __future__ import annotations

import subprocess
import sys

from qkv_site import claims
from qkv_site.site import Site
from support import HANG, ROOT


def test_every_marked_claim_has_a_guard_and_every_guard_a_claim():
    found = claims.find_claims(ROOT / "docs")
    guards = claims.find_guards(ROOT / "tests")
    assert found, "no claim is marked in docs/"
    assert claims.problems(found, guards) == []
    print(f"{len(found)} claims guarded by {len({g.test for g in guards})} tests")


def test_a_claim_without_a_guard_is_reported(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "docs" / "a.md").write_text(
        "Weights sum to 1. <!-- claim: sums -->\nMasks give zeros. <!-- claim: zeros -->\n"
    )
    (tmp_path / "tests" / "test_a.py").write_text(
        "import pytest\n\n@pytest.mark.claim('sums')\ndef test_sums():\n    assert 1\n\n"
        "@pytest.mark.claim('ghost')\ndef test_ghost():\n    assert 1\n"
    )
    found = claims.find_claims(tmp_path / "docs")
    assert [c.sentence for c in found] == ["Weights sum to 1.", "Masks give zeros."]
    report = claims.problems(found, claims.find_guards(tmp_path / "tests"))
    assert any("'zeros'" in line and "no test" in line for line in report)
    assert any("test_ghost" in line and "no page" in line for line in report)
    assert not any("'sums'" in line for line in report)


def test_guards_point_at_real_collected_tests(collected_ids):
    """A guard names a pytest node id; pytest must be able to find that test.

    The ids this run collected answer that when the run collected every file a guard names
    (./dev check and ./dev test do); otherwise pytest collects those files once more."""
    guards = claims.find_guards(ROOT / "tests")
    ids = sorted({g.test for g in guards})
    files = {i.split("::")[0] for i in ids}
    if files <= {i.split("::")[0] for i in collected_ids}:
        collected = "\n".join(collected_ids)
    else:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist", *ids],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=HANG,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        collected = done.stdout
    # a parametrized test's id is collected with its parameters: "test_x[...]"
    names = {line.split("[")[0] for line in collected.splitlines()}
    missing = [i for i in ids if i not in names]
    assert missing == []


def test_how_we_know_follows_the_reading_order_with_each_deep_dive_under_its_chapter():
    nav = [{"Home": "index.md"}, {"Part": [{"B": "b.md"}, {"A": "a.md"}]}, {"More": [{"D": "deep.md"}]}]
    assert Site(nav).pages() == ["index.md", "b.md", "a.md", "deep.md"]
    found = [
        claims.Claim("w", "deep.md", "Deep fact."),
        claims.Claim("x", "a.md", "A fact."),
        claims.Claim("y", "b.md", "B fact."),
        claims.Claim("z", "index.md", "Home fact."),
    ]
    titles = {"a.md": "A", "b.md": "B", "deep.md": "Deep", "index.md": "Home"}
    page = claims.how_we_know_markdown(
        found, [], titles, Site(nav).pages(), ["b.md", "a.md"], {"deep.md": "b.md"}
    )
    # chapters numbered in reading order; the deep dive under the chapter it extends; the rest last
    order = [
        page.index(h)
        for h in ("## 1. B", "### Going further: Deep", "## 2. A", "## Elsewhere", "### Page: Home")
    ]
    assert order == sorted(order)
    assert page.index("[Deep fact.](deep.md#claim-w)") < page.index("## 2. A")
    assert 'id="claim-filter-input"' in page


def test_a_quoted_sentence_drops_a_links_attribute_list_with_the_link():
    # attr_list would otherwise pin the attributes on the maths span before it, and the
    # maths hook (which matches arithmatex's bare span) would leave the LaTeX unrendered
    quoted = claims._last_sentence(
        'Try *drank* with [$d_k = 1$](explorer.md?dk=1){ aria-label="Open it" }: same order.'
    )
    assert quoted == "Try drank with $d_k = 1$: same order."


def test_a_claim_first_in_a_fold_is_quoted_without_the_folds_opening_line(tmp_path):
    fold = '??? info "Padded queries"\n    Padded keys get 0. <!-- claim: a -->\n'
    page = fold + "\n!!! note\n    B. <!-- claim: b -->\n"
    (tmp_path / "p.md").write_text(page, encoding="utf-8")
    assert [c.sentence for c in claims.find_claims(tmp_path, [])] == ["Padded keys get 0.", "B."]
