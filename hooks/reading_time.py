"""Each chapter's reading time under its title, and the path's times on the home page.
The counting is in ``qkv_site.reading``, which the chapter-length test uses too."""

from qkv_site.reading import on_page_markdown

__all__ = ["on_page_markdown"]
