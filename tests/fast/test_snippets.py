"""Every snippet runs as `python snippets/NAME.py` from the repository root."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from support import ROOT

SNIPPETS = sorted((ROOT / "snippets").glob("*.py"))


def test_every_snippet_is_shown_on_a_page_and_every_page_shows_a_snippet_that_exists():
    included = {
        m
        for page in (ROOT / "docs").glob("*.md")
        for m in re.findall(r'^\s*;?--8<--\s+"(snippets/[^":]+)', page.read_text("utf-8"), re.M)
    }
    assert included == {p.relative_to(ROOT).as_posix() for p in SNIPPETS}


def _marked(script):
    """A script that runs the trained model is in the model tier (conftest.py)."""
    runs_the_model = "smollm2" in script.read_text(encoding="utf-8")
    return pytest.param(script, id=script.name, marks=[pytest.mark.model] if runs_the_model else [])


@pytest.mark.parametrize("script", [_marked(script) for script in SNIPPETS])
def test_snippet_runs_and_prints(script):
    done = subprocess.run(
        [sys.executable, str(script.relative_to(ROOT))], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), f"{script.name} printed nothing; a snippet shows its result"
