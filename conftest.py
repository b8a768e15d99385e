"""Root pytest configuration: run the ``>>>`` examples inside the Markdown chapters.

Sybil collects fenced blocks whose info string is exactly ``python`` or ``pycon`` and that
start with ``>>>``, and checks their shown output (this is how a page's PyTorch tabs are
checked: the docs build installs no torch, the test extra does). Blocks shown with a
``title=`` are left to the build and to tests/fast/test_snippets.py.

A ``>>>`` block may use what the page's earlier blocks defined, as a reader pasting the page
in order would. So on a page that has such a block, the blocks the build runs
(markdown-exec's ``exec="on"``, their ``--8<--`` lines resolved as pymdownx.snippets does)
run first, in page order, in the same namespace. Because they share one namespace, a page's
examples are one test (``docs/PAGE.md::examples``), not one test each as Sybil's own pytest
plugin makes them: pytest-xdist hands out tests, and two examples of one page given to two
workers would each miss what the other defined.

The ``page_output`` fixture gives tests what a page shows: the text each of its executed
blocks prints, as the build prints it (tests/site/test_page_output.py checks it against the
built pages). Tests compare that text with facts they derive from qkv's public API; no test
reads a name a page's code defines.
"""

from __future__ import annotations

import dataclasses
import doctest
import fcntl
import functools
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import markdown
import pytest
from sybil import Document, Lexeme, Region, Sybil
from sybil.evaluators.doctest import NUMBER
from sybil.evaluators.python import PythonEvaluator
from sybil.example import SybilFailure
from sybil.parsers.markdown import PythonCodeBlockParser, SkipParser
from sybil.parsers.markdown.codeblock import CodeBlockParser
from sybil.parsers.markdown.lexers import RawFencedCodeBlockLexer

ROOT = Path(__file__).resolve().parent
DOCS = ROOT / "docs"
# A fence of four or more backticks: a page showing how a block is written, not running it.
_EXAMPLE_FENCE = re.compile(r"^([ \t]*)(`{4,})[^\n]*\n.*?^\1\2[ \t]*$", re.M | re.S)
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
        info_pattern=re.compile(r'python\b[^\n]*\bexec="(?:on|1|true)"[^\n]*$\n', re.MULTILINE)
    )

    def __init__(self):
        self.evaluator = PythonEvaluator()

    @functools.cached_property
    def snippets(self):
        """pymdownx.snippets as mkdocs.yml configures it, to resolve ``--8<--`` lines."""
        md = markdown.Markdown(
            extensions=["pymdownx.snippets"],
            extension_configs={
                "pymdownx.snippets": {
                    "base_path": [str(ROOT / "snippets"), str(ROOT)],
                    "check_paths": True,
                    "dedent_subsections": True,
                }
            },
        )
        return md.preprocessors["snippet"]

    def regions(self, document: Document):
        """The blocks the build runs: not those shown as examples inside a longer fence
        (````markdown ... ````), whose ``;--8<--`` lines are text, not includes."""
        examples = [m.span() for m in _EXAMPLE_FENCE.finditer(document.text)]
        for region in self.lexer(document):
            if not any(start < region.start < end for start, end in examples):
                yield region

    def __call__(self, document: Document):
        if not _DOCTEST_FENCE.search(document.text):
            return
        for region in self.regions(document):
            source = region.lexemes["source"]
            code = "\n".join(self.snippets.run(source.splitlines())) + "\n"
            yield Region(
                region.start, region.end, Lexeme(code, source.offset, source.line_offset), self.evaluator
            )


PARSERS = [
    BuildBlockParser(),
    PythonCodeBlockParser(doctest_optionflags=doctest.NORMALIZE_WHITESPACE | NUMBER),
    PyconParser(doctest_optionflags=doctest.NORMALIZE_WHITESPACE | NUMBER),
    SkipParser(),
]

SYBIL = Sybil(parsers=PARSERS, path="docs", patterns=["*.md", "**/*.md"])


class PageExamples(pytest.Item):
    """Every example of one page, evaluated in page order in the page's one namespace."""

    def __init__(self, *, document: Document, **kwargs):
        super().__init__(**kwargs)
        self.document = document

    def runtest(self):
        for example in self.document.examples():
            example.evaluate()  # SybilFailure (an AssertionError) names the example's line

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, SybilFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.path, 0, f"{self.path.name}: its examples, in order"


class MarkdownPage(pytest.File):
    def collect(self):
        document = SYBIL.parse(self.path)
        if next(iter(document.examples()), None) is not None:
            yield PageExamples.from_parent(self, name="examples", document=document)


def pytest_collect_file(file_path: Path, parent):
    if SYBIL.should_parse(file_path):
        return MarkdownPage.from_parent(parent, path=file_path)
    return None


# ---- what a page shows ----------------------------------------------------------------------


@dataclass(frozen=True)
class Shown:
    """One block the build runs on a page (``exec="on"``) and the text it printed there."""

    section: str | None  # "traps.py:same_vector" when the block is one --8<-- include
    session: str | None  # markdown-exec's session="..."; blocks of a session share names
    code: str
    text: str  # what the page shows under the block


class PageOutput:
    """What a page's executed blocks print, as the build shows it, block by block.

    ``shown["traps.py:same_vector"]`` is the text printed under the block that runs that
    snippet section (a KeyError lists the page's sections); ``shown.blocks`` lists them all.
    Tests compare this text, what a reader sees, with facts they derive themselves from
    qkv's public API, instead of reading the names a snippet defines.
    """

    def __init__(self, page: str, blocks: list[Shown]):
        self.page, self.blocks = page, blocks

    def __getitem__(self, section: str) -> str:
        found = [b.text for b in self.blocks if b.section == section]
        if len(found) != 1:
            sections = sorted({b.section for b in self.blocks if b.section})
            raise KeyError(
                f"docs/{self.page} runs {len(found)} blocks of {section!r}; it runs "
                f"these sections: {', '.join(sections)}"
            )
        return found[0]

    def line(self, section: str, start: str) -> str:
        """The one line printed by ``section`` that starts with ``start`` (stripped)."""
        lines = [ln.strip() for ln in self[section].splitlines() if ln.strip().startswith(start)]
        if len(lines) != 1:
            raise KeyError(
                f"docs/{self.page}, {section}: {len(lines)} printed lines start with "
                f"{start!r}:\n{self[section]}"
            )
        return lines[0]


_INCLUDE = re.compile(r'^\s*--8<--\s+"(?:snippets/)?([^"]+)"\s*$')
_SESSION = re.compile(r'\bsession="([^"]*)"')


def run_page_blocks(name: str) -> PageOutput:
    """Run the blocks ``docs/NAME`` executes at build time, in page order, each session in
    its own namespace (a block without a session in a fresh one), printing captured as the
    build captures it (:func:`qkv_site.artifacts.session.run_block`)."""
    from qkv_site.artifacts.session import run_block

    document = Document.parse(str(DOCS / name), *PARSERS)
    parser = PARSERS[0]
    namespaces: dict[str, dict] = {}
    blocks = []
    for number, region in enumerate(parser.regions(document), start=1):
        info = document.text[region.start : document.text.index("\n", region.start)]
        session = (m.group(1) if (m := _SESSION.search(info)) else None) or None
        source = region.lexemes["source"]
        lines = [line for line in source.splitlines() if line.strip()]
        section = m.group(1) if len(lines) == 1 and (m := _INCLUDE.match(lines[0])) else None
        code = "\n".join(parser.snippets.run(source.splitlines())) + "\n"
        namespace = namespaces.setdefault(session, {}) if session else {}
        namespace.setdefault("__name__", "__snippet__")
        blocks.append(Shown(section, session, code, run_block(namespace, number, code)))
    return PageOutput(name, blocks)


@pytest.fixture(scope="session")
def run_folder(tmp_path_factory) -> Path:
    """The folder every pytest-xdist worker of this run shares (each has its own below it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def page_output(run_folder):
    """``page_output("traps.md")``: what the page's executed blocks print (:class:`PageOutput`).

    Once per run, not once per pytest-xdist worker: the first worker to ask for a page runs
    it and writes what it printed to the folder the workers share; the others wait for it
    (a lock per page) and read it. The trained-model pages take 15 to 30 s to run."""
    shared = run_folder / "page-output"
    shared.mkdir(exist_ok=True)

    @functools.cache
    def output(name: str) -> PageOutput:
        stored = shared / (name.replace("/", "--") + ".json")
        with open(stored.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            if not stored.exists():
                blocks = [dataclasses.asdict(block) for block in run_page_blocks(name).blocks]
                stored.write_text(json.dumps(blocks), encoding="utf-8")
        return PageOutput(name, [Shown(**block) for block in json.loads(stored.read_text("utf-8"))])

    return output
