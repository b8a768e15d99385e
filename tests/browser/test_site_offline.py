"""The built site: strict build passes, every page loads offline, nothing leaves 127.0.0.1."""

from __future__ import annotations

from urllib.parse import urlparse

from support import html_pages


def test_every_page_loads_offline_without_console_errors(page, site_url, built_site):
    outside, errors = [], []
    page.on(
        "request",
        lambda r: (
            outside.append(r.url)
            if urlparse(r.url).hostname not in ("127.0.0.1",) and not r.url.startswith(("data:", "blob:"))
            else None
        ),
    )
    page.on("console", lambda m: errors.append(f"{page.url}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"{page.url}: {e}"))
    paths = [p.relative_to(built_site).as_posix() for p in html_pages(built_site)]
    for path in paths:
        page.goto(site_url + path, wait_until="networkidle")
        assert page.title(), path
    assert outside == [], f"requests left 127.0.0.1: {outside[:10]}"
    assert errors == []
    print(f"opened {len(paths)} pages; 0 external requests; 0 console errors")


def test_maths_font_loads_and_formula_has_width(page, site_url):
    page.goto(site_url, wait_until="networkidle")
    width = page.evaluate("document.querySelector('math').getBoundingClientRect().width")
    assert width > 50
    assert page.evaluate("document.fonts.check('16px \"Noto Sans Math\"')")
