"""The code follows the project's ruff configuration (pyproject.toml)."""

import subprocess
import sys

from support import ROOT


def test_ruff_is_clean():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
