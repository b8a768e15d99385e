"""Root pytest configuration: run the ``>>>`` examples inside the Markdown chapters, and
give tests what a page's executed blocks print.

Sybil collects fenced blocks whose info string is exactly ``python`` or ``pycon`` and that
start with ``>>>``, and checks their shown output, one test per page
(``docs/PAGE.md::examples``: pytest-xdist hands out tests, and two examples of one page given
to two workers would each miss what the other defined). Blocks shown with a ``title=`` are
left to the build and to tests/fast/test_snippets.py. A page that also executes blocks at
build time (``exec="on"``: the PyTorch tabs of the chapters, which use the arrays the
chapter's code made) is left to tests/site/test_copy_paste.py, which runs every block of
the built page in order, as a reader pasting them does, and checks the ``>>>`` blocks'
output there; running the page's code a third time here would check nothing more.

The ``page_output`` fixture gives tests what a page shows: the text each of its executed
blocks prints, as the build prints it. It is read from the build's artifact cache by the
build's own keys, and a block the cache lacks is run by the build's own runner into that
cache (:mod:`qkv_site.page_blocks`, the one finder and runner of a page's blocks), so the
build and the tests run a page's code once between them (tests/site/test_page_output.py
checks it against the built pages). Tests compare that text with facts they derive from
qkv's public API; no test reads a name a page's code defines.
"""

from __future__ import annotations

import dataclasses
import doctest
import fcntl
import importlib.util
import os
import pickle
from dataclasses import dataclass
from pathlib import Path

import pytest
from sybil import Document, Sybil
from sybil.evaluators.doctest import NUMBER
from sybil.evaluators.python import PythonEvaluator
from sybil.example import SybilFailure
from sybil.parsers.markdown import PythonCodeBlockParser, SkipParser
from sybil.parsers.markdown.codeblock import CodeBlockParser

ROOT = Path(__file__).resolve().parent
DOCS = ROOT / "docs"


class PyconParser(PythonCodeBlockParser):
    """``pycon`` fences (a console session: Pygments styles its prompts and output apart)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.codeblock_parser = CodeBlockParser("pycon", PythonEvaluator())


PARSERS = [
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
        from qkv_site.page_blocks import runs_blocks

        if runs_blocks(ROOT, self.path.name):
            return  # its examples build on its executed blocks: tests/site/test_copy_paste.py
        document = SYBIL.parse(self.path)
        if next(iter(document.examples()), None) is not None:
            yield PageExamples.from_parent(self, name="examples", document=document)


def pytest_collect_file(file_path: Path, parent):
    if SYBIL.should_parse(file_path):
        return MarkdownPage.from_parent(parent, path=file_path)
    return None


@pytest.fixture(scope="session", autouse=True)
def _tiny_model_for_doctests(doctest_namespace):
    """The examples in qkv.lab.patching's docstrings run on ``tiny_model``, the tests' tiny
    random SmolLM2-shaped model (tests/tiny_model.py): the test model lives with the tests,
    not in the package."""
    spec = importlib.util.spec_from_file_location("tiny_model", ROOT / "tests" / "tiny_model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    doctest_namespace["tiny_model"] = module.tiny_model


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

    # The readers below are how a test reads a value a page prints: by its label or its row's
    # first cells, whatever the spacing, the column widths or the words around the numbers,
    # so that a snippet can change how it lays a line out without breaking its tests.

    def values(self, section: str, label: str) -> list[float]:
        """The numbers on the one line of ``section`` that starts with ``label``, after it
        (thousands separators dropped): ``values("x.py:s", "row sums:")``."""
        from support import numbers  # tests/support.py: the one reader of printed numbers

        return numbers(self.line(section, label)[len(label) :], thousands=True)

    def flag(self, section: str, label: str) -> bool:
        """The True or False that ends the one line of ``section`` starting with ``label``."""
        last = self.line(section, label).split()[-1]
        if last not in ("True", "False"):
            raise ValueError(f"docs/{self.page}, {section}: the line {label!r}... ends with {last!r}")
        return last == "True"

    def row(self, section: str, *cells) -> list[float]:
        """The numbers after the first cells of the one table row of ``section`` whose first
        whitespace-separated words are ``cells`` (each cell may be several words), however
        wide the columns are printed: ``row("x.py:table", 64, "1.0")``."""
        from support import numbers

        want = [w for cell in cells for w in str(cell).split()]
        found = [ln.split() for ln in self[section].splitlines() if ln.split()[: len(want)] == want]
        if len(found) != 1:
            where = f"docs/{self.page}, {section}"
            raise KeyError(f"{where}: {len(found)} rows start with {want}:\n{self[section]}")
        return numbers(" ".join(found[0][len(want) :]), thousands=True)


@pytest.fixture(scope="session")
def rendered_page():
    """``rendered_page("coreference.md")``: the page as the site's Markdown extensions render
    it, its executed blocks not run (the code blocks it shows, as the build shows them), for
    tests that must not wait for the site's build."""
    from qkv_site.page_blocks import render_page

    return lambda name: render_page(ROOT, name)[0]


def run_page_blocks(name: str, cache: Path | None = None, snippet_python: str = "") -> PageOutput:
    """What the blocks ``docs/NAME`` executes printed, as the build prints them
    (:func:`qkv_site.artifacts.snippets.run_page`: read from the build's artifact cache by the
    build's own keys, and run into it only where it lacks an entry). ``cache``: another
    artifact cache (a build's of a copy of this tree); default: this tree's.
    ``snippet_python``: the blocks run in that Python, as that build runs them."""
    from qkv_site.artifacts.config import cache_dir
    from qkv_site.artifacts.snippets import run_page

    shown = run_page(ROOT, name, cache or cache_dir(ROOT), snippet_python)
    return PageOutput(name, [Shown(b.section, b.session, b.code, text) for b, text in shown])


@pytest.fixture(scope="session")
def run_folder(tmp_path_factory) -> Path:
    """The folder every pytest-xdist worker of this run shares (each has its own below it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def once_per_run(run_folder):
    """``once_per_run("name", compute)``: ``compute()``, run once per test run, not once per
    pytest-xdist worker (--dist worksteal splits a module's tests between the workers, and
    each worker would build the module's fixtures again).

    The first worker to ask for ``name`` runs ``compute`` and pickles its result into the
    folder the workers share; the others wait for it (a lock per name) and read it. For
    slow, deterministic computations (a page's run, the training sweep of chapter 6)."""
    shared = run_folder / "once-per-run"
    shared.mkdir(exist_ok=True)
    found = {}

    def get(name: str, compute):
        if name not in found:
            stored = shared / (name.replace("/", "--") + ".pickle")
            with open(stored.with_suffix(".lock"), "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
                if not stored.exists():
                    stored.write_bytes(pickle.dumps(compute()))
            found[name] = pickle.loads(stored.read_bytes())
        return found[name]

    return get


@pytest.fixture(scope="session")
def page_artifacts():
    """``page_artifacts(page)``: where page outputs are read from and run into
    (``support.PageSource``): by default this tree's cache, the blocks run as ``./dev build``
    runs them. tests/conftest.py overrides it for a run that builds the site: the cache of
    the build computing the pages, in the Python that build runs them in, so a page's code
    runs once between the build and the tests."""
    from support import PageSource

    return lambda page: PageSource(None, "")


@pytest.fixture(scope="session")
def printed_page():
    """``printed_page({"x.py:s": "text"})``: a :class:`PageOutput` of given printed texts, for
    the tests of its readers."""
    return lambda texts: PageOutput("page.md", [Shown(sec, None, "", text) for sec, text in texts.items()])


@pytest.fixture(scope="session")
def page_output(once_per_run, page_artifacts):
    """``page_output("traps.md")``: what the page's executed blocks print (:class:`PageOutput`).

    Once per run (``once_per_run``): read from the build's cache by :func:`run_page_blocks`,
    which runs what the cache lacks. The trained-model pages take 15 to 30 s to run when the
    cache lacks them."""

    def output(name: str) -> PageOutput:
        def run() -> list[dict]:
            source = page_artifacts(name)
            return [
                dataclasses.asdict(b)
                for b in run_page_blocks(name, source.cache, source.snippet_python).blocks
            ]

        # plain dicts: what conftest.py defines pickles by a module name pytest may reuse
        blocks = once_per_run(f"page-output-{name}", run)
        return PageOutput(name, [Shown(**block) for block in blocks])

    return output
