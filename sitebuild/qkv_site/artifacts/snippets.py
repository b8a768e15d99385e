"""Page snippets: the output of every ``python exec="on"`` block, computed out of process.

The plugin registers the fence itself, as markdown-exec's own MkDocs plugin does (a custom
fence of pymdownx.superfences): markdown-exec still reads the block's options and formats
what it prints (its public ``validator`` and ``base_format``); only the running is done
here. The blocks of a session run in order in one worker process of their own
(:meth:`Runner.session_worker`), each block a job of :func:`qkv_site.artifacts.blocks.block`.

Each block's printed text is cached by its code and the state it starts from: the digest of
the names the earlier blocks of its session left and of NumPy's and ``random``'s global
state (:mod:`qkv_site.artifacts.blocks`), or, where that state cannot be hashed, all the
code run before it in its session on the page. An entry is reused while the files the
session had imported (``qkv``...) are unchanged and the libraries it imported, and the
trained model's packages (a block may read the model's file without importing them), keep
their versions. So editing one block reruns that block, and the later blocks of its session
only if the state it leaves changed (a comment or the wording of a print changes nothing
after it). Nothing of a block outlives a build, so no stale module or session can hide an
error.

A block that raises stops the build, naming the page, the block and its traceback.

MkDocs renders pages one after the other, and a page's blocks one after the other, so every
session would run in turn on one core, and the two chapters that run the trained model would
be most of a cold build's time in one chain. A page whose front matter says ``run_ahead:
true`` is read when a build starts (not at the rebuilds of ``mkdocs serve`` after its first
build, which render the page an edit touched): its blocks are found with the extensions that
decide where a block is and what it holds (:data:`BLOCK_EXTENSIONS`) and a fence that only
notes them, and each of its sessions starts in a thread of its own
(:meth:`Runner.background`), side by side with each other, the figures and the pages rendered
meanwhile. This only warms the cache: when the page reaches a session started ahead, it waits
for it (or cancels it if it had not begun) and then looks each block up by its key as always,
computing anything the start ahead missed or failed (and reporting that failure itself). A
block read differently ahead costs time, never a wrong page. Only pages that ask are read
ahead: an earlier version read every page, and the second Markdown parse of every page cost a
warm build more than it saved (issue 27).

The state digest was measured again (issue 27, a temporary switch, 2026-12-03, this 2-core
machine shared with other builds): ``benchmarks/serve_edits.py`` on why-scale (a ``print``
added to the first of its eleven blocks, best of 3) showed the edit in 17.0 s with it and
32.8 s without (both also redrew a figure that read the edited file), and 2.6 s with it once
that figure no longer did; a build with cold snippet caches (160 blocks) took 108 s of CPU
with it and 122 s without (that one also redrew a figure and the notebook): the digest
costs nothing measurable and saves the rerun of every later block of a session, so it stays.
"""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path

import markdown_exec
from mkdocs.exceptions import PluginError

from qkv_site.artifacts.blocks import OUTPUT, STATE
from qkv_site.artifacts.runner import ArtifactError, Job, Result, Runner
from qkv_site.artifacts.tasks import MODEL_PACKAGES
from qkv_site.page_blocks import BLOCK_EXTENSIONS, FENCES, Block, extensions_of, find_blocks, page_blocks
from qkv_site.site import front_matter

EMPTY_STATE = "empty"  # what the first block of a session, or a block without one, starts from


def block_job(
    source: str, state: str | None, earlier: list[str], code: str, environment: str | None = None
) -> Job:
    """The cache entry of a block: keyed by its code and the state it starts from (by all the
    code before it when that state is unknown), by the Python it runs in when that is a
    reader's (``environment``, :meth:`Runner.snippet_environment`), and, like every entry, by
    the files and library versions it reads; the trained model's packages count for every
    block (a block may read the model's file without importing them)."""
    key = {"state": state, "code": code} if state else {"blocks": [*earlier, code]}
    if environment is not None:
        key["reader"] = environment
    return Job("snippets", "qkv_site.artifacts.blocks:block", key, source, MODEL_PACKAGES)


class PageSession:
    """The blocks one markdown-exec session of the current page has run, and the state they
    left (the worker process that ran them is a :meth:`Runner.session_worker`)."""

    def __init__(self):
        self.blocks: list[str] = []
        self.state: str | None = EMPTY_STATE
        self.worker = None  # its worker process, once a block had to run
        self.worker_ran: list[str] = []  # the blocks that process has run

    def close(self):
        if self.worker is not None:
            self.worker.close()  # the worker goes back to the runner's pool
        self.worker, self.worker_ran = None, []


class Snippets:
    """The snippet kind: the ``python`` fence, run here.

    ``runner`` computes and caches each block; ``enabled`` False shows a line instead of
    running anything; ``serving``: under ``mkdocs serve`` the rebuilds after the first render
    only the pages an edit touched; ``used(folder)`` is told each block result a page used
    (the page-dependency kind records its inputs).
    """

    def __init__(self, runner: Runner, enabled: bool, serving: bool = False, used=lambda folder: None):
        self.runner, self.enabled, self.serving, self.used = runner, enabled, serving, used
        self.page = "?"
        self.sessions: dict[str, PageSession] = {}
        self.ahead: dict[tuple[str, str], Future] = {}  # (page, session) -> its start ahead
        self.rebuilding = False  # True after the first build of `mkdocs serve`

    def on_config(self, config):
        if "markdown-exec" in config.plugins:
            raise PluginError(
                "qkv-artifacts runs the python exec blocks itself: remove the "
                "markdown-exec plugin from mkdocs.yml"
            )
        fences = config.mdx_configs.setdefault("pymdownx.superfences", {}).setdefault("custom_fences", [])
        fences[:] = [f for f in fences if f.get("name") not in FENCES]
        for name in FENCES:
            fences.append(
                {"name": name, "class": name, "validator": markdown_exec.validator, "format": self.format}
            )
        markdown_exec.markdown_config.save(config.markdown_extensions, config.mdx_configs)

    def on_files(self, files, config):
        self._cancel_ahead()
        # not at a rebuild of `mkdocs serve`: it renders the page an edit touched, not the rest
        if self.enabled and not self.rebuilding:
            for file in files.documentation_pages():
                if not file.src_uri.endswith(".md") or b"run_ahead" not in file.content_bytes:
                    continue  # most pages: no YAML to read
                front, text = front_matter(file.content_string)
                if front.get("run_ahead") is True:
                    for name, blocks in self._blocks_of(text, config).items():
                        self.ahead[file.src_uri, name] = self.runner.background(
                            self._run_ahead, file.src_uri, name, blocks
                        )
        return files

    def on_page_markdown(self, markdown, page, config, files):
        self._close_sessions()  # sessions belong to one page
        self.page = page.file.src_uri
        return markdown

    def _blocks_of(self, text: str, config) -> dict[str, list[str]]:
        """The exec blocks of a page's Markdown by session, in page order, each as the fence
        will receive it (blocks without a session are left out)."""
        found: dict[str, list[str]] = {}
        names, settings = extensions_of(config.markdown_extensions, config.mdx_configs)
        _, blocks = find_blocks(text, names, settings, root=self.runner.root, only=BLOCK_EXTENSIONS)
        for code, session in blocks:
            if session:
                found.setdefault(session, []).append(code)
        return found

    def _run_ahead(self, page: str, name: str, blocks: list[str]) -> None:
        session = PageSession()
        try:
            for code in blocks:
                self._run_block(session, code, f"docs/{page} (session '{name}', run ahead)")
        finally:
            session.close()

    def _wait_for_ahead(self, session: str) -> None:
        """Its start ahead, finished, or cancelled if it had not begun."""
        future = self.ahead.pop((self.page, session), None)
        if future is not None and not future.cancel():
            future.exception()  # waits; a failure is found again, and reported, by this run

    def on_env(self, env, config, files):
        self._close_sessions()
        self._cancel_ahead()  # sessions of pages that were not rendered
        self.rebuilding = self.serving

    def on_shutdown(self):
        self._close_sessions()
        self._cancel_ahead()

    def _close_sessions(self):
        for session in self.sessions.values():
            session.close()
        self.sessions = {}

    def _cancel_ahead(self):
        for future in self.ahead.values():
            future.cancel()  # one already running finishes (Runner.close waits for it)
        self.ahead = {}

    def format(self, source, language, css_class, options, md, **kwargs):
        """The fence's formatter, for blocks the validator found ``exec="on"``: markdown-exec's
        own, with this kind's ``run``."""
        run = self.run if self.enabled else _not_run
        return markdown_exec.base_format(language="python", run=run, code=source, md=md, **options)

    def run(self, code: str, session=None, **_) -> str:
        if session:
            self._wait_for_ahead(session)
            current = self.sessions.setdefault(session, PageSession())
            where = f"docs/{self.page} (session '{session}', block {len(current.blocks) + 1})"
            return self._page_output(self._run_block(current, code, where))
        alone = PageSession()  # a block without a session starts from nothing, leaves nothing
        try:
            return self._page_output(self._run_block(alone, code, f"docs/{self.page} (a block)"))
        finally:
            alone.close()

    def _page_output(self, result) -> str:
        self.used(result.folder)
        return result.text(OUTPUT)

    def _run_block(self, session: PageSession, code: str, where: str):
        """Run (or find in the cache) the next block of ``session``; its Result."""
        earlier = list(session.blocks)
        job = block_job(where, session.state, earlier, code, self.runner.snippet_environment())

        def compute(job: Job, out: Path) -> None:
            if session.worker is None or session.worker_ran != earlier:
                session.close()  # what it ran is not what this block follows
                session.worker, session.worker_ran = self.runner.session_worker(), []
                for number, block in enumerate(earlier, start=1):  # for their state only
                    self._compute(session, block, number, out, job)
            self._compute(session, code, len(earlier) + 1, out, job)

        result = self.runner.run(job, compute=compute)
        session.blocks.append(code)
        session.state = result.text(STATE).strip() or None
        return result

    @staticmethod
    def _compute(session: PageSession, code: str, number: int, out: Path, job: Job) -> None:
        step = Job(job.kind, job.task, {"code": code, "number": number}, job.source, job.packages)
        try:
            session.worker.compute(step, out)
        except ArtifactError as error:
            raise ArtifactError(f"{error}\n\nThe block:\n{code}") from None
        session.worker_ran.append(code)


def _not_run(code: str, **_) -> str:
    return "(not run in this build: artifacts are disabled)\n"


def run_page(root: Path, page: str, cache: Path, snippet_python: str = "") -> list[tuple[Block, str]]:
    """Each block of ``docs/PAGE`` with the text it prints, as the build shows it: looked up
    in the artifact cache ``cache`` by the build's own keys, and run by the build's own
    snippet kind into that cache only where it holds no entry (the next build finds it; a
    build computing the same entry meanwhile is waited for, not repeated). ``snippet_python``:
    run them in that reader's Python, as a build with that setting does."""
    blocks = page_blocks(root, page)
    runner = Runner(Path(root), Path(cache), concurrency=1, snippet_python=snippet_python)
    snippets = Snippets(runner, enabled=True)
    snippets.page = page
    try:
        texts = [snippets.run(block.code, session=block.session) for block in blocks]
    finally:
        snippets.on_shutdown()
        runner.close()
    return list(zip(blocks, texts, strict=True))


def cached_page(
    root: Path, page: str, cache: Path, snippet_python: str = ""
) -> list[tuple[Block, Result | None]]:
    """Each block of ``docs/PAGE`` with its valid entry in ``cache``, or None where there is
    none, computing nothing: which of the page's blocks a build (with that
    ``snippet_python``) ran, keyed as it keys them. After a missing entry the state the rest
    of its session starts from is unknown, so they count as missing too."""
    runner = Runner(Path(root), Path(cache), concurrency=1, snippet_python=snippet_python)
    environment = runner.snippet_environment()
    sessions: dict[str | None, PageSession] = {}
    found = []
    try:
        for block in page_blocks(root, page):
            session = sessions.setdefault(block.session, PageSession()) if block.session else PageSession()
            result = None
            if session.state != _UNKNOWN:
                where = f"docs/{page} (session '{block.session}', block {len(session.blocks) + 1})"
                result = runner.cached(
                    block_job(where, session.state, session.blocks, block.code, environment)
                )
            session.blocks.append(block.code)
            session.state = _UNKNOWN if result is None else (result.text(STATE).strip() or None)
            found.append((block, result))
    finally:
        runner.close()
    return found


_UNKNOWN = "unknown"  # the state after a block whose entry is missing
