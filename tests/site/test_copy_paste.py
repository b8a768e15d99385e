"""What a reader copies works: the Python blocks of every built page run, in page order,
in a fresh interpreter, as if pasted one after another into a notebook.

Blocks marked ``.excerpt`` (a function shown out of its module) are labelled as such on the
page and skipped here, as are the API reference's signatures; blocks of ``>>>`` lines are
run as doctests, so their shown output is checked too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from html.parser import HTMLParser

import pytest
from support import ROOT, html_pages


class CodeBlocks(HTMLParser):
    """Extract the text of each ``div.language-python.highlight`` block, as the copy button does."""

    def __init__(self):
        super().__init__()
        self.blocks: list[dict] = []
        self._depth = 0  # div nesting inside the current code block
        self._in_code = False
        self._current: dict | None = None

    def handle_starttag(self, tag, attrs):
        classes = (dict(attrs).get("class") or "").split()
        if self._current is not None:
            if tag == "div":
                self._depth += 1
            if tag == "code":
                self._in_code = True
            return
        if tag == "div" and "highlight" in classes and "language-python" in classes:
            # An excerpt (code out of its module) or an API signature is not a script.
            partial = "excerpt" in classes or "doc-signature" in classes
            self._current = {"excerpt": partial, "code": []}
            self._depth = 1

    def handle_endtag(self, tag):
        if self._current is None:
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


RUNNER = r'''
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
            if runner.failures:
                raise AssertionError(f"doctest block {number} failed")
        else:
            exec(compile(code, f"<block {number}>", "exec"), namespace)
    except BaseException as error:
        print(f"block {number} failed: {error!r}\n--- code ---\n{code}", file=sys.stderr)
        raise
'''


def page_blocks(built_site):
    for path in html_pages(built_site):
        parser = CodeBlocks()
        parser.feed(path.read_text(encoding="utf-8"))
        if parser.blocks:
            yield path.relative_to(built_site).as_posix(), parser.blocks


def test_every_python_block_on_every_page_runs_in_order(built_site, tmp_path):
    ran = skipped = 0
    failures = []
    env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONPATH": str(ROOT)}
    for page, blocks in page_blocks(built_site):
        runnable = [b["code"] for b in blocks if not b["excerpt"]]
        skipped += len(blocks) - len(runnable)
        if not runnable:
            continue
        done = subprocess.run([sys.executable, "-c", RUNNER], input=json.dumps(runnable),
                              capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
        if done.returncode:
            failures.append(f"{page}:\n{done.stderr[-3000:]}")
        ran += len(runnable)
    print(f"copy-paste: ran {ran} blocks, skipped {skipped} marked excerpts")
    assert ran > 0
    assert failures == [], "\n\n".join(failures)


def test_the_extractor_reads_code_as_the_copy_button_would():
    html = ('<div class="language-python highlight"><span class="filename">x.py</span><pre><span></span>'
            '<code><a id="l1" href="#l1"></a><span class="n">x</span> <span class="o">=</span> 1\n'
            '<a id="l2"></a>print(x &lt; 2)\n</code></pre></div>'
            '<div class="language-python excerpt highlight"><pre><code>def f(): ...</code></pre></div>')
    parser = CodeBlocks()
    parser.feed(html)
    assert parser.blocks == [{"excerpt": False, "code": "x = 1\nprint(x < 2)\n"},
                             {"excerpt": True, "code": "def f(): ..."}]
