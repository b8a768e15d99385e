"""Every page has a title and a description of its own, and the 404 page leads somewhere.

Search engines and link previews show a page's ``<title>`` and ``<meta name="description">``.
A chapter without ``description:`` in its front matter silently gets the site's default, so
the test names each page that still uses it (only the home page may).
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

import pytest
import yaml
from support import ROOT, html_pages


class _ConfigLoader(yaml.SafeLoader):
    """Reads mkdocs.yml as data; MkDocs' own loader would also load (run) the hooks."""


_ConfigLoader.add_constructor("!ENV", lambda loader, node: None)


def site_config() -> dict:
    return yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_ConfigLoader)


def nav_urls(items) -> list[str]:
    """The URL path of every page in the nav, in order ("/" for index.md)."""
    urls = []
    for item in items:
        target = next(iter(item.values())) if isinstance(item, dict) else item
        if isinstance(target, list):
            urls += nav_urls(target)
        elif not str(target).startswith(("http://", "https://")):
            stem = re.sub(r"\.(md|ipynb)$", "", str(target))
            urls.append("/" if stem == "index" else f"/{stem}/")
    return urls


def test_every_page_has_a_title_and_its_own_description(built_site):
    default = site_config()["site_description"]
    problems, titles = [], {}
    for path in html_pages(built_site):
        name = path.relative_to(built_site).as_posix()
        text = path.read_text(encoding="utf-8")
        title = re.search(r"<title>(.*?)</title>", text, re.S)
        descriptions = re.findall(r'<meta name="description" content="([^"]*)"', text)
        if not title or not html.unescape(title.group(1)).strip():
            problems.append(f"{name}: no <title>")
        else:
            titles.setdefault(html.unescape(title.group(1)).strip(), []).append(name)
        if len(descriptions) != 1 or not descriptions[0].strip():
            problems.append(f"{name}: {len(descriptions)} description meta tags")
        elif name != "index.html" and html.unescape(descriptions[0]) == default:
            problems.append(f"{name}: the site's default description; "
                            "add description: to its front matter")
    problems += [f"title {t!r} is used by {', '.join(p)}" for t, p in titles.items() if len(p) > 1]
    assert problems == []


class _Hrefs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a" and dict(attrs).get("href"):
            self.hrefs.append(dict(attrs)["href"])


def test_404_page_has_the_site_style_and_links_home_and_to_every_page(built_site):
    text = (built_site / "404.html").read_text(encoding="utf-8")
    assert "Page not found" in text
    assert re.search(r'href="/assets/stylesheets/main\.[0-9a-f]+\.min\.css"', text)
    parser = _Hrefs()
    parser.feed(text.split('class="md-content"', 1)[1])  # the page's own links, not the nav
    links = parser.hrefs
    expected = nav_urls(site_config()["nav"])
    assert "/" in links
    assert [url for url in expected if url not in links] == []
    broken = [url for url in links if url.startswith("/")
              and not (built_site / url.lstrip("/") / "index.html").is_file()
              and not (built_site / url.lstrip("/")).is_file()]
    assert broken == []
