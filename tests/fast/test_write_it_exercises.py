"""Every core chapter 1-12 has the reader write code that a checker of ``qkv.exercises`` judges
(issue 40: the reader writes attention, in Raschka's build order).

A write-it exercise is a shown block (not executed) that imports a checker, leaves the function
to the reader (``raise NotImplementedError``) and prints the checker's verdict; its solution is an
executed block on the same page that prints the same checker's verdict. Both are run here as a
reader pastes them, each alone in a fresh interpreter: the unfinished function is reported as
unfinished, and the solution passes.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from qkv_site import reading
from qkv_site.page_blocks import find_blocks, page_text, site_extensions
from support import ROOT, nav_section

CHAPTERS = [path for _, path in nav_section("The explanation")][:12]  # the recap and FAQ write none
VERDICT = re.compile(r"print\((check_\w+)\(")


def paste(code: str) -> str:
    """What ``code`` prints, run alone in a fresh interpreter, as a reader runs a pasted block."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env
    )
    assert done.returncode == 0, f"the block failed:\n{code}\n{done.stderr[-2000:]}"
    return done.stdout


def skeletons(page: str) -> list[str]:
    """The page's shown blocks that leave a function to the reader and print a checker's verdict."""
    soup = reading.rendered(ROOT, (ROOT / "docs" / page).read_text(encoding="utf-8"))
    shown = [pre.get_text() for pre in soup.select("pre")]
    return [code for code in shown if "raise NotImplementedError" in code and VERDICT.search(code)]


def solutions(page: str, checker: str) -> list[str]:
    """The page's executed blocks that print ``checker``'s verdict (the build runs them)."""
    names, settings = site_extensions(ROOT)
    _, blocks = find_blocks(page_text(ROOT, page), names, settings, root=ROOT)
    return [code for code, _ in blocks if f"print({checker}(" in code and "NotImplementedError" not in code]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_chapter_has_the_reader_write_code_that_a_checker_judges(chapter):
    page = chapter
    written = skeletons(page)
    assert written, f"{page}: no write-it exercise (a shown block with a checker and NotImplementedError)"
    for skeleton in written:
        checker = VERDICT.search(skeleton).group(1)
        unfinished = paste(skeleton)
        assert unfinished.startswith("Your function raised NotImplementedError"), (page, unfinished)
        solved = solutions(page, checker)
        assert solved, f"{page}: no executed solution prints {checker}'s verdict"
        for solution in solved:
            verdict = paste(solution)
            assert verdict.startswith("Passed: "), (page, checker, verdict)


def test_every_checker_is_in_the_api_reference():
    """A reader who meets a checker on a page finds its docstring in the API reference."""
    from qkv import exercises

    reference = (ROOT / "docs" / "reference-lab.md").read_text(encoding="utf-8")
    checkers = [name for name in exercises.__all__ if name.startswith("check_")]
    missing = [name for name in checkers if f"::: qkv.exercises.{name}\n" not in reference]
    assert len(checkers) >= 12 and missing == []
