"""Every page has a title and a description of its own, and the 404 page leads somewhere.

Search engines and link previews show a page's ``<title>`` and ``<meta name="description">``.
A chapter without ``description:`` in its front matter silently gets the site's default, so
the test names each page that still uses it (only the home page may).
"""

from __future__ import annotations

import re

from bs4 import BeautifulSoup
from qkv_site.site import front_matter as read_front_matter
from support import PUBLISHED_PATH, ROOT, html_pages, mkdocs_config, nav_paths


def front_matter(built: str) -> dict:
    """The front matter of the Markdown page built into ``built`` ("kv-cache/index.html")."""
    source = ROOT / "docs" / ("index.md" if built == "index.html" else built.replace("/index.html", ".md"))
    if not source.is_file():
        return {}  # a generated page, or the notebook's
    return read_front_matter(source.read_text(encoding="utf-8"))[0]


def test_every_page_has_a_title_and_its_own_description(built_site):
    default = mkdocs_config()["site_description"]
    problems, titles = [], {}
    for path in html_pages(built_site):
        name = path.relative_to(built_site).as_posix()
        soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
        title = soup.title.get_text().strip() if soup.title else ""
        descriptions = [m.get("content", "") for m in soup.select('meta[name="description"]')]
        if not title:
            problems.append(f"{name}: no <title>")
        else:
            titles.setdefault(title, []).append(name)
        if len(descriptions) != 1 or not descriptions[0].strip():
            problems.append(f"{name}: {len(descriptions)} description meta tags")
        elif name != "index.html" and descriptions[0] == default:
            problems.append(f"{name}: the site's default description; add description: to its front matter")
        elif (written := front_matter(name).get("description")) and descriptions[0] != written:
            # Material writes the description into the attribute as it is: unescaped, a double
            # quote in it (chapter 15 has one) would end the attribute early and turn the rest
            # of the sentence into attributes (hooks/page_meta.py escapes it)
            problems.append(
                f"{name}: the page shows the description {descriptions[0]!r}, "
                f"not its front matter's {written!r}"
            )
    problems += [f"title {t!r} is used by {', '.join(p)}" for t, p in titles.items() if len(p) > 1]
    assert problems == []


def test_404_page_has_the_site_style_and_links_home_and_to_every_page(built_site):
    """The 404 page is served for any missing address, so its links are absolute: below the
    path the site is published at (the run's build is addressed as published)."""
    soup = BeautifulSoup((built_site / "404.html").read_text(encoding="utf-8"), "html.parser")
    assert "Page not found" in soup.get_text()
    styles = [link["href"] for link in soup.select('link[rel="stylesheet"]')]
    assert any(
        re.fullmatch(rf"{PUBLISHED_PATH}assets/stylesheets/main\.[0-9a-f]+\.min\.css", h) for h in styles
    ), styles
    links = [a["href"] for a in soup.select(".md-content a[href]")]  # its own, not the nav's
    assert PUBLISHED_PATH in links
    expected = [PUBLISHED_PATH + path for path in nav_paths()]
    assert [url for url in expected if url not in links] == []
    inside = [url.removeprefix(PUBLISHED_PATH) for url in links if url.startswith("/")]
    assert len(inside) == len([url for url in links if url.startswith("/")]), (
        "a link leaves the published path"
    )
    broken = [
        url
        for url in inside
        if not (built_site / url / "index.html").is_file() and not (built_site / url).is_file()
    ]
    assert broken == []
