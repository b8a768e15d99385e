"""A page's front-matter description, escaped for the attribute it goes into.

Material writes ``page.meta.description`` into ``<meta name="description" content="...">``
as it is; MkDocs renders templates without autoescaping, so a double quote in the sentence
would end the attribute there and turn the rest into stray attributes. Marking the text as
escaped HTML (``markupsafe.escape``) makes the template write ``&quot;`` instead, and the
browser, search engines and tests read back the sentence as written.
"""

from __future__ import annotations

from markupsafe import escape


def on_page_markdown(markdown, page, config, files):
    description = page.meta.get("description")
    if isinstance(description, str):
        page.meta["description"] = escape(description)
    return markdown
