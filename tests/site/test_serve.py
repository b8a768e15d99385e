"""`mkdocs serve` shows edits to snippets and to `qkv` without a restart.

Snippets run out of process (the qkv-artifacts plugin), so no imported module or session
outlives a rebuild, and ``--dirty`` must still rebuild the page whose snippet or module
changed. The test serves a temporary copy of the repository with the options of
``./dev serve`` (on a socket it binds to a free port), adds a probe (a snippet that imports
a module of ``qkv`` and prints), then edits the snippet and then the module, and after each
rebuild the server logs, reads the page.
"""

from __future__ import annotations

import re
import urllib.request

from bs4 import BeautifulSoup
from checkout import clean_env, copy_project
from qkv_site.artifacts.config import cache_dir
from support import ROOT, dev_serve_watch_options, serve

PAGE = "contributing/"
PROBE_MODULE = "qkv/_serve_probe.py"
PROBE_SNIPPET = "snippets/serve_probe.py"
SNIPPET_V1 = """# --8<-- [start:probe]
from qkv import _serve_probe

leftover = "defined by the first version only"
print("probe says", "snippet-one", _serve_probe.MESSAGE)
# --8<-- [end:probe]
"""
# The second version no longer defines `leftover`; a session kept from the first build would.
SNIPPET_V2 = """# --8<-- [start:probe]
from qkv import _serve_probe

print("probe says", "snippet-two", _serve_probe.MESSAGE, "leftover" in globals())
# --8<-- [end:probe]
"""
BLOCK = """

```python exec="on" result="text" session="serve-probe"
--8<-- "snippets/serve_probe.py:probe"
```
"""


def test_dev_serve_watches_the_code_that_makes_the_pages():
    options = dev_serve_watch_options()
    watched = [options[i + 1] for i, o in enumerate(options) if o == "-w"]
    assert {"qkv", "sitebuild", "snippets", "hooks"} <= set(watched)
    assert "--dirty" in options  # an edit re-renders only the pages it touches


def _probe_line(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as response:
        soup = BeautifulSoup(response.read(), "html.parser")
    line = soup.find(string=re.compile("probe says"))
    return line.strip() if line else ""


def _after_rebuild(served, edit) -> None:
    """Make ``edit`` and return once serve has written the rebuild it caused.

    Not "Documentation built in": mkdocs drops a build message equal to an earlier one
    (`DuplicateFilter`), so a second rebuild as fast as the first logs no such line. The
    live-reload loop logs "Reloading browsers" after every good rebuild and an error line
    after a failed one.
    """
    seen = len(served.lines)
    edit()
    index = served.wait_for_log(r"Reloading browsers|An error happened during the rebuild", after=seen)
    assert "Reloading browsers" in served.lines[index], served.log()


def test_serve_shows_an_edited_snippet_and_an_edited_module(built_site, tmp_path):
    # built_site: the run's build has filled the artifact cache this copy shares
    root = copy_project(tmp_path / "qkv")
    (root / PROBE_MODULE).write_text('MESSAGE = "module-one"\n')
    (root / PROBE_SNIPPET).write_text(SNIPPET_V1)
    with (root / "docs" / "contributing.md").open("a") as page:
        page.write(BLOCK)
    # the copy shares this tree's artifact cache: only the probe is computed afresh
    env = clean_env(PYTHONPATH=str(root), QKV_CACHE=str(cache_dir(ROOT)))
    with serve(root, *dev_serve_watch_options(), env=env) as served:
        url = served.url + PAGE
        assert _probe_line(url) == "probe says snippet-one module-one"

        _after_rebuild(served, lambda: (root / PROBE_SNIPPET).write_text(SNIPPET_V2))
        assert _probe_line(url) == "probe says snippet-two module-one False"  # no stale session

        _after_rebuild(served, lambda: (root / PROBE_MODULE).write_text('MESSAGE = "module-two, edited"\n'))
        assert _probe_line(url) == "probe says snippet-two module-two, edited False"
