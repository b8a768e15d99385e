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
from support import HANG, ROOT

# prints a version when asked for one (the stamp), records every other call
FAKE_PYTHON = """#!/bin/bash
if [ "$1" = -c ]; then echo "$FAKE_VERSION"; exit 0; fi
echo "$*" >> "$FAKE_LOG"
"""
# what ./dev runs besides the venv's python, from this machine (apt-get and id are stand-ins)
TOOLS = ("bash", "cat", "sha256sum", "shasum", "sed", "grep", "dirname", "git", "touch", "rm", "env")
# stand-ins: apt-get records its call; id says FAKE_UID
FAKE_APT = """#!/bin/bash
echo "apt-get $*" >> "$FAKE_LOG"
"""
FAKE_ID = """#!/bin/bash
echo "${FAKE_UID:-0}"
"""


@pytest.fixture
def dev(tmp_path):
    """``dev(*args, version="3.11.7", without=(), **env)``: run ./dev with the stand-in venv
    (and without the tools named); its process, and ``dev.calls()`` the calls it made to the
    venv's python and to apt-get so far."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text(FAKE_PYTHON)
    (venv / "bin" / "python").chmod(0o755)
    tools = tmp_path / "tools"
    tools.mkdir()
    for tool in TOOLS:
        (tools / tool).symlink_to(shutil.which(tool))
    for name, script in (("apt-get", FAKE_APT), ("id", FAKE_ID)):
        (tools / name).write_text(script)
        (tools / name).chmod(0o755)
    log = tmp_path / "calls.log"
    log.touch()

    def run(*args, version="3.11.7", without=(), **env):
        for tool in without:  # a machine without these tools
            (tools / tool).unlink(missing_ok=True)
        return subprocess.run(
            [str(ROOT / "dev"), *args],
            capture_output=True,
            text=True,
            timeout=HANG,
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
    run.venv = venv
    return run


def pip_calls(calls: list[str]) -> list[str]:
    return [c for c in calls if c.startswith("-m pip install")]


def test_an_unknown_command_prints_the_commands_and_exits_2(dev):
    typo = dev("tset")
    assert typo.returncode == 2
    assert "unknown command 'tset'" in typo.stderr
    for command in ("serve", "check", "test", "build", "bench", "lock", "new-chapter"):
        assert f"./dev {command}" in typo.stderr
    assert dev().returncode == 2  # no command at all is no command CI meant
    asked = dev("help")
    assert asked.returncode == 0 and "./dev check" in asked.stdout


def test_the_install_is_skipped_until_its_inputs_or_the_interpreter_change(dev):
    assert dev("check", "-q").returncode == 0
    first = pip_calls(dev.calls())
    assert first and any("-e . -e ./sitebuild --group test" in c for c in first)
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


def test_every_install_is_hash_checked_and_then_checked_against_the_groups(dev):
    dev("check")
    calls = pip_calls(dev.calls())
    locked = [c for c in calls if "-r requirements/" in c]
    assert locked and all("--require-hashes --no-deps" in c for c in locked)
    assert {"requirements/test.txt", "requirements/model.txt", "requirements/torch.txt"} == {
        word for c in locked for word in c.split() if word.startswith("requirements/")
    }
    *_, project = calls  # last: the project itself, nothing fetched, the group checked
    assert "--no-deps --no-index" in project and project.endswith("-e . -e ./sitebuild --group test")


def test_torch_comes_from_the_index_ci_names_at_the_pinned_version(dev):
    # CI's Linux jobs (3.11 and 3.13) install the CPU build from PyTorch's index: the version
    # the lock pins, whatever file that index has for the job's Python
    dev("check", QKV_TORCH_INDEX="https://download.pytorch.org/whl/cpu")
    calls = pip_calls(dev.calls())
    torch = [i for i, c in enumerate(calls) if "torch" in c]
    pinned = re.search(r"^torch==(\S+)", (ROOT / "requirements" / "torch.txt").read_text(), re.M)[1]
    assert len(torch) == 1, calls
    assert "--index-url https://download.pytorch.org/whl/cpu" in calls[torch[0]]
    assert calls[torch[0]].endswith(f"torch=={pinned}") and "--no-deps" in calls[torch[0]]
    assert not any("index-url" in c for i, c in enumerate(calls) if i != torch[0])
    dev("build")  # the docs group has no torch
    assert not any("torch" in c for c in pip_calls(dev.calls())[len(calls) :])


def test_without_an_index_torch_is_hash_checked_and_a_refusal_says_what_to_do(dev, tmp_path):
    dev("check")
    calls = pip_calls(dev.calls())
    assert any("--require-hashes --no-deps -r requirements/torch.txt" in c for c in calls)
    # a pip that refuses the torch file (PyPI's CUDA build on Linux) stops ./dev with the way out
    refusing = tmp_path / "venv" / "bin" / "python"
    refusing.write_text(FAKE_PYTHON + 'case "$*" in *requirements/torch.txt*) exit 1;; esac\n')
    done = dev("check", QKV_REINSTALL="1")
    assert done.returncode == 1
    assert "QKV_TORCH_INDEX=https://download.pytorch.org/whl/cpu ./dev check" in done.stderr


def test_the_stamp_is_hashed_without_gnu_tools(dev):
    # macOS has shasum, not GNU's sha256sum; the stamp is the same either way
    assert dev("check", "-q").returncode == 0
    stamp = dev.venv.joinpath(".installed-test").read_text()
    dev.venv.joinpath(".installed-test").unlink()
    assert dev("check", "-q", without=("sha256sum",)).returncode == 0
    assert dev.venv.joinpath(".installed-test").read_text() == stamp


def test_fast_tests_do_not_demand_chromium_and_the_whole_suite_does(dev):
    fast = dev("test", "tests/fast/test_attention.py", "-n", "0", FAKE_UID="1000")
    assert fast.returncode == 0, fast.stderr
    assert (
        dev.calls()[-1]
        == "-m pytest -n auto --dist worksteal --durations=30 tests/fast/test_attention.py -n 0"
    )
    browser = str(ROOT / "tests" / "browser")
    for args in (
        (),
        ("tests",),
        ("tests/browser/test_site_offline.py::test_x",),
        ("-k", "x", "."),
        (browser,),
        ("./tests/",),
    ):
        whole = dev("test", *args, FAKE_UID="1000")  # Debian, not root: it says what to run
        assert whole.returncode == 1, args
        assert "sudo apt-get install -y chromium" in whole.stderr
    assert dev("test", "tests/site", "-k", "tests", FAKE_UID="1000").returncode == 0  # -k's value
    assert not [c for c in dev.calls() if c.startswith("apt-get")]


def test_chromium_comes_from_apt_as_root_and_from_playwright_without_apt(dev):
    assert dev("test").returncode == 0  # root on Debian: the distribution's package
    assert "apt-get install -y -qq chromium" in dev.calls()
    assert not any("playwright" in c for c in dev.calls())
    assert dev("test", without=("apt-get",)).returncode == 0  # macOS, say: Playwright's own
    assert "-m playwright install chromium" in dev.calls()
    assert dev.calls().index("-m playwright install chromium") < len(dev.calls()) - 1  # then pytest
    assert dev.calls()[-1].startswith("-m pytest")


def test_check_runs_the_tests_that_are_neither_build_nor_model(dev):
    done = dev("check", "-q")
    assert done.returncode == 0, done.stderr
    assert dev.calls()[-1] == "-m pytest -m not build and not model -n auto --dist worksteal -q"


def test_the_model_tier_holds_the_tests_that_run_the_model_and_no_other():
    # what `./dev check` leaves out (-m model), read from a real collection of the modules
    # that show each way a test gets the mark, and of one that must not get it
    modules = [
        "pages/test_trained_model",
        "pages/test_coreference",
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
        timeout=HANG,
    )
    assert done.returncode == 0, done.stdout[-2000:]
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    files = {i.split("::")[0] for i in ids}
    # whole modules about the model, a test elsewhere that asks for the model fixture, and
    # the snippet scripts that load it; and nothing that does not touch it
    assert {"tests/fast/pages/test_trained_model.py", "tests/fast/pages/test_coreference.py"} <= files
    assert any(i.startswith("tests/fast/test_interventions.py::") for i in ids)
    assert "tests/fast/test_snippets.py::test_snippet_runs_and_prints[trained_model.py]" in ids
    assert not any("[soft_lookup.py]" in i or i.startswith("tests/fast/test_attention.py") for i in ids)


def test_new_chapter_installs_the_docs_group_and_hands_its_arguments_to_the_generator(dev):
    done = dev("new-chapter", "attention-sinks", "Why the first token collects the weight")
    assert done.returncode == 0, done.stderr
    *_, generate = dev.calls()
    # the stand-in logs its arguments joined by spaces: the title is the rest of the line
    assert generate == "-m qkv_site.new_chapter attention-sinks Why the first token collects the weight"
    installs = pip_calls(dev.calls())
    assert installs[-1].endswith("--group docs")
    assert not any("torch" in c for c in installs)


def test_lock_installs_only_the_pins_so_a_lock_older_than_pyproject_can_be_rewritten(dev):
    # ./dev check installs the project and checks the lock against pyproject.toml, which fails
    # once a dependency is added there; ./dev lock must still reach the resolver then.
    assert dev("lock", "--upgrade").returncode == 0
    *installs, resolve = dev.calls()
    assert [c for c in installs if "-e ." in c or "--group" in c] == []
    assert installs[-1].endswith("--require-hashes --no-deps -r requirements/test.txt")
    assert resolve == "requirements/lock.py --upgrade"
