"""What a reader copies works: the Python blocks of every built page run, in page order,
in a fresh interpreter, as if pasted one after another into a notebook.

Blocks marked ``.excerpt`` (a function shown out of its module) are labelled as such on the
page and skipped here, as are the API reference's signatures; blocks of ``>>>`` lines (the
``pycon`` sessions of the PyTorch tabs) are run as doctests, so their shown output is checked
too. (Their copy button copies the code alone, without prompts and output: a subset of what
runs here.)

They run where a reader runs them: in a reader's environment (tests/reader.py: the built
wheel of qkv and what a reader installs with it, nothing of this tree).

The pages that run the trained model take minutes, and the run's builds run their code
already, in that same reader's environment (the plugin's ``snippet_python``): so for them the
build's run is the reader's, provided it ran exactly what the page shows. Their test checks
that: the blocks the built page shows are, in order, the blocks the build executes, in one
session (one namespace), and the build's cache holds an entry for each, keyed by the reader's
environment (the wheel's contents and every installed version), so each ran there without
an error, in this run or an earlier one with the same inputs. A shown block that fails with
the wheel alone fails the build, and with it this test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser
from pathlib import Path

import pytest
from reader import READER_NO_DEPS, make_reader_env, reader_env  # noqa: F401
from support import HANG, ROOT, html_pages


class CodeBlocks(HTMLParser):
    """Extract the text of each ``div.language-python.highlight`` block, as the copy button does."""

    def __init__(self):
        super().__init__()
        self.blocks: list[dict] = []
        self._depth = 0  # div nesting inside the current code block
        self._in_code = False
        self._current: dict | None = None
        self._divs = 0  # div nesting outside code blocks
        self._api_docs: list[int] = []  # nesting levels of the API reference's docstrings

    def handle_starttag(self, tag, attrs):
        classes = (dict(attrs).get("class") or "").split()
        if self._current is None and tag == "div":
            self._divs += 1
            if "doc-contents" in classes:
                self._api_docs.append(self._divs)
        if self._current is not None:
            if tag == "div":
                self._depth += 1
            if tag == "code":
                self._in_code = True
            return
        code_block = {"language-python", "language-pycon"} & set(classes)  # pycon: a session
        if tag == "div" and "highlight" in classes and code_block:
            self._divs -= 1  # counted above; the code block counts its own divs
            # An excerpt (code out of its module), an API signature or a docstring's example
            # (run in its module's namespace by --doctest-modules) is not a script.
            partial = "excerpt" in classes or "doc-signature" in classes or bool(self._api_docs)
            self._current = {"excerpt": partial, "code": []}
            self._depth = 1

    def handle_endtag(self, tag):
        if self._current is None:
            if tag == "div":
                if self._api_docs and self._api_docs[-1] == self._divs:
                    self._api_docs.pop()
                self._divs -= 1
            return
        if tag == "code":
            self._in_code = False
        if tag == "div":
            self._depth -= 1
            if self._depth == 0:
                self._current["code"] = "".join(self._current["code"])
                self.blocks.append(self._current)
                self._current = None

    def handle_data(self, data):
        if self._current is not None and self._in_code:
            self._current["code"].append(data)


RUNNER = r"""
import doctest, json, sys
blocks = json.load(sys.stdin)
namespace = {"__name__": "__main__"}
for number, code in enumerate(blocks, 1):
    try:
        if code.lstrip().startswith(">>>"):
            test = doctest.DocTestParser().get_doctest(code, namespace, f"block {number}", None, 0)
            flags = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS
            runner = doctest.DocTestRunner(optionflags=flags)
            runner.run(test, out=sys.stderr.write, clear_globs=False)
            namespace.update(test.globs)  # the DocTest ran in a copy; later blocks need its names
            if runner.failures:
                raise AssertionError(f"doctest block {number} failed")
        else:
            exec(compile(code, f"<block {number}>", "exec"), namespace)
    except BaseException as error:
        print(f"block {number} failed: {error!r}\n--- code ---\n{code}", file=sys.stderr)
        raise
"""


# The contributor guide's code (a test using pytest) is for a contributor's clone, so it runs
# in the test environment; every other page's code runs where a reader runs it.
CONTRIBUTOR_PAGES = {"contributing/index.html"}


def run_blocks(python: Path, blocks: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(python), "-c", RUNNER],
        input=json.dumps(blocks),
        capture_output=True,
        text=True,
        cwd=cwd,
        env=reader_env(),
        timeout=HANG,
    )


def test_the_reader_environment_has_the_wheel_and_what_it_needs_only(reader_python, tmp_path):
    check = """
import importlib.util, sys, qkv, numpy, matplotlib, torch
assert qkv.__file__.startswith(sys.prefix), qkv.__file__  # the installed wheel, not the tree
print(qkv.__file__)
"""
    done = run_blocks(reader_python, [check], tmp_path)
    assert done.returncode == 0, done.stderr
    # What a reader's install does not bring cannot be imported, so a block using it fails.
    for missing in ["qkv_site", "mkdocs", "pytest", "hypothesis"]:
        done = run_blocks(reader_python, [f"import {missing}"], tmp_path)
        assert done.returncode != 0 and "ModuleNotFoundError" in done.stderr, missing


def page_blocks(built_site):
    for path in html_pages(built_site):
        parser = CodeBlocks()
        parser.feed(path.read_text(encoding="utf-8"))
        if parser.blocks:
            yield path.relative_to(built_site).as_posix(), parser.blocks


def pages_run_ahead() -> list[str]:
    """The pages whose front matter says ``run_ahead: true`` (docs/NAME.md): the
    trained-model chapters, whose blocks take minutes to run."""
    from qkv_site.site import front_matter

    docs = sorted((ROOT / "docs").glob("*.md"))
    return [p.name for p in docs if front_matter(p.read_text(encoding="utf-8"))[0].get("run_ahead") is True]


def built_name(name: str) -> str:
    """Where the build writes docs/NAME (``coreference.md`` -> ``coreference/index.html``)."""
    return "index.html" if name == "index.md" else f"{name.removesuffix('.md')}/index.html"


def runnable_blocks(html: str) -> list[str]:
    parser = CodeBlocks()
    parser.feed(html)
    return [b["code"] for b in parser.blocks if not b["excerpt"]]


def run_pages(pages: list[tuple[str, list[str]]], python_for, folder: Path) -> list[str]:
    """Each page's blocks in its own interpreter and folder, two pages at a time, in the
    order given; the failures, page by page."""

    def run(page, runnable):
        where = folder / page.replace("/", "_")  # what a page writes stays its own
        where.mkdir()
        return page, run_blocks(python_for(page), runnable, where)

    with ThreadPoolExecutor(2) as pool:
        done = list(pool.map(lambda item: run(*item), pages))
    return [f"{page}:\n{result.stderr[-3000:]}" for page, result in done if result.returncode]


def model_pages() -> list[str]:
    """The pages run ahead of the build for their trained model (docs/NAME.md), not the
    contributor guide's (it runs ahead for its commands, in the test environment)."""
    return [name for name in pages_run_ahead() if built_name(name) not in CONTRIBUTOR_PAGES]


@pytest.mark.parametrize("name", model_pages())
def test_the_pages_that_run_the_model_ran_in_the_build_as_copied(
    name, built_site, computed_cache, reader_python
):
    from qkv_site.artifacts.snippets import cached_page
    from qkv_site.page_blocks import page_blocks

    shown = [
        code.strip() for code in runnable_blocks((built_site / built_name(name)).read_text(encoding="utf-8"))
    ]
    executed = page_blocks(ROOT, name)
    sessions = {block.session for block in executed}
    assert len(sessions) == 1 and None not in sessions, (
        f"{name}: its blocks run in {sessions}, not one namespace"
    )
    # what a reader pastes, in order, is what the build executed: no block shown and not run,
    # none run and not shown
    assert shown == [block.code.strip() for block in executed], (
        f"{name}: the shown blocks are not the run ones"
    )
    # and the build ran each in the reader's Python (its entry is keyed by that environment)
    entries = cached_page(ROOT, name, computed_cache, str(reader_python))
    missing = [block.code.strip()[:80] for block, entry in entries if entry is None]
    assert missing == [], f"{name}: no run in the reader's environment of: {missing}"


def test_every_python_block_on_every_page_runs_in_order(built_site, reader_python, tmp_path):
    ahead = {built_name(name) for name in model_pages()}  # run by the build: the test above
    pages = []
    skipped = 0
    for page, blocks in page_blocks(built_site):
        runnable = [b["code"] for b in blocks if not b["excerpt"]]
        skipped += len(blocks) - len(runnable)
        if runnable and page not in ahead:
            pages.append((page, runnable))

    def python_for(page):
        return Path(sys.executable) if page in CONTRIBUTOR_PAGES else reader_python

    failures = run_pages(pages, python_for, tmp_path)
    ran = sum(len(runnable) for _, runnable in pages)
    print(f"copy-paste: ran {ran} blocks of {len(pages)} pages, skipped {skipped} marked excerpts")
    assert ran > 0
    assert failures == [], "\n\n".join(failures)


def test_the_extractor_reads_code_as_the_copy_button_would():
    html = (
        '<div class="language-python highlight"><span class="filename">x.py</span><pre><span></span>'
        '<code><a id="l1" href="#l1"></a><span class="n">x</span> <span class="o">=</span> 1\n'
        '<a id="l2"></a>print(x &lt; 2)\n</code></pre></div>'
        '<div class="language-python excerpt highlight"><pre><code>def f(): ...</code></pre></div>'
    )
    parser = CodeBlocks()
    parser.feed(html)
    assert parser.blocks == [
        {"excerpt": False, "code": "x = 1\nprint(x < 2)\n"},
        {"excerpt": True, "code": "def f(): ..."},
    ]


def test_the_extractor_skips_docstring_examples_but_not_sessions_outside_them():
    html = (
        '<div class="doc doc-object"><div class="doc doc-contents"><div class="x"></div>'
        '<div class="language-pycon highlight"><pre><code>&gt;&gt;&gt; attention(q)\n</code></pre></div>'
        "</div></div>"
        '<div class="language-pycon highlight"><pre><code>&gt;&gt;&gt; 1 + 1\n2\n</code></pre></div>'
    )
    parser = CodeBlocks()
    parser.feed(html)
    assert parser.blocks == [
        {"excerpt": True, "code": ">>> attention(q)\n"},
        {"excerpt": False, "code": ">>> 1 + 1\n2\n"},
    ]
