"""Chapters numbered by their place in the nav: the nav's titles, and every chapter link
written by name (``[chapter {n}](why-scale.md)``), get the chapter's current number. The
rules and the filling are in :mod:`qkv_site.site`; a chapter number typed by hand fails
the build."""

from mkdocs.exceptions import PluginError
from mkdocs.structure.nav import Section
from qkv_site.site import EXPLANATION, Site, number_chapters, typed_chapter_numbers


def on_nav(nav, config, files):
    site = Site(config["nav"])
    chapters = {c.file: c for c in site.chapters()}
    (part,) = [item for item in nav.items if isinstance(item, Section) and item.title == EXPLANATION]
    for page in part.children:
        page.title = chapters[page.file.src_uri].label
    return nav


def on_page_markdown(markdown, page, config, files):
    if page.file.generated_by is not None:
        return markdown  # How we know, the glossary: made from pages already numbered
    where = f"docs/{page.file.src_uri}"
    try:
        filled = number_chapters(markdown, Site(config["nav"]).chapters(), where)
    except ValueError as error:
        raise PluginError(str(error)) from None
    if problems := typed_chapter_numbers(str(page.meta.get("description", ""))):
        raise PluginError(f"{where}, its front matter's description: " + "; ".join(problems))
    return filled
