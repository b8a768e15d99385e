"""Shared fixtures and the test tiers.

Tests live in three folders, and the folder is the tier (the markers follow from it):

- ``tests/fast/``     no site build, no browser (``./dev check`` runs these and the doctests)
- ``tests/site/``     needs the built site or builds one: marked ``build``
- ``tests/browser/``  opens pages in Chromium: marked ``browser`` and ``build``

Within tests/fast, the tests that run the trained model are marked ``model``: by their module
(``pytestmark``), by their parameters (tests/fast/test_snippets.py), or here, for any test that
asks for the ``model`` fixture. They hold most of the fast tier's time, so the
quick loop (``./dev check``) leaves them to ``./dev test`` (``./dev check -m model`` runs them
alone), and CI runs them on every push with everything else.

The site is built once per run (``built_site``), in the background from the start of the
run, while the fast tests run first; every pytest-xdist worker shares that one build
(tests/background_build.py). ``clean_site`` is a second build, of a snapshot of the tree with
an empty cache, for the one test whose point is that a clean build gives the same bytes (when
the tree's own cache is empty, the run's build starts from the clean build's cache instead of
computing everything a second time). The
built site is served on a free port (``site_url``); Playwright drives the system's Chromium
with no network.
"""

from __future__ import annotations

import functools
import http.server
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from background_build import BackgroundBuild
from checkout import clean_env, copy_project
from hypothesis import HealthCheck, settings
from qkv_site.artifacts.config import cache_dir
from qkv_site.artifacts.runner import ONE_THREAD
from reader import shared_reader_python
from support import (
    CHROMIUM,
    CHROMIUM_ARGS,
    PUBLISHED_PATH,
    PUBLISHED_URL,
    ROOT,
    PageSource,
    QuietHTTPServer,
    build_dist,
    last_commit_time,
    runs_ahead,
    watch_offline_and_quiet,
)


class _Builds:
    """The run's two background builds: what each builds, and with which environment. Both
    run the pages' code in the run's reader's environment (tests/reader.py), so a page's
    blocks are computed once, where a reader runs them (tests/site/test_copy_paste.py)."""

    def __init__(self, run: Path):
        self.run = run
        self.reader = ""  # the reader's python, once a build needs it
        self.epoch = last_commit_time()
        self.session = BackgroundBuild(run / "session-build")
        self.clean = BackgroundBuild(run / "clean-build")
        self.clean_tree = run / "clean-build" / "qkv"
        self.tree_cache = cache_dir(ROOT)
        # the build that computes the pages' artifacts in this run, and its cache (None: none)
        self.computing: tuple[BackgroundBuild, object, Path] | None = None

    def session_recipe(self):
        # this tree and its artifact cache (.cache/artifacts), dated by the last commit, as
        # published
        env = {**os.environ, "SOURCE_DATE_EPOCH": self.epoch, "QKV_SITE_URL": PUBLISHED_URL}
        return ROOT, {**env, "QKV_SNIPPET_PYTHON": self.reader_python()}

    def clean_recipe(self):
        # a snapshot of the tree (what a clone plus uncommitted work holds): no cache at all
        copy_project(self.clean_tree)
        paths = os.pathsep.join([str(self.clean_tree), str(self.clean_tree / "sitebuild")])
        return self.clean_tree, clean_env(
            PYTHONPATH=paths,
            SOURCE_DATE_EPOCH=self.epoch,
            QKV_SITE_URL=PUBLISHED_URL,
            QKV_SNIPPET_PYTHON=self.reader_python(),
        )

    def reader_python(self) -> str:
        if not self.reader:
            self.reader = str(shared_reader_python(self.run))
        return self.reader


@pytest.fixture(scope="session")
def builds(run_folder) -> _Builds:
    return _Builds(run_folder)  # run_folder: the root conftest.py


@pytest.fixture(scope="session", autouse=True)
def start_builds_early(request, builds, run_folder):
    """Start the builds the selected tests need as soon as the run begins, and transformers'
    reference (a minute of loading) if a test asks for it."""
    needed = set().union(*(getattr(item, "fixturenames", ()) for item in request.session.items))
    if "transformers" in needed:
        start_once(
            run_folder / "transformers-started", [sys.executable, str(TESTS / "transformers_reference.py")]
        )
    if "clean_site" in needed:
        builds.clean.start(builds.clean_recipe)
    if "built_site" in needed:
        # With an empty cache (a fresh clone, CI) both builds would compute everything, and
        # the comparison would never meet a cached build: the run's build then waits for the
        # clean one and starts from its cache, so a build without a cache is compared with
        # one that reads it.
        cache = builds.tree_cache
        if "clean_site" in needed and not (cache.is_dir() and any(cache.iterdir())):
            after = (builds.clean, builds.clean_tree / ".cache" / "artifacts", cache)
            builds.session.start(builds.session_recipe, after=after)
            builds.computing = (builds.clean, builds.clean_recipe, after[1])
        else:
            builds.session.start(builds.session_recipe)
            builds.computing = (builds.session, builds.session_recipe, cache)


@pytest.fixture(scope="session")
def page_artifacts(builds):
    """The root conftest's ``page_artifacts``, for a run that builds the site: a page's blocks
    are read from the cache of the build computing them, as that build keys them (in the
    reader's Python), and the blocks it has not reached yet are computed into that cache now,
    under the entry locks the build takes too, so each is computed once. Only for a page the
    build runs ahead (``run_ahead: true``: the trained-model pages, whose blocks it starts
    first and runs for minutes) is the build waited for, instead of racing it block by block.
    """

    def source(page: str) -> PageSource:
        if builds.computing is None:
            return PageSource(None, "")
        build, recipe, artifacts = builds.computing
        if runs_ahead(page):
            build.wait_until_ended(recipe)
        return PageSource(artifacts, builds.reader_python())

    return source


@pytest.fixture(scope="session")
def computed_cache(builds) -> Path:
    """The artifact cache of the build that computes this run's pages, once it has ended
    (the tree's own cache when no build computes them)."""
    if builds.computing is None:
        return builds.tree_cache
    build, recipe, artifacts = builds.computing
    build.wait_until_ended(recipe)
    return artifacts


@pytest.fixture(scope="session")
def built_site(builds) -> Path:
    """The site built from this tree with ``--strict``, once per run; a failed build fails
    every test that uses it."""
    return builds.session.wait(builds.session_recipe)


@pytest.fixture(scope="session")
def clean_site(builds) -> Path:
    """The site built from a snapshot of this tree with an empty artifact cache."""
    return builds.clean.wait(builds.clean_recipe)


@pytest.fixture(scope="session")
def collected_ids(request) -> set[str]:
    """The node id of every test this run collected (deselected ones included)."""
    return request.config.stash[COLLECTED]


@pytest.fixture(scope="session")
def transformers():
    """transformers' answers to tests/transformers_reference.py's ``INPUTS`` (kept on disk;
    the run starts computing them at once, in the background, when a test asks for them)."""
    from transformers_reference import INPUTS, reference

    return reference(INPUTS)


@pytest.fixture(scope="session")
def model():
    """SmolLM2-135M-Instruct (``qkv.smollm2.load()``), loaded once per worker."""
    from qkv import smollm2

    return smollm2.load()


@pytest.fixture(scope="session")
def reader_python(run_folder) -> Path:
    """The run's reader's environment (tests/reader.py): the built wheel and what a reader
    installs with it; its python."""
    return shared_reader_python(run_folder)


@pytest.fixture(scope="session")
def built_dist(tmp_path_factory) -> tuple[Path, Path]:
    """qkv's sdist and wheel, built once per session as a release builds them."""
    return build_dist(tmp_path_factory.mktemp("dist"))


class _SiteHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the site below PUBLISHED_PATH, as the publishing host does; 404 elsewhere."""

    def translate_path(self, path):
        if not path.startswith(PUBLISHED_PATH):
            return str(Path(self.directory) / "not-below-the-site-path")
        return super().translate_path("/" + path[len(PUBLISHED_PATH) :])

    def log_message(self, *args):  # keep test output readable
        pass


@pytest.fixture(scope="session")
def site_url(built_site) -> str:
    """Serve the built site on 127.0.0.1, a free port and the published path; yields its URL."""
    handler = functools.partial(_SiteHandler, directory=str(built_site))
    server = QuietHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}{PUBLISHED_PATH}"
    server.shutdown()


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    """Drive Debian's Chromium (browser downloads are not possible here)."""
    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"Chromium not found at {CHROMIUM}. Install it with `apt-get install -y chromium` "
            f"(the README's test command does this when run as root) or set QKV_CHROMIUM."
        )
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROMIUM_ARGS}


@pytest.fixture(scope="session")
def base_url():
    """No base URL: tests open ``site_url`` and its paths. This replaces pytest-playwright's
    own ``base_url`` fixture, which pytest 9 warns about (a session fixture written as a
    method) in every run that opens a browser."""
    return None


@pytest.fixture(scope="module")
def context(browser, browser_context_args):
    """One browser context per test module, not per test (pytest-playwright's default):
    making one took a quarter of a second, for each of a hundred browser tests. Each test
    still gets a page of its own (``page``), and what it stored is cleared after it."""
    shared = browser.new_context(**browser_context_args)
    yield shared
    shared.close()


@pytest.fixture
def page(context):
    """A new page in the module's context; its site's local storage is cleared after the
    test (Material keeps the reader's choices there)."""
    page = context.new_page()
    yield page
    if page.url.startswith("http"):
        page.evaluate("() => { localStorage.clear(); sessionStorage.clear(); }")
    page.close()


@pytest.fixture
def offline_and_quiet(page):
    """A test's page sends no request beyond 127.0.0.1 and logs no error (a module asks for
    it with ``pytestmark = pytest.mark.usefixtures("offline_and_quiet")``)."""
    outside, errors = watch_offline_and_quiet(page)
    yield
    assert outside == [], f"requests left 127.0.0.1: {outside}"
    assert errors == [], errors


def start_once(marker: Path, argv: list[str]) -> None:
    """Start ``argv`` in the background unless a worker of this run has (``marker``)."""
    try:
        marker.touch(exist_ok=False)
    except FileExistsError:
        return
    subprocess.Popen(
        argv, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


# ---- tiers ---------------------------------------------------------------------------------

TESTS = Path(__file__).resolve().parent
TIER_MARKS = {"fast": (), "site": ("build",), "browser": ("build", "browser")}
# Fixtures that need the built site, and the one (pytest-playwright's) that needs Chromium.
SITE_FIXTURES = {"built_site", "clean_site", "site_url"}
BROWSER_FIXTURES = {"browser", "context"}
MODEL_FIXTURE = "model"  # the trained model: a test that asks for it, directly or not, is marked model


def tier_of(path: Path) -> str | None:
    """The tier folder a test file sits in; None outside tests/ (doctests in qkv/, docs/)."""
    try:
        parts = path.resolve().relative_to(TESTS).parts
    except ValueError:
        return None
    return parts[0] if len(parts) > 1 else ""


COLLECTED = pytest.StashKey[set]()  # node ids of every test collected, before -m or -k


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config, items):
    """Mark every test by its folder, and refuse a test whose needs contradict its folder."""
    config.stash[COLLECTED] = {item.nodeid for item in items}
    wrong = []
    for item in items:
        tier = tier_of(item.path)
        if tier is None:
            continue
        if tier not in TIER_MARKS:
            wrong.append(f"{item.nodeid}: test files go in tests/fast, tests/site or tests/browser")
            continue
        needs = set(getattr(item, "fixturenames", ()))
        if tier == "fast" and needs & (SITE_FIXTURES | BROWSER_FIXTURES):
            wrong.append(
                f"{item.nodeid}: uses {sorted(needs & (SITE_FIXTURES | BROWSER_FIXTURES))}; "
                "move it to tests/site or tests/browser"
            )
        if tier != "browser" and needs & BROWSER_FIXTURES:
            wrong.append(f"{item.nodeid}: opens Chromium; move it to tests/browser")
        for name in ("build", "browser"):
            if item.get_closest_marker(name) and name not in TIER_MARKS[tier]:
                wrong.append(f"{item.nodeid}: marked {name!r} by hand; the folder decides the tier")
        for name in TIER_MARKS[tier]:
            item.add_marker(name)
        if MODEL_FIXTURE in needs and not item.get_closest_marker("model"):
            item.add_marker("model")  # fixturenames is the whole closure: indirect use counts
    if wrong:
        raise pytest.UsageError("tests in the wrong tier:\n  " + "\n  ".join(wrong))


class _TierOrder:
    """Fast tests (and the doctests) first, then the site's, then the browser's, so the site
    builds in the background while the fast tests run (pytest-xdist hands tests out in this
    order). Before them all, the tests marked ``first``: long chains of work that need not
    wait for the build (the copy-paste run of the trained-model pages). Last of all hooks:
    pytest groups tests by their parametrized fixtures before."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items):
        rank = {"fast": 0, None: 1, "site": 2, "browser": 3}
        items.sort(
            key=lambda item: -1 if item.get_closest_marker("first") else rank.get(tier_of(item.path), 1)
        )


# One BLAS/OpenMP thread in every process of the run: pytest-xdist already runs one worker
# per core, and the processes they start (site builds, snippet scripts, the reader's
# copy-paste interpreter, torch) would each start a thread per core. Their matrices are small,
# and on a busy machine spinning BLAS threads made the same work 3 to 6 times slower (the
# copy-paste test: 42 s alone, 240 s inside the suite). Set here, before any test process
# loads NumPy, so the workers and everything they start inherit it; a value set by hand wins.
# The variables are the ones the build gives its workers (qkv_site.artifacts.runner).
def pytest_configure(config):
    for name in ONE_THREAD:
        os.environ.setdefault(name, "1")
    config.pluginmanager.register(_TierOrder(), "qkv-tier-order")


# Hypothesis's too_slow health check fails a test when drawing its inputs takes over a second,
# which on a busy 2-core machine happened to plain st.integers (5 draws in 1.06 s): a failure
# of the machine's load, not of the code. Every other health check stays on.
settings.register_profile("qkv", suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("qkv")
