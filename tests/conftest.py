"""Shared fixtures: one strict build of the site per test session, a local server for it,
and Playwright set up to drive the system's Chromium with no network."""

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
