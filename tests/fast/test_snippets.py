"""Every snippet runs as `python snippets/NAME.py` from the repository root."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support import ROOT

SNIPPETS = sorted((ROOT / "snippets").glob("*.py"))


def test_there_are_snippets():
    assert len(SNIPPETS) >= 5, SNIPPETS


@pytest.mark.parametrize("script", SNIPPETS, ids=lambda p: p.name)
def test_snippet_runs_and_prints(script):
    done = subprocess.run([sys.executable, str(script.relative_to(ROOT))], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), f"{script.name} printed nothing; a snippet shows its result"
