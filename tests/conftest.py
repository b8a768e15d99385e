"""Shared fixtures and the test tiers.

Tests live in three folders, and the folder is the tier (the markers follow from it):

- ``tests/fast/``     no site build, no browser (``./dev check`` runs these and the doctests)
- ``tests/site/``     needs the built site or builds one: marked ``build``
- ``tests/browser/``  opens pages in Chromium: marked ``browser`` and ``build``

The built site is made once per session (``built_site``) and served on a free port
(``site_url``); Playwright drives the system's Chromium with no network.
"""

from __future__ import annotations

import functools
import http.server
import threading
from pathlib import Path

import pytest
from support import CHROMIUM, CHROMIUM_ARGS, build_dist, build_site


@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> Path:
    """The site, built once per session with ``--strict``; a failed build fails every user."""
    out = tmp_path_factory.mktemp("site")
    done = build_site(out)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    return out


@pytest.fixture(scope="session")
def built_dist(tmp_path_factory) -> tuple[Path, Path]:
    """qkv's sdist and wheel, built once per session as a release builds them."""
    return build_dist(tmp_path_factory.mktemp("dist"))


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep test output readable
        pass


@pytest.fixture(scope="session")
def site_url(built_site) -> str:
    """Serve the built site on 127.0.0.1 and a free port; yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(built_site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
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


# ---- tiers ---------------------------------------------------------------------------------

TESTS = Path(__file__).resolve().parent
TIER_MARKS = {"fast": (), "site": ("build",), "browser": ("build", "browser")}
# Fixtures that need the built site, and the one (pytest-playwright's) that needs Chromium.
SITE_FIXTURES = {"built_site", "site_url"}
BROWSER_FIXTURES = {"browser", "context"}


def tier_of(path: Path) -> str | None:
    """The tier folder a test file sits in; None outside tests/ (doctests in qkv/, docs/)."""
    try:
        parts = path.resolve().relative_to(TESTS).parts
    except ValueError:
        return None
    return parts[0] if len(parts) > 1 else ""


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config, items):
    """Mark every test by its folder, and refuse a test whose needs contradict its folder."""
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
            wrong.append(f"{item.nodeid}: uses {sorted(needs & (SITE_FIXTURES | BROWSER_FIXTURES))}; "
                         "move it to tests/site or tests/browser")
        if tier != "browser" and needs & BROWSER_FIXTURES:
            wrong.append(f"{item.nodeid}: opens Chromium; move it to tests/browser")
        for name in ("build", "browser"):
            if item.get_closest_marker(name) and name not in TIER_MARKS[tier]:
                wrong.append(f"{item.nodeid}: marked {name!r} by hand; the folder decides the tier")
        for name in TIER_MARKS[tier]:
            item.add_marker(name)
    if wrong:
        raise pytest.UsageError("tests in the wrong tier:\n  " + "\n  ".join(wrong))
