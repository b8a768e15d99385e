"""The glossary: the generated page "Glossary", and each term's first mark on a page kept
focusable. The work is in ``qkv_site.glossary``, where the tests import it from too."""

from qkv_site.glossary import on_files, on_page_content

__all__ = ["on_files", "on_page_content"]
