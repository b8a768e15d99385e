"""Every shell command on the Contributing page (docs/contributing.md) runs.

The commands run in page order in a temporary copy of the repository (tests/checkout.py),
whose ``.venv`` borrows the installed packages, so nothing they write touches this tree.
Two cannot run as written inside a test, and the page says so:

- ``./dev serve`` never exits: it must answer on http://127.0.0.1:8000, then it is stopped;
- ``./dev test`` would run this test again, forever: it runs as ``./dev test --collect-only
  -q``, which does the same set-up and collects every test.
"""

from __future__ import annotations

import re
import socket
import subprocess
import time
import urllib.request

import pytest
from checkout import borrow_environment, clean_env, copy_project, start, stop, tail
from support import ROOT

PAGE = ROOT / "docs" / "contributing.md"
SERVER = "./dev serve"
# the suite cannot run itself; ./dev check's tests run in this session already
INSTEAD = {"./dev test": "./dev test --collect-only -q", "./dev check": "./dev check --collect-only -q"}
# The copy shares this tree's artifact cache: the commands are under test, not a cold build
# (tests/site/test_reproducible.py makes the clean builds).
CACHE = str(ROOT / ".cache" / "artifacts")
PORT = 8000  # fixed in ./dev serve


def commands_on_page() -> list[str]:
    """The lines of every ```bash block of the page, in order (comments and blanks dropped)."""
    blocks = re.findall(r"^```bash\n(.*?)^```", PAGE.read_text(encoding="utf-8"), re.M | re.S)
    lines = [line.strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


COMMANDS = commands_on_page()


def test_page_gives_the_three_commands_and_says_how_they_are_tested():
    assert {"./dev serve", "./dev build", "./dev test"} <= set(COMMANDS), COMMANDS
    text = " ".join(PAGE.read_text(encoding="utf-8").split())
    for command in INSTEAD.values():
        assert f"`{command}`" in text, "the page must say which command really runs"


@pytest.fixture(scope="module")
def checkout(built_site, tmp_path_factory):
    # built_site: the run's build has filled the artifact cache (CACHE) first
    root = copy_project(tmp_path_factory.mktemp("contributing") / "qkv")
    borrow_environment(root)
    return root


def _answers(url: str) -> bytes | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.read()
    except OSError:
        return None


def _port_is_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def _serve_answers(checkout, tmp_path):
    if not _port_is_free(PORT):
        pytest.fail(f"port {PORT} is already in use (another `./dev serve`?); stop it and rerun")
    log = tmp_path / "serve.log"
    server = start(SERVER, checkout, clean_env(QKV_CACHE=CACHE), log)
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if server.poll() is not None:
                pytest.fail(f"{SERVER} exited with {server.returncode}:\n{tail(log)}")
            page = _answers(f"http://127.0.0.1:{PORT}/contributing/")
            if page is not None:
                assert b"tests/site/test_contributing.py" in page
                return
            time.sleep(1)
        pytest.fail(f"{SERVER} did not answer within 600 s:\n{tail(log)}")
    finally:
        stop(server)


@pytest.mark.parametrize("command", COMMANDS)
def test_command_on_the_page_runs(command, checkout, tmp_path):
    if command == SERVER:
        _serve_answers(checkout, tmp_path)
        return
    run = INSTEAD.get(command, command)
    done = subprocess.run(run, shell=True, cwd=checkout, env=clean_env(QKV_CACHE=CACHE), capture_output=True,
                          text=True, timeout=1200)
    assert done.returncode == 0, f"`{run}` failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    if command == "./dev build":  # the notebook page and its download are part of the site
        assert (checkout / "site" / "notebook" / "index.html").is_file()
        assert (checkout / "site" / "notebook" / "notebook.ipynb").is_file()
