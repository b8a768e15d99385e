"""Root pytest configuration: run the ``>>>`` examples inside the Markdown chapters.

Sybil collects fenced blocks whose info string is exactly ``python`` or ``pycon`` and that
start with ``>>>``, and checks their shown output (this is how a page's PyTorch tabs are
checked: the docs build installs no torch, the test extra does). Blocks shown with a
``title=`` are left to the build and to tests/fast/test_snippets.py.

A ``>>>`` block may use what the page's earlier blocks defined, as a reader pasting the page
in order would. So on a page that has such a block, the blocks the build runs
(markdown-exec's ``exec="on"``, their ``--8<--`` lines resolved as pymdownx.snippets does)
run first, in page order, in the same namespace. The ``page_code`` fixture gives tests that
namespace for any page.
"""

from __future__ import annotations

import doctest
import functools
import re
from pathlib import Path

import markdown
import pytest
from sybil import Document, Lexeme, Region, Sybil
from sybil.evaluators.doctest import NUMBER
from sybil.evaluators.python import PythonEvaluator
from sybil.parsers.markdown import PythonCodeBlockParser, SkipParser
from sybil.parsers.markdown.codeblock import CodeBlockParser
from sybil.parsers.markdown.lexers import RawFencedCodeBlockLexer

ROOT = Path(__file__).resolve().parent
DOCS = ROOT / "docs"
# A ``>>>`` block in a python or pycon fence, possibly indented (inside a content tab).
_DOCTEST_FENCE = re.compile(r"^[ \t]*```(?:python|pycon)[ \t]*\n[ \t]*>>>", re.MULTILINE)


class PyconParser(PythonCodeBlockParser):
    """``pycon`` fences (a console session: Pygments styles its prompts and output apart)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.codeblock_parser = CodeBlockParser("pycon", PythonEvaluator())


class BuildBlockParser:
    """The blocks the build executes (``exec="on"``), run as plain code before a page's
    ``>>>`` blocks; only on pages that have one, since elsewhere the build already ran them."""

    lexer = RawFencedCodeBlockLexer(
        info_pattern=re.compile(r'python\b[^\n]*\bexec="(?:on|1|true)"[^\n]*$\n', re.MULTILINE))

    def __init__(self):
        self.evaluator = PythonEvaluator()

    @functools.cached_property
    def snippets(self):
        """pymdownx.snippets as mkdocs.yml configures it, to resolve ``--8<--`` lines."""
        md = markdown.Markdown(extensions=["pymdownx.snippets"], extension_configs={
            "pymdownx.snippets": {"base_path": [str(ROOT / "snippets"), str(ROOT)],
                                  "check_paths": True, "dedent_subsections": True}})
        return md.preprocessors["snippet"]

    def __call__(self, document: Document):
        if not _DOCTEST_FENCE.search(document.text):
            return
        for region in self.lexer(document):
            source = region.lexemes["source"]
            code = "\n".join(self.snippets.run(source.splitlines())) + "\n"
            yield Region(region.start, region.end,
                         Lexeme(code, source.offset, source.line_offset), self.evaluator)


PARSERS = [
    BuildBlockParser(),
    PythonCodeBlockParser(doctest_optionflags=doctest.NORMALIZE_WHITESPACE | NUMBER),
    PyconParser(doctest_optionflags=doctest.NORMALIZE_WHITESPACE | NUMBER),
    SkipParser(),
]

pytest_collect_file = Sybil(parsers=PARSERS, path="docs", patterns=["*.md", "**/*.md"]).pytest()


EXERCISES = "\n## Exercises"


@functools.cache
def _run_page(name: str, exercises: bool = False) -> dict:
    """Run a page's code in order, as the Sybil tests do; return the resulting namespace.

    Without ``exercises`` it stops at the page's Exercises section, whose solutions may reuse
    names such as ``X`` or ``cross`` for their own small examples."""
    document = Document.parse(str(DOCS / name), *PARSERS)
    end = -1 if exercises else document.text.find(EXERCISES)
    for example in document:
        if end != -1 and example.start > end:
            break
        example.evaluate()
    return document.namespace


@pytest.fixture(scope="session")
def page_code():
    """``page_code("traps.md")``: the names a page's code defines once run in page order
    (the build's blocks and the ``>>>`` blocks), so a test checks the objects the page shows."""
    return _run_page
