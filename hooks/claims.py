"""Claim marks in the chapters -> links to the generated page "How we know".

The work is in ``qkv_site.claims`` (the site's build package), where the tests import it
from too; MkDocs calls the event handlers this module names.
"""

from qkv_site.claims import on_files, on_page_markdown

__all__ = ["on_files", "on_page_markdown"]
