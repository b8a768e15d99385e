"""Every shell command on the Contributing page (docs/contributing.md) runs.

The commands run in page order in a temporary copy of the repository (tests/checkout.py),
whose ``.venv`` borrows the installed packages, so nothing they write touches this tree.
Two cannot run as written inside a test, and the page says so:

- ``./dev serve`` never exits: it must answer, then it is stopped (on a free port, which the
  test gives it as ``QKV_ADDRESS``: the port 8000 the page names may be in use);
- ``./dev test`` would run this test again, forever: it runs as ``./dev test --collect-only
  -q``, which does the same set-up and collects every test.
"""

from __future__ import annotations

import re
import socket
import subprocess
import urllib.request

import pytest
from checkout import borrow_environment, clean_env, copy_project
from support import HANG, ROOT, Served, stop

PAGE = ROOT / "docs" / "contributing.md"
SERVER = "./dev serve"
# the suite cannot run itself; ./dev check's tests run in this session already
INSTEAD = {"./dev test": "./dev test --collect-only -q", "./dev check": "./dev check --collect-only -q"}
# The copy shares this tree's artifact cache: the commands are under test, not a cold build
# (tests/site/test_reproducible.py makes the clean builds).
CACHE = str(ROOT / ".cache" / "artifacts")


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


@pytest.fixture
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))  # the system picks a port nothing listens on
        return s.getsockname()[1]


def _serve_answers(checkout):
    port = _free_port()
    env = clean_env(QKV_CACHE=CACHE, QKV_ADDRESS=f"127.0.0.1:{port}")
    process = subprocess.Popen(
        SERVER,
        shell=True,
        cwd=checkout,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    served = Served(process, f"http://127.0.0.1:{port}/")
    try:
        served.wait_for_log(r"Serving on")  # the first build is done; it listens
        page = _answers(served.url + "contributing/")
        assert page is not None, f"{SERVER} logged that it serves, but nothing answers:\n{served.log()}"
        assert b"tests/site/test_contributing.py" in page
    finally:
        stop(process)


def test_the_commands_on_the_page_run_in_page_order(checkout):
    """One test, not one per command: they run in order in one copy, as a contributor runs
    them (the first ``./dev`` installs the copy into its environment, the later ones use it),
    and test workers must not split them up."""
    for command in COMMANDS:
        if command == SERVER:
            _serve_answers(checkout)
            continue
        run = INSTEAD.get(command, command)
        done = subprocess.run(
            run,
            shell=True,
            cwd=checkout,
            env=clean_env(QKV_CACHE=CACHE),
            capture_output=True,
            text=True,
            timeout=HANG,
        )
        assert done.returncode == 0, f"`{run}` failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        if command == "./dev build":  # the notebook page and its download are part of the site
            assert (checkout / "site" / "notebook" / "index.html").is_file()
            assert (checkout / "site" / "notebook" / "notebook.ipynb").is_file()
