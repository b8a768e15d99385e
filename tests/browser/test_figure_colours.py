"""A figure sits on the page as if Material drew it: in each colour scheme a reader can pick,
the figure style's background is the page's, and its primary colour is the colour of the
page's links.

Read from the pages as Chromium renders them (Material's palette plus the site's own CSS),
not from the theme's stylesheets.
"""

from __future__ import annotations

import pytest
from qkv_site.figures.style import STYLES


def rgb(hex_colour: str) -> str:
    """'#4051b5' as a browser reports a computed colour: 'rgb(64, 81, 181)'."""
    r, g, b = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


@pytest.mark.parametrize(("preference", "style"), [("light", "light"), ("dark", "dark")])
def test_figure_background_is_the_pages_in_each_scheme(page, site_url, preference, style):
    page.emulate_media(color_scheme=preference)  # a first visit follows the reader's system
    page.goto(site_url + "why-scale/")
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == rgb(STYLES[style].background), preference


@pytest.mark.parametrize(("preference", "style"), [("light", "light"), ("dark", "dark")])
def test_figure_primary_is_the_pages_link_colour(page, site_url, preference, style):
    page.emulate_media(color_scheme=preference)
    page.goto(site_url + "why-scale/")
    # a plain link, as a chapter writes one, added to the article: the colour prose links get
    link = page.evaluate(
        """() => {
            const a = Object.assign(document.createElement("a"), { href: "#here", textContent: "a link" });
            document.querySelector(".md-content .md-typeset").append(a);
            return getComputedStyle(a).color;
        }"""
    )
    assert link == rgb(STYLES[style].primary), preference
