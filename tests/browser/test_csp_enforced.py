"""Chromium enforces the site's Content-Security-Policy, and nothing the site does breaks it.

- Every page (and the 404 page) opens with its policy and without one violation, with no
  request leaving 127.0.0.1 and no console error (one walk over the site checks all three);
  the explorer, the search and instant navigation to the notebook's page run without one
  violation.
- A script injected into a page from another origin (a CDN's address, answered by the test
  itself: nothing leaves the machine) and an injected inline script are blocked, and
  reported as violations; the same injection into the same page served without its policy
  runs, so the test can tell.
"""

from __future__ import annotations

import functools
import re

from support import html_pages, watch_offline_and_quiet

# Collect every violation the page's documents report, from their first script on.
RECORD = """
window.__violations = [];
document.addEventListener('securitypolicyviolation', e => window.__violations.push(
  `${e.violatedDirective} blocked ${e.blockedURI || 'inline'} in ${location.pathname}`));
"""
INJECT = """
url => new Promise(done => {
  const remote = document.createElement('script');
  remote.src = url;
  remote.onload = remote.onerror = () => {
    const inline = document.createElement('script');
    inline.textContent = 'window.__inline = true';
    document.body.append(inline);
    setTimeout(done, 100);
  };
  document.body.append(remote);
})
"""


INJECTED = "https://cdn.example.org/injected.js"  # answered by the test, never by a network


def serve_injected_script(page) -> None:
    page.route(
        INJECTED,
        lambda route: route.fulfill(content_type="text/javascript", body="window.__injected = true;"),
    )


def violations(page) -> list[str]:
    return page.evaluate("window.__violations")


def test_every_page_opens_offline_under_its_policy(page, site_url, built_site):
    """One walk over every page checks what a page load can break: its policy is there and
    nothing violates it, no request leaves 127.0.0.1, and no script logs an error."""
    page.add_init_script(RECORD)
    outside, errors = watch_offline_and_quiet(page)
    found = []
    paths = [p.relative_to(built_site).as_posix() for p in html_pages(built_site)]
    for path in [*paths, "404.html"]:
        page.goto(site_url + path, wait_until="networkidle")
        assert page.title(), path
        assert page.locator('meta[http-equiv="Content-Security-Policy"]').count() == 1, path
        found += violations(page)
    assert found == []
    assert outside == [], f"requests left 127.0.0.1: {outside[:10]}"
    assert errors == []


def test_the_explorer_search_and_instant_navigation_run_under_the_policy(page, site_url):
    page.add_init_script(RECORD)
    page.goto(site_url + "explorer/", wait_until="networkidle")
    page.wait_for_selector("#qkv-explorer.qx-ready")
    page.get_by_test_id("dk").fill("48")  # the explorer draws from its data
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("/")  # Material's search: its worker answers a query
    page.keyboard.type("softmax")
    page.wait_for_selector(".md-search-result__item")
    page.keyboard.press("Escape")
    found = violations(page)
    # instant navigation: the notebook page's own scripts run in this document
    page.locator('a[href$="notebook/"]').first.click()
    page.wait_for_url(re.compile(r"notebook/$"))
    page.wait_for_selector(".jp-Notebook")
    assert page.evaluate("window.__violations") == found == []


@functools.cache
def _no_policy(html: str) -> str:
    return re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html, count=1)


def test_a_script_from_another_origin_and_an_inline_one_are_blocked(page, site_url):
    page.add_init_script(RECORD)
    serve_injected_script(page)
    page.goto(site_url + "soft-lookup/", wait_until="networkidle")
    page.evaluate(INJECT, INJECTED)
    assert page.evaluate("[window.__injected, window.__inline]") == [None, None]
    blocked = violations(page)
    assert any(v.startswith("script-src") and "injected.js" in v for v in blocked), blocked
    assert any(v.startswith("script-src") and "inline" in v for v in blocked), blocked


def test_without_the_policy_the_same_injection_runs(page, site_url):
    """The control: the page served with its meta element removed runs both scripts."""
    serve_injected_script(page)
    page.route(
        site_url + "soft-lookup/",
        lambda route: route.fulfill(response=(response := route.fetch()), body=_no_policy(response.text())),
    )
    page.goto(site_url + "soft-lookup/", wait_until="networkidle")
    page.evaluate(INJECT, INJECTED)
    assert page.evaluate("[window.__injected, window.__inline]") == [True, True]
