"""`mkdocs serve` shows edits to snippets and to `qkv` without a restart.

markdown-exec runs snippets inside the serve process, where imported modules and its
sessions would otherwise outlive a rebuild (hooks/fresh_code.py clears both). The test
serves a temporary copy of the repository with the watch options of ``./dev serve``, adds a
probe (a snippet that imports a module of ``qkv`` and prints), then edits the snippet and
then the module, and waits for each edit to show on the served page.
"""

from __future__ import annotations

import re
import time
import urllib.request

import pytest
from checkout import PYTHON, clean_env, copy_project, start, stop, tail
from support import ROOT, free_port


PAGE = "contributing/"
PROBE_MODULE = "qkv/_serve_probe.py"
PROBE_SNIPPET = "snippets/serve_probe.py"
SNIPPET_V1 = '''# --8<-- [start:probe]
from qkv import _serve_probe

leftover = "defined by the first version only"
print("probe says", "snippet-one", _serve_probe.MESSAGE)
# --8<-- [end:probe]
'''
# The second version no longer defines `leftover`; a session kept from the first build would.
SNIPPET_V2 = '''# --8<-- [start:probe]
from qkv import _serve_probe

print("probe says", "snippet-two", _serve_probe.MESSAGE, "leftover" in globals())
# --8<-- [end:probe]
'''
BLOCK = '''

```python exec="on" result="text" session="serve-probe"
--8<-- "snippets/serve_probe.py:probe"
```
'''


def watch_options() -> list[str]:
    """The ``-w`` options ``./dev serve`` passes to ``mkdocs serve``."""
    text = (ROOT / "dev").read_text(encoding="utf-8")
    serve = re.search(r"^\s*serve\)\n(.*?);;", text, re.M | re.S).group(1)
    options = re.findall(r"(-w\s+\S+)", serve)
    return [part for option in options for part in option.split()]


def test_dev_serve_watches_the_code_that_makes_the_pages():
    watched = watch_options()[1::2]
    assert {"qkv", "sitebuild", "snippets", "hooks"} <= set(watched)


def _fetch(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _probe_line(page: str) -> str:
    match = re.search(r"probe says [^<\n]*", page)
    return match.group(0) if match else ""


def _wait_for(url: str, expected: str, server, log, seconds: int = 600) -> None:
    deadline, seen = time.monotonic() + seconds, ""
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"mkdocs serve exited with {server.returncode}:\n{tail(log)}")
        seen = _probe_line(_fetch(url))
        if seen == expected:
            return
        time.sleep(1)
    pytest.fail(f"waited {seconds} s for {expected!r}, the page shows {seen!r}:\n{tail(log)}")


def test_serve_shows_an_edited_snippet_and_an_edited_module(tmp_path):
    root = copy_project(tmp_path / "qkv")
    (root / PROBE_MODULE).write_text('MESSAGE = "module-one"\n')
    (root / PROBE_SNIPPET).write_text(SNIPPET_V1)
    with (root / "docs" / "contributing.md").open("a") as page:
        page.write(BLOCK)

    port = free_port()
    url = f"http://127.0.0.1:{port}/{PAGE}"
    log = tmp_path / "serve.log"
    command = [PYTHON, "-m", "mkdocs", "serve", "--strict", "-a", f"127.0.0.1:{port}",
               *watch_options()]
    server = start(command, root, clean_env(PYTHONPATH=str(root)), log)
    try:
        _wait_for(url, "probe says snippet-one module-one", server, log)

        (root / PROBE_SNIPPET).write_text(SNIPPET_V2)  # a stale session would print True
        _wait_for(url, "probe says snippet-two module-one False", server, log)

        (root / PROBE_MODULE).write_text('MESSAGE = "module-two, edited"\n')
        _wait_for(url, "probe says snippet-two module-two, edited False", server, log)
    finally:
        stop(server)
