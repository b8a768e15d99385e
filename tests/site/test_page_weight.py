"""Page weight: every built page's HTML stays at most 200 KB.

The notebook page carried ~600 KB of nbconvert's CSS inline; it now links one shared
stylesheet (``assets/notebook.css``), which the browser caches across notebook pages.
"""

from __future__ import annotations

from support import html_pages, nav_paths

# Bytes of HTML per page (issue 33's goal). Pages that outgrew it were split where their
# content divides: the API reference and "How we know" into three and two pages, the trained
# model and the coreference study into pages of Going further of their own; long code that a
# page shows whole (the coreference pairs) is written compactly, and no code line carries an
# <a id> (mkdocs.yml). What the limit also catches is a page that carries a stylesheet or a
# data blob inline, as the notebook page once did (600 KB).
LIMIT = 200 * 1024


def test_every_page_is_at_most_200_kb(built_site):
    pages = [*html_pages(built_site), built_site / "404.html"]
    sizes = {p.relative_to(built_site).as_posix(): p.stat().st_size for p in pages}
    assert len(sizes) == len(nav_paths()) + 1  # every page of the nav, and the 404 page
    assert {page: size for page, size in sizes.items() if size > LIMIT} == {}
    print("heaviest pages:", sorted(sizes.items(), key=lambda kv: -kv[1])[:3])
