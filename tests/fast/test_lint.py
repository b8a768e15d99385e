"""The code follows the project's ruff configuration (pyproject.toml): its lint rules and
its layout (``ruff format``)."""

import subprocess
import sys

from support import ROOT


def test_ruff_is_clean():
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "."], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format_would_change_nothing():
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "."], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, "run `ruff format .`:\n" + done.stdout + done.stderr


def test_every_snippet_line_fits_the_code_panel():
    # Pages show snippets in a panel about 82 characters wide (snippets/ruff.toml). Ruff's
    # E501 lets through a line that is one unbroken word or ends in a `# noqa` comment, so
    # the characters are counted here.
    width = 82
    assert f"line-length = {width}" in (ROOT / "snippets" / "ruff.toml").read_text(encoding="utf-8")
    long = [
        f"{path.name}:{number}: {len(line)} characters"
        for path in sorted((ROOT / "snippets").glob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if len(line) > width
    ]
    assert long == [], "\n".join(long)
