"""The maths font is the site's own: formulas get their width offline.

(That every page loads offline, with nothing leaving 127.0.0.1 and no console error, is
checked in the one walk over every page: tests/browser/test_csp_enforced.py.)"""

from __future__ import annotations


def test_maths_font_loads_and_formula_has_width(page, site_url):
    page.goto(site_url, wait_until="networkidle")
    width = page.evaluate("document.querySelector('math').getBoundingClientRect().width")
    assert width > 50
    assert page.evaluate("document.fonts.check('16px \"Noto Sans Math\"')")
