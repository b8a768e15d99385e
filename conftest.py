"""Root pytest configuration: run the ``>>>`` examples inside the Markdown chapters.

Sybil collects fenced blocks whose info string is exactly ``python`` and that start with
``>>>``; blocks run by markdown-exec (``exec="on"``) or shown with a ``title=`` are left
to the build and to tests/fast/test_snippets.py.
"""

import doctest

from sybil import Sybil
from sybil.evaluators.doctest import NUMBER
from sybil.parsers.markdown import PythonCodeBlockParser, SkipParser

pytest_collect_file = Sybil(
    parsers=[
        PythonCodeBlockParser(doctest_optionflags=doctest.NORMALIZE_WHITESPACE | NUMBER),
        SkipParser(),
    ],
    path="docs",
    patterns=["*.md", "**/*.md"],
).pytest()
