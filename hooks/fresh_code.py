"""Make every build run the code as it is on disk now, including each rebuild of `mkdocs serve`.

markdown-exec runs the page snippets inside the MkDocs process, and `mkdocs serve` keeps
that process between rebuilds. Two things would survive an edit there:

- the ``qkv`` modules a snippet imported (Python caches imports in ``sys.modules``), so an
  edit to ``qkv/`` would not change a page until serve was restarted;
- markdown-exec's sessions (the globals each ``session="..."`` has accumulated), so a
  name deleted from a snippet would still be defined and the page would hide the error.

This hook forgets both before each build. (No hook imports ``qkv`` when it is loaded, so
before the build is early enough.) Figures, the explorer data and the notebook run in their
own processes and need nothing from here. Do not run a whole build inside the test process:
this hook would drop that process's ``qkv`` modules too.
"""

from __future__ import annotations

import logging
import sys

log = logging.getLogger("mkdocs.hooks.fresh_code")

# markdown-exec names a module after each executed block: "<code block: session x; n1>"
# becomes "_code_block_session_x_n1_".
_FORGET_PREFIXES = ("qkv.", "qkv_site.", "_code_block_")


def forget_imported_code() -> list[str]:
    """Drop ``qkv`` and markdown-exec's block modules and sessions; return what was dropped."""
    names = [n for n in sys.modules if n in ("qkv", "qkv_site") or n.startswith(_FORGET_PREFIXES)]
    for name in names:
        del sys.modules[name]
    try:  # markdown-exec keeps its sessions in module globals (not a public API)
        from markdown_exec._internal.formatters import python as exec_python
    except ImportError:
        log.warning("markdown-exec's sessions were not found; serve may show stale output")
        return names
    exec_python._sessions_globals.clear()
    exec_python._sessions_counter.clear()
    exec_python._code_blocks.clear()
    return names


def on_pre_build(config):
    forget_imported_code()
