"""The built site: strict build passes, every page loads offline, nothing leaves 127.0.0.1."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urlparse

from bs4 import BeautifulSoup
from support import PUBLISHED_URL, ROOT, html_pages, nav_paths


class _AssetRefs(HTMLParser):
    """Collect every URL the browser would fetch on its own: src, srcset, and <link href>."""

    def __init__(self):
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for name in ("src", "data-src", "poster"):
            if attrs.get(name):
                self.urls.append(attrs[name])
        if attrs.get("srcset"):
            self.urls += [part.split()[0] for part in attrs["srcset"].split(",") if part.strip()]
        # rel=canonical names the page's own published address, which no browser fetches
        if tag == "link" and attrs.get("href") and attrs.get("rel") != "canonical":
            self.urls.append(attrs["href"])


def test_every_page_built(built_site):
    built = {p.relative_to(built_site).as_posix() for p in html_pages(built_site)}
    assert built == {f"{path}index.html" for path in nav_paths()}  # the nav's pages, no more
    assert "how-we-know/index.html" in built


def test_no_page_references_an_external_asset(built_site):
    offenders = []
    for path in [*html_pages(built_site), *built_site.rglob("*.css")]:
        text = path.read_text(encoding="utf-8", errors="replace")
        if path.suffix == ".css":
            urls = re.findall(r"url\(\s*['\"]?([^'\")]+)", text)
            urls += re.findall(r"@import\s+['\"]([^'\"]+)", text)
        else:
            parser = _AssetRefs()
            parser.feed(text)
            urls = parser.urls
        offenders += [
            f"{path.relative_to(built_site)}: {u}"
            for u in urls
            if urlparse(u).scheme in ("http", "https") or u.startswith("//")
        ]
    assert offenders == []


def test_every_page_names_its_published_address_as_canonical(built_site):
    for page in html_pages(built_site):
        path = page.relative_to(built_site).as_posix().removesuffix("index.html")
        soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
        assert [link["href"] for link in soup.select('link[rel="canonical"]')] == [PUBLISHED_URL + path], path


def test_no_generator_link_or_web_font(built_site):
    home = (built_site / "index.html").read_text(encoding="utf-8")
    assert "fonts.googleapis" not in home and "fonts.gstatic" not in home
    assert "Made with" not in home  # extra.generator: false drops Material's footer link
    assert not list(built_site.rglob("_markdown_exec_pyodide*"))  # it @imports from a CDN


def test_maths_is_rendered_to_mathml_not_left_as_latex(built_site):
    pages = html_pages(built_site)
    leftovers = [
        p.relative_to(built_site).as_posix()
        for p in pages
        if re.search(r'class="arithmatex">\\[(\[]', p.read_text(encoding="utf-8"))
    ]
    assert leftovers == []
    assert "<math" in (built_site / "index.html").read_text(encoding="utf-8")


def test_the_table_of_contents_shows_a_headings_maths_as_maths(built_site):
    # the navigation repeats headings as text; a heading with maths must not show its LaTeX
    left = []
    for page in html_pages(built_site):
        soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
        left += [
            f"{page.relative_to(built_site)}: {entry.get_text(' ', strip=True)}"
            for entry in soup.select("nav span.md-ellipsis")
            if "\\(" in entry.get_text()
        ]
    assert left == []
    # and they are there, as MathML: every heading of why-scale.md written with maths
    source = (ROOT / "docs" / "why-scale.md").read_text(encoding="utf-8")
    anchors = {f"#{a}" for a in re.findall(r"^##+ .*\$.*\{ #([\w-]+) \}$", source, re.M)}
    soup = BeautifulSoup((built_site / "why-scale" / "index.html").read_text(encoding="utf-8"), "html.parser")
    shown = {a["href"] for a in soup.select("nav a.md-nav__link[href^='#']") if a.find("math")}
    assert anchors and shown == anchors
