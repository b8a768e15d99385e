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
cache (:func:`run_page_blocks`), so the build and the tests run a page's code once between
them (tests/site/test_page_output.py checks it against the built pages). Tests compare that
text with facts they derive from qkv's public API; no test reads a name a page's code
defines.
"""

from __future__ import annotations

import dataclasses
import doctest
import fcntl
import functools
import importlib.util
import os
import pickle
import re
from dataclasses import dataclass
from pathlib import Path

import markdown
import pytest
from sybil import Document, Sybil
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


class ExecBlocks:
    """Where the blocks the build executes (``exec="on"``) are in a page's text."""

    lexer = RawFencedCodeBlockLexer(
        info_pattern=re.compile(r'python\b[^\n]*\bexec="(?:on|1|true)"[^\n]*$\n', re.MULTILINE)
    )

    def regions(self, document: Document):
        """The blocks the build runs: not those shown as examples inside a longer fence
        (````markdown ... ````), whose ``;--8<--`` lines are text, not includes."""
        examples = [m.span() for m in _EXAMPLE_FENCE.finditer(document.text)]
        for region in self.lexer(document):
            if not any(start < region.start < end for start, end in examples):
                yield region


BUILD_BLOCKS = ExecBlocks()

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
        document = SYBIL.parse(self.path)
        if any(BUILD_BLOCKS.regions(document)):
            return  # its examples build on its executed blocks: tests/site/test_copy_paste.py
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


_INCLUDE = re.compile(r'^\s*--8<--\s+"(?:snippets/)?([^"]+)"\s*$')
_SESSION = re.compile(r'\bsession="([^"]*)"')


@functools.cache
def _site_markdown() -> tuple[list, dict]:
    """mkdocs.yml's Markdown extensions and their settings, with the ``python`` fence of the
    build (markdown-exec's validator) recording the blocks it would run instead of running
    them, so a page's blocks are found and written exactly as the build hands them over."""
    import markdown_exec
    import yaml

    loader = type("Loader", (yaml.SafeLoader,), {})
    loader.add_constructor("!ENV", lambda *_: None)
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=loader)
    names, settings = [], {}
    for entry in config["markdown_extensions"]:
        name, options = next(iter(entry.items())) if isinstance(entry, dict) else (entry, {})
        names.append(name)
        settings[name] = dict(options or {})
    settings["pymdownx.snippets"]["base_path"] = [str(ROOT / "snippets"), str(ROOT)]

    def record(source, language, css_class, options, md, **kwargs):
        def run(code, session=None, **_):
            md.qkv_blocks.append((code, session or None))
            return ""

        return markdown_exec.base_format(language="python", run=run, code=source, md=md, **options)

    fence = {"validator": markdown_exec.validator, "format": record}
    settings["pymdownx.superfences"] = {
        **settings.get("pymdownx.superfences", {}),
        "custom_fences": [{"name": n, "class": n, **fence} for n in ("python", "py")],
    }
    return names, settings


def _convert(name: str) -> tuple[str, list[tuple[str, str | None]]]:
    """``docs/NAME`` converted by the site's Markdown extensions alone (no MkDocs, no theme),
    the build's exec blocks recorded, not run: the HTML and those blocks."""
    from mkdocs.utils import meta

    names, settings = _site_markdown()
    md = markdown.Markdown(extensions=names, extension_configs=settings)
    md.qkv_blocks = []
    html = md.convert(meta.get_data((DOCS / name).read_text(encoding="utf-8"))[0])
    return html, md.qkv_blocks


def build_blocks(name: str) -> list[tuple[str, str | None]]:
    """The code of every block the build runs on ``docs/NAME`` (``exec="on"``), in page
    order, as the build's fence receives it, with its session (None: a block alone)."""
    return _convert(name)[1]


def page_html(name: str) -> str:
    """``docs/NAME`` as the site's Markdown extensions render it, its executed blocks not
    run: the code blocks it shows, as the build shows them."""
    return _convert(name)[0]


@pytest.fixture(scope="session")
def rendered_page():
    """``rendered_page("coreference.md")``: :func:`page_html`, for tests that must not wait
    for the site's build."""
    return page_html


def run_page_blocks(name: str, cache: Path | None = None) -> PageOutput:
    """What the blocks ``docs/NAME`` executes printed, as the build prints them: each block
    is looked up in the build's artifact cache (the tree's ``.cache/artifacts``, or
    ``QKV_CACHE``) by the build's own key, and only a block the cache does not hold is run,
    by the build's own snippet runner (:mod:`qkv_site.artifacts.snippets`) into that cache,
    where the next build finds it. So a page's code runs once for the build and these tests,
    not once for each. ``cache``: another artifact cache (a build's of a copy of this tree)."""
    from types import SimpleNamespace

    from qkv_site.artifacts.runner import Runner
    from qkv_site.artifacts.snippets import Snippets

    document = Document.parse(str(DOCS / name))
    raw = []  # (section, session) of each block, from the page's own text
    for region in BUILD_BLOCKS.regions(document):
        info = document.text[region.start : document.text.index("\n", region.start)]
        session = (m.group(1) if (m := _SESSION.search(info)) else None) or None
        lines = [line for line in region.lexemes["source"].splitlines() if line.strip()]
        section = m.group(1) if len(lines) == 1 and (m := _INCLUDE.match(lines[0])) else None
        raw.append((section, session))
    built = build_blocks(name)
    if [session for _, session in raw] != [session for _, session in built]:
        raise AssertionError(f"docs/{name}: the page's exec blocks {raw} are not the build's {built}")
    if cache is None:
        cache = ROOT / os.environ.get("QKV_CACHE", ".cache/artifacts")  # mkdocs.yml's cache_dir
    runner = Runner(ROOT, cache, concurrency=1)
    plugin = SimpleNamespace(
        runner=runner, config=SimpleNamespace(enabled=True), page_inputs=SimpleNamespace(used=lambda _: None)
    )
    snippets = Snippets(plugin)
    snippets.page = name
    try:
        texts = [snippets.run(code, session=session) for code, session in built]
    finally:
        snippets.on_shutdown()
        runner.close()
    return PageOutput(
        name,
        [
            Shown(section, session, code, text)
            for (section, _), (code, session), text in zip(raw, built, texts, strict=True)
        ],
    )


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
    """``page_artifacts()``: the artifact cache page outputs are read from (None: the tree's).
    tests/conftest.py overrides it: in a run that builds the site, it waits for the build that
    computes the pages and gives its cache, so a page's code is not run again beside it."""
    return lambda: None


@pytest.fixture(scope="session")
def page_output(once_per_run, page_artifacts):
    """``page_output("traps.md")``: what the page's executed blocks print (:class:`PageOutput`).

    Once per run (``once_per_run``): read from the build's cache by :func:`run_page_blocks`,
    which runs what the cache lacks. The trained-model pages take 15 to 30 s to run when the
    cache lacks them."""

    def output(name: str) -> PageOutput:
        # plain dicts: what conftest.py defines pickles by a module name pytest may reuse
        blocks = once_per_run(
            f"page-output-{name}",
            lambda: [dataclasses.asdict(b) for b in run_page_blocks(name, page_artifacts()).blocks],
        )
        return PageOutput(name, [Shown(**block) for block in blocks])

    return output
