"""The snippet cache in a small project: an edit reruns the block it touches, and the blocks
after it only when it changed what they see (docs/contributing.md says so).

Three builds of one page whose session has two blocks: the first computes both; an edit of
the first block's print alone reruns that block and takes the second from the cache; an edit
of the value the second block reads reruns both, and the page shows the new numbers.
"""

from __future__ import annotations

import re

from bs4 import BeautifulSoup
from support import build_site

MKDOCS_YML = """site_name: snippet cache test
theme: {name: mkdocs}
markdown_extensions: [pymdownx.superfences]
plugins:
  - qkv-artifacts:
      cache_dir: !ENV QKV_CACHE
"""

PAGE = """# Two blocks

```python exec="on" result="text" session="s"
x = 2
print("first", x)
```

```python exec="on" result="text" session="s"
print("second", x * 21)
```
"""


def build(root, cache) -> tuple[str, list[str]]:
    """Build; the plugin's summary line and the texts the home page shows under its blocks."""
    done = build_site(root / "site", {"QKV_CACHE": str(cache)}, cwd=root)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = re.search(r"artifacts: (.*?), in [\d.]+ s of build", done.stderr).group(1)
    soup = BeautifulSoup((root / "site" / "index.html").read_text(encoding="utf-8"), "html.parser")
    return summary, [pre.get_text().strip() for pre in soup.select("div.highlight pre")]


def test_an_edit_reruns_its_block_and_only_the_blocks_whose_state_it_changed(tmp_path):
    root, cache = tmp_path / "project", tmp_path / "cache"
    (root / "docs").mkdir(parents=True)
    (root / "mkdocs.yml").write_text(MKDOCS_YML)
    page = root / "docs" / "index.md"
    page.write_text(PAGE)
    assert build(root, cache) == ("2 computed (2 snippets), 0 from the cache", ["first 2", "second 42"])

    page.write_text(PAGE.replace('print("first", x)', 'print("x is", x)  # reworded'))
    assert build(root, cache) == ("1 computed (1 snippets), 1 from the cache", ["x is 2", "second 42"])

    page.write_text(PAGE.replace("x = 2", "x = 3"))
    assert build(root, cache) == ("2 computed (2 snippets), 0 from the cache", ["first 3", "second 63"])


def two_page_project(root, block: str):
    """A project of two pages, each with one session whose only block is ``block`` with
    PAGE replaced by the page's name (blocks of the same code would share one entry)."""
    (root / "docs").mkdir(parents=True)
    (root / "mkdocs.yml").write_text(MKDOCS_YML)
    for name in ("index", "other"):
        (root / "docs" / f"{name}.md").write_text(
            f'# {name}\n\n```python exec="on" result="text" session="{name}"\n'
            f"{block.replace('PAGE', name)}\n```\n"
        )


def test_a_block_that_raises_fails_the_build_naming_its_page_block_and_error(tmp_path):
    # a failing block stops the build and the message leads to it
    root = tmp_path / "project"
    two_page_project(root, "x = 1\nraise RuntimeError('PAGE: the value was ' + str(x))")
    done = build_site(root / "site", {"QKV_CACHE": str(tmp_path / "cache")}, cwd=root)
    assert done.returncode != 0
    assert "docs/index.md (session 'index', block 1)" in done.stderr
    assert "RuntimeError: index: the value was 1" in done.stderr
