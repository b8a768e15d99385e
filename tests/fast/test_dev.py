"""``./dev`` on a fresh machine: its exit codes, its install stamp and what it demands.

Each test runs the real script against a stand-in virtual environment whose ``python``
records its arguments instead of running (``QKV_VENV``), so nothing is installed and no
test runs: the log shows what ``./dev`` asked pip and pytest to do.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest
from support import ROOT

# prints a version when asked for one (the stamp), records every other call
FAKE_PYTHON = """#!/bin/bash
if [ "$1" = -c ]; then echo "$FAKE_VERSION"; exit 0; fi
echo "$*" >> "$FAKE_LOG"
"""
# what ./dev runs besides the venv's python (no apt-get: nothing may be installed here)
TOOLS = ("bash", "cat", "sha256sum", "sed", "grep", "id", "dirname", "git", "touch", "rm", "env")


@pytest.fixture
def dev(tmp_path):
    """``dev(*args, version="3.11.7", **env)``: run ./dev with the stand-in venv; its
    process, and ``dev.calls()`` the calls it made to the venv's python so far."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text(FAKE_PYTHON)
    (venv / "bin" / "python").chmod(0o755)
    tools = tmp_path / "tools"
    tools.mkdir()
    for tool in TOOLS:
        (tools / tool).symlink_to(shutil.which(tool))
    log = tmp_path / "calls.log"
    log.touch()

    def run(*args, version="3.11.7", **env):
        return subprocess.run(
            [str(ROOT / "dev"), *args],
            capture_output=True,
            text=True,
            timeout=60,
            env={
                "PATH": str(tools),
                "HOME": str(tmp_path),
                "QKV_VENV": str(venv),
                "FAKE_VERSION": version,
                "FAKE_LOG": str(log),
                "QKV_CHROMIUM": str(tmp_path / "no-chromium"),
                **env,
            },
        )

    run.calls = lambda: log.read_text().splitlines()
    return run


def pip_calls(calls: list[str]) -> list[str]:
    return [c for c in calls if c.startswith("-m pip install")]


def test_an_unknown_command_prints_the_commands_and_exits_2(dev):
    typo = dev("tset")
    assert typo.returncode == 2
    assert "unknown command 'tset'" in typo.stderr
    for command in ("serve", "check", "test", "build", "bench", "lock"):
        assert f"./dev {command}" in typo.stderr
    assert dev().returncode == 2  # no command at all is no command CI meant
    asked = dev("help")
    assert asked.returncode == 0 and "./dev check" in asked.stdout


def test_the_install_is_skipped_until_its_inputs_or_the_interpreter_change(dev):
    assert dev("check", "-q").returncode == 0
    first = pip_calls(dev.calls())
    assert first and any("-e .[test] -e ./sitebuild" in c for c in first)
    assert dev("check", "-q").returncode == 0
    assert pip_calls(dev.calls()) == first  # nothing changed: no pip at all
    assert dev("check", "-q", version="3.12.4").returncode == 0  # Python was upgraded
    assert len(pip_calls(dev.calls())) == 2 * len(first)
    assert dev.calls()[-1].startswith("-m pytest -m not build")


def test_the_first_install_shows_progress_and_later_ones_are_quiet(dev):
    first = dev("check")
    assert "Installing qkv" in first.stdout
    assert not any("--quiet" in c for c in pip_calls(dev.calls()))  # pip prints what it does
    dev("check", QKV_REINSTALL="1")
    again = pip_calls(dev.calls())[len(pip_calls(dev.calls())) // 2 :]
    assert again and all("--quiet" in c for c in again)


def test_torch_comes_from_the_index_ci_names(dev):
    pinned = re.search(r"^torch==\S+$", (ROOT / "constraints.txt").read_text(), re.M).group()
    dev("check", QKV_TORCH_INDEX="https://download.pytorch.org/whl/cpu")
    calls = pip_calls(dev.calls())
    torch = [i for i, c in enumerate(calls) if "--index-url https://download.pytorch.org/whl/cpu" in c]
    extras = [i for i, c in enumerate(calls) if ".[test]" in c]
    assert len(torch) == 1 and calls[torch[0]].endswith(pinned)
    assert torch[0] < extras[0]  # first, so the extras find torch installed
    dev("build")  # the docs extra has no torch
    assert not any("--index-url" in c for c in pip_calls(dev.calls())[len(calls) :])


def test_fast_tests_do_not_demand_chromium_and_the_whole_suite_does(dev):
    fast = dev("test", "tests/fast/test_attention.py", "-n", "0")
    assert fast.returncode == 0, fast.stderr
    assert dev.calls()[-1] == "-m pytest -n auto --dist worksteal tests/fast/test_attention.py -n 0"
    browser = str(ROOT / "tests" / "browser")
    for args in (
        (),
        ("tests",),
        ("tests/browser/test_site_offline.py::test_x",),
        ("-k", "x", "."),
        (browser,),
        ("./tests/",),
    ):
        whole = dev("test", *args)
        assert whole.returncode == 1, args
        assert "sudo apt-get install -y chromium" in whole.stderr
    assert dev("test", "tests/site", "-k", "tests").returncode == 0  # "tests" is -k's value


def test_check_runs_the_tests_that_are_neither_build_nor_model(dev):
    done = dev("check", "-q")
    assert done.returncode == 0, done.stderr
    assert dev.calls()[-1] == "-m pytest -m not build and not model -n auto --dist worksteal -q"


def test_the_model_tier_holds_the_tests_that_run_the_model_and_no_other():
    # what `./dev check` leaves out (-m model), read from a real collection of the modules
    # that show each way a test gets the mark, and of one that must not get it
    modules = [
        "test_trained_model",
        "test_coreference",
        "test_interventions",
        "test_snippets",
        "test_attention",
    ]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "model"]
        + [f"tests/fast/{module}.py" for module in modules],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:]
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    files = {i.split("::")[0] for i in ids}
    # whole modules about the model, a test elsewhere that asks for the model fixture, and
    # the snippet scripts that load it; and nothing that does not touch it
    assert {"tests/fast/test_trained_model.py", "tests/fast/test_coreference.py"} <= files
    assert any(i.startswith("tests/fast/test_interventions.py::") for i in ids)
    assert "tests/fast/test_snippets.py::test_snippet_runs_and_prints[trained_model.py]" in ids
    assert not any("[soft_lookup.py]" in i or i.startswith("tests/fast/test_attention.py") for i in ids)
