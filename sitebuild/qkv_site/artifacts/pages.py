"""What each page was built from, so ``mkdocs serve --dirty`` rebuilds the right pages.

With ``--dirty`` MkDocs re-renders only the pages whose source is newer than the page it
built. A page also depends on the snippet files it includes (``--8<-- "file.py:section"``)
and on what its snippets imported (``qkv/``...); this records those files per page and, on
the next build, when one of them changed since the page was built, dates the built page
back to 1970, so MkDocs' own rule (source newer than output) renders it again.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from qkv_site.site import includes


class PageInputs:
    """The page-dependency kind (no job of its own)."""

    def __init__(self, runner):
        self.runner = runner
        self.inputs: dict[str, set[Path]] = {}  # page src_uri -> files it was built from
        self.built_at: dict[str, float] = {}
        self.page = None

    def on_files(self, files, config):
        for file in files.documentation_pages():
            built = self.built_at.get(file.src_uri)
            if built is None:
                continue
            changed = [p for p in self.inputs.get(file.src_uri, ()) if _mtime(p) > built]
            if changed and os.path.exists(file.abs_dest_path):
                os.utime(file.abs_dest_path, (0, 0))  # older than its source: rendered again

    def on_page_markdown(self, markdown, page, config, files):
        self.page = page.file.src_uri
        root = self.runner.root
        found = set()
        for name in {include.file for include in includes(markdown)}:
            for base in (root / "snippets", root):
                if (base / name).is_file():
                    found.add(base / name)
                    break
        self.inputs[self.page] = found
        self.built_at[self.page] = time.time()

    def used(self, result_folder: Path) -> None:
        """A snippet job of the current page: its recorded inputs are the page's too."""
        deps = self.runner.deps(result_folder)
        self.inputs.setdefault(self.page, set()).update(self.runner.root / rel for rel in deps)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return float("inf")  # gone: rebuild, and let the build say what is missing
