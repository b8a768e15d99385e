"""Accessibility of every built page, checked in headless Chromium.

- axe-core (WCAG 2.1 A and AA rules plus best practice) finds no violation on any page, in
  the light and the dark scheme, at a desktop (1280 px) and a phone (390 px) width (the
  colour rules judge one element per distinct look, and at the phone width what changed:
  tests/axe_views.py; two tests below show a changed colour is still found);
- at 320 px wide (WCAG 1.4.10 reflow) no page scrolls sideways as a whole.

axe-core is the copy bundled in the ``axe-playwright-python`` package (pinned), injected into
every page before the page's own scripts run, so the test needs no network (tests/axe_views.py).
One browser page is reused for all of a module's pages: each page is loaded once and audited
in its four views.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from axe_views import AXE_JS, WIDTHS, audit_views, settle
from support import html_pages, nav_paths

pytestmark = pytest.mark.browser

REFLOW_WIDTH = 320  # CSS px: WCAG 2.1 success criterion 1.4.10
PATHS = [*nav_paths(), "404.html"]  # every page of mkdocs.yml's nav, and the 404 page


def test_every_built_page_is_audited(built_site: Path):
    """The audit's page list is the site's: a new page cannot slip past it."""
    built = {p.relative_to(built_site).as_posix() for p in html_pages(built_site)}
    listed = {
        (path or "") + "index.html" if not path.endswith(".html") else path
        for path in PATHS
        if path != "404.html"
    }
    assert listed == built


@pytest.fixture(scope="module")
def reused_page(browser, site_url):
    """One page for the whole module, with axe-core injected into every document it loads.

    The reader asks for reduced motion, so colours switch at once when the scheme changes
    (axe would otherwise read a colour halfway through Material's fade)."""
    context = browser.new_context(viewport={"width": WIDTHS[0], "height": 900}, reduced_motion="reduce")
    context.add_init_script(path=str(AXE_JS))
    page = context.new_page()
    yield page
    context.close()


def open_page(page, site_url: str, path: str) -> None:
    page.set_viewport_size({"width": WIDTHS[0], "height": 900})
    page.goto(site_url + path)
    if path == "explorer/":
        page.wait_for_selector("#qkv-explorer.qx-ready")
    settle(page)


def audit(page, site_url: str, path: str) -> list[tuple[str, str, str, str]]:
    """(view, rule, element, html) for every node axe flags on ``path`` in each view."""
    open_page(page, site_url, path)
    return audit_views(page)


@pytest.mark.parametrize("path", PATHS, ids=[p or "index" for p in PATHS])
def test_no_axe_violations(reused_page, site_url, path):
    found = audit(reused_page, site_url, path)
    if found:
        counts: dict[str, int] = {}
        for _, rule, _, _ in found:
            counts[rule] = counts.get(rule, 0) + 1
        summary = ", ".join(f"{rule}: {n}" for rule, n in sorted(counts.items()))
        lines = [f"  [{view}] {rule}: {target}\n      {html}" for view, rule, target, html in found[:40]]
        more = f"\n  ... and {len(found) - 40} more" if len(found) > 40 else ""
        pytest.fail(
            f"page /{path}: {len(found)} axe violations ({summary}):\n" + "\n".join(lines) + more,
            pytrace=False,
        )


def test_a_colour_set_for_phones_only_is_audited_at_the_phone_width(reused_page, site_url):
    """The phone views judge colour only where the look differs from the desktop's: text
    that a style greys at phone width only must still be found there."""
    open_page(reused_page, site_url, "soft-lookup/")
    # through the style sheet's API: the page's policy refuses a new inline <style>
    reused_page.evaluate(
        "rule => document.styleSheets[0].insertRule(rule, document.styleSheets[0].cssRules.length)",
        "@media (max-width: 600px) { .md-typeset p { color: #ccc; } }",
    )
    contrast = {view for view, rule, _, _ in audit_views(reused_page) if rule == "color-contrast"}
    assert contrast == {"default 390px"}  # pale grey on white; on the dark scheme it passes


def test_one_pale_element_among_many_like_it_is_found(reused_page, site_url):
    """The colour rules judge one element per look: an element that looks different from
    its siblings (the last paragraph, pale grey) is judged on its own."""
    open_page(reused_page, site_url, "soft-lookup/")
    reused_page.evaluate(
        "rule => document.styleSheets[0].insertRule(rule, document.styleSheets[0].cssRules.length)",
        ".md-typeset p:last-of-type { color: #ccc; }",
    )
    pale = {view for view, rule, _, _ in audit_views(reused_page) if rule == "color-contrast"}
    # on the dark scheme pale grey passes; at the phone width it looks as on the desktop,
    # where it was found
    assert pale == {"default 1280px"}


@pytest.mark.parametrize("path", PATHS, ids=[p or "index" for p in PATHS])
def test_no_sideways_scroll_at_320px(reused_page, site_url, path):
    """WCAG reflow: wide content scrolls inside its own box, never the whole page."""
    open_page(reused_page, site_url, path)
    reused_page.set_viewport_size({"width": REFLOW_WIDTH, "height": 640})
    settle(reused_page)
    widths = reused_page.evaluate("""() => {
        const root = document.documentElement;
        // What sticks out: past the right edge, and not clipped by a box that scrolls.
        const clipped = e => {
          for (let a = e.parentElement; a && a !== document.body; a = a.parentElement) {
            if (getComputedStyle(a).overflowX !== 'visible') return true;
          }
          return false;
        };
        const wide = [...document.querySelectorAll('body *')]
          .filter(e => e.getBoundingClientRect().right > root.clientWidth + 1
                       && getComputedStyle(e).position !== 'fixed' && !clipped(e))
          .slice(0, 5).map(e => e.tagName.toLowerCase() + (e.className ? '.' +
                           String(e.className).trim().split(/\\s+/).join('.') : ''));
        return {scroll: root.scrollWidth, client: root.clientWidth, wide};
    }""")
    assert widths["scroll"] <= widths["client"], (
        f"page /{path} scrolls sideways at {REFLOW_WIDTH} px: {widths['scroll']} px of content "
        f"in {widths['client']} px; sticking out: {widths['wide']}"
    )


def test_reduced_motion_turns_off_fades_and_smooth_scrolling(browser, site_url):
    """With prefers-reduced-motion, nothing on a page animates for longer than a blink."""
    durations = {}
    for motion in ("no-preference", "reduce"):
        context = browser.new_context(reduced_motion=motion)
        page = context.new_page()
        page.goto(site_url + "why-scale/")
        durations[motion] = page.evaluate("""() => {
            const seconds = v => Math.max(...v.split(',').map(s => parseFloat(s) *
                                          (s.trim().endsWith('ms') ? 0.001 : 1)));
            const all = [...document.querySelectorAll('body *')].map(getComputedStyle);
            return {transition: Math.max(...all.map(s => seconds(s.transitionDuration))),
                    animation: Math.max(...all.map(s => seconds(s.animationDuration))),
                    smooth: getComputedStyle(document.documentElement).scrollBehavior};
        }""")
        context.close()
    assert durations["no-preference"]["transition"] > 0.05  # Material does fade by default
    assert durations["reduce"]["transition"] <= 0.001
    assert durations["reduce"]["animation"] <= 0.001
    assert durations["reduce"]["smooth"] == "auto"


FOCUS_PAGES = ("soft-lookup/", "explorer/")


@pytest.mark.parametrize("width", (640, 1280))  # 640: a 1280 px screen at 200 % zoom
@pytest.mark.parametrize("path", FOCUS_PAGES)
def test_tab_reaches_only_visible_controls_each_with_a_focus_ring(reused_page, site_url, path, width):
    """Walking a page with Tab: every stop is on screen (no hidden drawer links) and drawn
    with a visible outline."""
    page = reused_page
    open_page(page, site_url, path)
    page.set_viewport_size({"width": width, "height": 700})
    settle(page)
    problems, seen = [], 0
    for _ in range(40):
        page.keyboard.press("Tab")
        stop = page.evaluate("""() => {
            let e = document.activeElement;
            if (!e || e === document.body) return null;
            // Material's palette switch is a zero-size input; the label after it draws it
            // and takes its focus ring (.md-option.focus-visible + label): judge that label.
            if (e.classList.contains('md-option') && e.nextElementSibling?.tagName === 'LABEL') {
                e = e.nextElementSibling;
            }
            const r = e.getBoundingClientRect(), s = getComputedStyle(e);
            const html = document.documentElement;
            return {what: e.outerHTML.slice(0, 100),
                    visible: e.checkVisibility({visibilityProperty: true, opacityProperty: true})
                             && r.width > 0 && r.height > 0 && r.right > 0 && r.bottom > 0
                             && r.left < html.clientWidth && r.top < html.clientHeight,
                    ring: (s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 1)
                          || s.boxShadow !== 'none'};
        }""")
        if stop is None:
            continue
        seen += 1
        if not (stop["visible"] and stop["ring"]):
            problems.append(stop)
    assert seen >= 10, f"Tab reached only {seen} controls on /{path}"
    assert problems == [], f"/{path} at {width} px: focus stops hidden or without a ring: {problems}"
