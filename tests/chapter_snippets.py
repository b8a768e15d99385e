"""Load a snippet's globals, so a test checks the very objects a page shows."""

from __future__ import annotations

import contextlib
import functools
import io
import runpy

from support import ROOT


@functools.cache
def snippet_globals(name: str) -> dict:
    """Run ``snippets/NAME`` once (its printing swallowed) and return its globals."""
    with contextlib.redirect_stdout(io.StringIO()):
        return runpy.run_path(str(ROOT / "snippets" / name), run_name="snippet")
