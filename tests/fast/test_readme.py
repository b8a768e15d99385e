"""The README's Python example runs, and its commands are the ones CI and the dev script use."""

from __future__ import annotations

import re
import subprocess
import sys

from support import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_python_example_runs_and_shows_a_causal_pattern():
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    assert blocks
    done = subprocess.run([sys.executable, "-c", blocks[0]], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    rows = [line.strip(" []") for line in done.stdout.strip().splitlines()]
    assert len(rows) == 4
    first_row = [float(x) for x in rows[0].split()]
    assert first_row[0] == 1.0 and first_row[1:] == [0.0, 0.0, 0.0]


def test_ci_runs_the_readme_test_command():
    assert "./dev test" in README and "./dev serve" in README
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^\./dev test\b", ci, re.M)


def test_dev_script_knows_every_command_the_readme_names():
    dev = (ROOT / "dev").read_text(encoding="utf-8")
    commands = set(re.findall(r"\./dev ([\w-]+)", README))  # new-chapter: a hyphen too
    assert {"serve", "test", "new-chapter"} <= commands
    for command in commands:
        assert re.search(rf"^\s+{command}\)", dev, re.M), command
