"""The snippet cache in a small project: an edit reruns the block it touches, and the blocks
after it only when it changed what they see (docs/contributing.md says so).

Three builds of one page whose session has two blocks: the first computes both; an edit of
the first block's print alone reruns that block and takes the second from the cache; an edit
of the value the second block reads reruns both, and the page shows the new numbers.
"""

from __future__ import annotations

import os
import re
import time

from bs4 import BeautifulSoup
from qkv_site.artifacts.runner import STALE_AFTER
from support import build_site, serve

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


def two_session_page(root, spans) -> None:
    """One page, two sessions of two blocks each, interleaved on the page; every block sleeps
    and notes its session and when it ran."""
    (root / "docs").mkdir(parents=True)
    (root / "mkdocs.yml").write_text(MKDOCS_YML)

    def block(session: str, code: str) -> str:
        timed = (
            "import time\n_start = time.time()\ntime.sleep(1.0)\n"
            f"with open({str(spans)!r}, 'a') as f:\n"
            f"    f.write(f'{session} {{_start}} {{time.time()}}\\n')\n"
        )
        return f'```python exec="on" result="text" session="{session}"\n{timed}{code}\n```\n\n'

    (root / "docs" / "index.md").write_text(
        "---\nrun_ahead: true\n---\n\n# Two sessions\n\n"
        + block("a", "x = 2\nprint('a', x)")
        + block("b", "y = 5\nprint('b', y)")
        + block("a", "print('a again', x * 21)")
        + block("b", "print('b again', y * 3)")
    )


def test_the_sessions_of_a_page_that_runs_ahead_run_side_by_side(tmp_path):
    # MkDocs renders a page's blocks one at a time; the plugin reads a page whose front
    # matter asks for it when the build starts and starts its sessions in threads of their
    # own. Were session b run only when the page reached it, its blocks would start after
    # session a's first block had ended.
    root, spans = tmp_path / "project", tmp_path / "spans.txt"
    two_session_page(root, spans)
    summary, shown = build(root, tmp_path / "cache")
    assert summary == "4 computed (4 snippets), 0 from the cache"
    assert shown == ["a 2", "b 5", "a again 42", "b again 15"]  # each session's own state
    runs = [line.split() for line in spans.read_text().splitlines()]
    assert sorted(name for name, *_ in runs) == ["a", "a", "b", "b"], "a block ran twice"
    a = [(float(s), float(e)) for name, s, e in runs if name == "a"]
    b = [(float(s), float(e)) for name, s, e in runs if name == "b"]
    assert min(e for _, e in a) > min(s for s, _ in b), "session b waited for session a"


def test_a_block_that_raises_in_a_session_run_ahead_fails_the_build_naming_it(tmp_path):
    root = tmp_path / "project"
    (root / "docs").mkdir(parents=True)
    (root / "mkdocs.yml").write_text(MKDOCS_YML)
    (root / "docs" / "index.md").write_text(
        "---\nrun_ahead: true\n---\n\n# Two sessions\n\n"
        '```python exec="on" result="text" session="a"\nprint("fine")\n```\n\n'
        '```python exec="on" result="text" session="b"\nraise ValueError("b broke")\n```\n'
    )
    done = build_site(root / "site", {"QKV_CACHE": str(tmp_path / "cache")}, cwd=root)
    assert done.returncode != 0
    assert "docs/index.md (session 'b', block 1)" in done.stderr
    assert "ValueError: b broke" in done.stderr


def _entries(cache) -> dict[str, float]:
    """The snippet entries in ``cache`` (not the folders of work under way), with their times."""
    found = {}
    for entry in (cache / "snippets").iterdir():
        if not entry.name.startswith("."):
            found[entry] = entry.stat().st_mtime
    return found


def _age(entries, seconds: float) -> None:
    for entry in entries:
        os.utime(entry, (time.time() - seconds,) * 2)


def test_a_rebuild_under_serve_leaves_the_other_pages_entries_in_place(tmp_path):
    # Under `mkdocs serve --dirty` an edit re-renders one page, whose build uses that page's
    # entries only. The other page's entry, unused by that rebuild and older than the cache's
    # age limit, must survive it: it is still the other page's output.
    root, cache = tmp_path / "project", tmp_path / "cache"
    two_page_project(root, "print('PAGE')")
    assert build(root, cache)[0] == "2 computed (2 snippets), 0 from the cache"
    before = set(_entries(cache))
    with serve(root, "--dirty", env={**os.environ, "QKV_CACHE": str(cache)}) as served:
        _age(before, STALE_AFTER * 2)  # after serve's first build, which used (and dated) both
        seen = len(served.lines)
        page = root / "docs" / "index.md"
        page.write_text(page.read_text().replace("print('index')", "print('index, edited')"))
        served.wait_for_log(r"Reloading browsers", after=seen)
    after = set(_entries(cache))
    assert before < after, "a rebuild under serve removed an entry it did not use"


def test_a_full_build_removes_only_what_no_build_used_for_the_age_limit(tmp_path):
    root, cache = tmp_path / "project", tmp_path / "cache"
    two_page_project(root, "print('PAGE')")
    build(root, cache)
    old = _entries(cache)
    _age(old, STALE_AFTER * 2)
    (root / "docs" / "other.md").unlink()  # its entry is now used by no build
    started = time.time()
    assert build(root, cache)[0] == "0 computed (none), 1 from the cache"
    kept = _entries(cache)
    assert len(old) == 2 and len(kept) == 1, "the unused old entry stayed, or the used one went"
    # the entry the build used was dated anew: its age counts from its last use
    assert all(mtime >= started - 1 for mtime in kept.values())


def test_a_full_build_keeps_an_unused_entry_younger_than_the_age_limit(tmp_path):
    root, cache = tmp_path / "project", tmp_path / "cache"
    two_page_project(root, "print('PAGE')")
    build(root, cache)
    _age(_entries(cache), STALE_AFTER / 2)  # days old, well short of the limit
    (root / "docs" / "other.md").unlink()
    build(root, cache)
    assert len(_entries(cache)) == 2
