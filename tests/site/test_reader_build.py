"""The pages' code run where a reader runs it, and the cache shared between processes.

With ``snippet_python`` (``QKV_SNIPPET_PYTHON``) a build runs every page's blocks in that
Python: the run's reader's environment (tests/reader.py), the built wheel and what a reader
installs with it. A block that needs this tree, the build package or the test tools then
fails the build, as it would fail a reader: that is what lets the copy-paste test of the
trained-model pages take the build's run as the reader's (tests/site/test_copy_paste.py).
Its entries are keyed by that environment, apart from the build's own.

Two processes that want the same entry compute it once: whoever comes second waits for the
entry's lock and reads what the first computed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

from bs4 import BeautifulSoup
from support import build_site

MKDOCS_YML = """site_name: reader build test
theme: {name: mkdocs}
markdown_extensions: [pymdownx.superfences]
plugins:
  - qkv-artifacts:
      cache_dir: !ENV QKV_CACHE
      snippet_python: !ENV [QKV_SNIPPET_PYTHON, ""]
"""


def project(root, block: str):
    (root / "docs").mkdir(parents=True)
    (root / "mkdocs.yml").write_text(MKDOCS_YML)
    (root / "docs" / "index.md").write_text(
        f'# One block\n\n```python exec="on" result="text"\n{block}\n```\n'
    )
    return root


def build(root, cache, python="") -> subprocess.CompletedProcess:
    return build_site(root / "site", {"QKV_CACHE": str(cache), "QKV_SNIPPET_PYTHON": str(python)}, cwd=root)


def shown(root) -> list[str]:
    soup = BeautifulSoup((root / "site" / "index.html").read_text(encoding="utf-8"), "html.parser")
    return [pre.get_text().strip() for pre in soup.select("div.highlight pre")]


def summary(done) -> str:
    return re.search(r"artifacts: (.*?), in [\d.]+ s of build", done.stderr).group(1)


def test_a_block_that_needs_the_build_package_runs_in_the_build_but_fails_a_reader(tmp_path, reader_python):
    root = project(tmp_path / "project", "import qkv_site\nprint('found the build package')")
    assert build(root, tmp_path / "cache").returncode == 0  # the build's own Python has it
    done = build(root, tmp_path / "cache", reader_python)
    assert done.returncode != 0
    assert "docs/index.md (a block)" in done.stderr and "No module named 'qkv_site'" in done.stderr


def test_a_block_that_reads_the_project_folder_fails_a_reader(tmp_path, reader_python):
    root = project(tmp_path / "project", "print(open('docs/index.md').read()[:5])")
    assert build(root, tmp_path / "cache").returncode == 0  # run from the project's root
    done = build(root, tmp_path / "cache", reader_python)
    assert done.returncode != 0 and "FileNotFoundError" in done.stderr


def test_a_reader_runs_the_installed_wheel_and_its_entries_are_its_own(tmp_path, reader_python):
    root = project(
        tmp_path / "project", "import qkv, sys\nprint(qkv.__file__.startswith(sys.prefix), sys.prefix)"
    )
    cache = tmp_path / "cache"
    assert build(root, cache).returncode == 0
    own = shown(root)[0].split()
    assert own[0] == "False"  # the build's own Python: this tree's qkv
    done = build(root, cache, reader_python)
    assert done.returncode == 0 and summary(done) == "1 computed (1 snippets), 0 from the cache"
    reader = shown(root)[0].split()
    assert reader[0] == "True" and reader_python.is_relative_to(reader[1])  # the wheel, there
    again = build(root, cache, reader_python)
    assert summary(again) == "0 computed (none), 1 from the cache"


def test_two_builds_that_want_one_entry_compute_it_once(tmp_path):
    runs = tmp_path / "runs.txt"
    root = project(
        tmp_path / "project",
        f"import time\ntime.sleep(3)\nopen({str(runs)!r}, 'a').write('ran\\n')\nprint('slept')",
    )
    cache = tmp_path / "cache"
    env = {"QKV_CACHE": str(cache), "NO_MKDOCS_2_WARNING": "1"}
    builds = [
        subprocess.Popen(
            [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(root / f"site{i}")],
            cwd=root,
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in (1, 2)
    ]
    results = [b.communicate(timeout=600) for b in builds]
    assert all(b.returncode == 0 for b in builds), [err[-2000:] for _, err in results]
    assert runs.read_text().splitlines() == ["ran"], "the block ran in both builds"
    counts = sorted(re.search(r"artifacts: (\d+) computed", err).group(1) for _, err in results)
    assert counts == ["0", "1"]  # one computed it, the other waited and read it
