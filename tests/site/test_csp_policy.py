"""Every built page carries the site's Content-Security-Policy, first in its head, and the
policy allows each inline script and style of the site by its hash and nothing inline else.

The hashes are computed here from the built pages with BeautifulSoup and hashlib, not by
the plugin's code (sitebuild/qkv_site/artifacts/csp.py); tests/browser/test_csp_enforced.py shows
Chromium enforcing the policy.
"""

from __future__ import annotations

import base64
import hashlib

from bs4 import BeautifulSoup
from support import html_pages

EXECUTED = {None, "", "text/javascript", "application/javascript", "module"}


def pages(site):
    for path in [*html_pages(site), site / "404.html"]:
        yield path, BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")


def source(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def policy_of(soup) -> dict[str, list[str]]:
    first = soup.head.find(True)  # the head's first element
    assert first.name == "meta" and first.get("http-equiv") == "Content-Security-Policy", first
    directives = [d.split() for d in first["content"].split(";")]
    return {name: values for name, *values in directives}


def test_every_page_has_the_one_site_policy_first_in_its_head(built_site):
    policies = {path.relative_to(built_site).as_posix(): policy_of(soup) for path, soup in pages(built_site)}
    assert len({str(p) for p in policies.values()}) == 1, "pages carry different policies"
    policy = next(iter(policies.values()))
    assert policy["default-src"] == ["'self'"]
    assert policy["img-src"] == ["'self'", "data:"]
    assert policy["object-src"] == ["'none'"]
    for directive in ("script-src", "style-src"):
        assert policy[directive][0] == "'self'"
        assert all(v.startswith("'sha256-") for v in policy[directive][1:]), policy[directive]
    assert "'unsafe-inline'" not in str(policy) and "'unsafe-eval'" not in str(policy)


def test_the_policy_lists_every_inline_script_and_style_of_the_site_and_no_other(built_site):
    scripts, styles, policy = set(), set(), None
    for _, soup in pages(built_site):
        policy = policy_of(soup)
        scripts |= {
            source(s.string or "")
            for s in soup.find_all("script")
            if not s.has_attr("src") and s.get("type") in EXECUTED
        }
        styles |= {source(s.string or "") for s in soup.find_all("style")}
        assert not soup.find_all(style=True), "a style attribute: the policy would block it"
    assert scripts and set(policy["script-src"][1:]) == scripts
    assert set(policy["style-src"][1:]) == styles
