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


def two_commands() -> dict[str, str]:
    """The README's set-up commands, from the shell block under "Two commands": each
    command -> its comment (what it does)."""
    section = README.split("## Two commands", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)[1]
    lines = [line.partition("#") for line in block.strip().splitlines()]
    return {command.strip(): comment.strip() for command, _, comment in lines}


def test_the_readme_names_two_commands_and_ci_runs_its_test_command():
    commands = two_commands()
    assert sorted(commands) == ["./dev serve", "./dev test"], commands
    assert commands["./dev test"].endswith("run all tests") and "serve" in commands["./dev serve"]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    steps = [line.strip() for line in ci if line.strip() and not line.startswith(("#", "set ", "cd "))]
    assert steps == ["./dev test"], steps  # the README's command, alone, as written


def test_dev_script_knows_every_command_the_readme_names():
    dev = (ROOT / "dev").read_text(encoding="utf-8")
    commands = set(re.findall(r"\./dev ([\w-]+)", README))  # new-chapter: a hyphen too
    assert {"serve", "test", "new-chapter"} <= commands
    for command in commands:
        assert re.search(rf"^\s+{command}\)", dev, re.M), command
