"""Every snippet runs as `python snippets/NAME.py` from the repository root.

A script that a page runs whole (all its sections, in file order, in one session, and no code
outside them) is the same code as that page's run, so its test reads the page's run
(``page_output``, made once per test run) instead of running it a second time; the others run
as scripts."""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys

import pytest
from qkv_site.page_blocks import written_blocks
from qkv_site.site import includes
from support import HANG, ROOT

SNIPPETS = sorted((ROOT / "snippets").glob("*.py"))


def test_every_snippet_is_shown_on_a_page_and_every_page_shows_a_snippet_that_exists():
    included = {
        f"snippets/{include.snippet}"
        for page in (ROOT / "docs").glob("*.md")
        for include in includes(page.read_text("utf-8"))
        if include.file.startswith("snippets/")
    }
    assert included == {p.relative_to(ROOT).as_posix() for p in SNIPPETS}


_MARKER = re.compile(r"^# --8<-- \[(start|end):(\w+)\]\n", re.M)


@functools.cache
def page_runs(page) -> list[tuple[str, str, str | None]]:
    """(session, script, section) of every snippet section the page's executed blocks
    include, in page order (a block may include several); section None: the whole file."""
    return [
        (block.session, *(include.split(":", 1) if ":" in include else (include, None)))
        for block in written_blocks(ROOT, page.name)
        if block.session
        for include in block.includes
        if (ROOT / "snippets" / include.split(":")[0]).is_file()
    ]


def script_setup(statement: ast.stmt) -> bool:
    """Whether a statement outside a script's sections is set-up a page does its own way:
    an import (from a file beside the script only where the page runs that file first), a
    ``threadpool_limits(...)`` call (the page's code runs with one thread already), or an
    ``if TYPE_CHECKING:`` block (for the linter)."""
    if isinstance(statement, ast.Import | ast.ImportFrom):
        return True
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        return ast.unparse(statement.value.func) == "threadpool_limits"
    return isinstance(statement, ast.If) and ast.unparse(statement.test) == "TYPE_CHECKING"


def siblings_imported(body: list[ast.stmt], beside: set[str]) -> set[str]:
    """The files beside the script that its set-up imports names from (``coreference_pairs``)."""
    return {f"{s.module}.py" for s in body if isinstance(s, ast.ImportFrom) and s.module in beside}


def sections_and_rest(script) -> tuple[list[str], str]:
    """A script's section names in file order, and its text outside every section."""
    text = script.read_text(encoding="utf-8")
    names, rest, inside, at = [], [], None, 0
    for marker in _MARKER.finditer(text):
        kind, name = marker.groups()
        if kind == "start" and inside is None:
            rest.append(text[at : marker.start()])
            names.append(inside := name)
        elif kind == "end" and name == inside:
            inside, at = None, marker.end()
    rest.append(text[at:] if inside is None else "")
    return names, "".join(rest)


def page_running_whole(script) -> str | None:
    """The page that runs all of ``script``, if one does: every section in file order, in
    one session, with no other script's section between them, and nothing outside the
    sections but the docstring. That page's run (``page_output``) is then a run of the
    script."""
    names, rest = sections_and_rest(script)
    body = ast.parse(rest).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    beside = {p.stem for p in SNIPPETS} - {script.stem}
    if not all(script_setup(statement) for statement in body):
        return None
    needed = siblings_imported(body, beside)  # files whose names the page must have run first
    for page in sorted((ROOT / "docs").glob("*.md")):
        runs = page_runs(page)
        for session in {s for s, _, _ in runs}:
            files = [(f, n) for s, f, n in runs if s == session]
            mine = [i for i, (f, _) in enumerate(files) if f == script.name]
            ran_first = {f for f, _ in files[: mine[0]]} if mine else set()
            if (
                mine
                and [n for _, n in files[mine[0] : mine[-1] + 1]] == names
                and len(mine) == len(names)
                and needed <= ran_first
            ):
                return page.name
    return None


def test_a_page_that_runs_all_of_a_script_is_found_and_no_other(tmp_path):
    script = ROOT / "snippets" / "coreference.py"
    assert page_running_whole(script) == "coreference.md"
    names, rest = sections_and_rest(script)
    # its set-up outside the sections: the pairs file's names, which the page runs first
    assert names[0] == "pairs" and "from coreference_pairs import" in rest
    # the same name, but code outside the sections: the page does not run that line
    (tmp_path / script.name).write_text(script.read_text(encoding="utf-8") + "print('extra')\n")
    assert page_running_whole(tmp_path / script.name) is None
    # set-up that imports from a file beside it which the page does not run before it
    (tmp_path / script.name).write_text(
        script.read_text(encoding="utf-8") + "from coreference_heads import moves\n"
    )
    assert page_running_whole(tmp_path / script.name) is None
    # the same name, but a section the page does not run
    extra = "# --8<-- [start:more]\nprint('more')\n# --8<-- [end:more]\n"
    (tmp_path / script.name).write_text(script.read_text(encoding="utf-8") + extra)
    assert page_running_whole(tmp_path / script.name) is None
    # the page runs all its sections, but two of them in the other order
    script = ROOT / "snippets" / "why_scale_in_depth.py"
    names, _ = sections_and_rest(script)
    assert page_running_whole(script) == "why-scale-in-depth.md"
    text = script.read_text(encoding="utf-8")
    first, second = (
        re.search(rf"# --8<-- \[start:{n}\]\n.*?\[end:{n}\]\n", text, re.S)[0] for n in names[:2]
    )
    (tmp_path / script.name).write_text(text.replace(first, "@").replace(second, first).replace("@", second))
    assert page_running_whole(tmp_path / script.name) is None
    # a block that includes two sections counts both
    assert page_running_whole(ROOT / "snippets" / "kv_cache.py") == "kv-cache.md"
    # another script's section in between breaks the run: chapter 4 runs these sections of
    # tie_query_key.py in this order in one session, with hand_built.py:one_way between
    # products and symmetric (the script's other sections run on its deep dive)
    script = ROOT / "snippets" / "tie_query_key.py"
    assert page_running_whole(script) is None
    text = script.read_text(encoding="utf-8")
    chapter = ["setup", "products", "symmetric", "tie_kv", "exercise_scale", "exercise_rank"]
    only = "".join(re.search(rf"# --8<-- \[start:{n}\]\n.*?\[end:{n}\]\n", text, re.S)[0] for n in chapter)
    (tmp_path / script.name).write_text(only)
    assert sections_and_rest(tmp_path / script.name)[0] == chapter
    assert page_running_whole(tmp_path / script.name) is None


def _marked(script):
    """A script that runs the trained model is in the model tier (conftest.py)."""
    runs_the_model = "smollm2" in script.read_text(encoding="utf-8")
    return pytest.param(script, id=script.name, marks=[pytest.mark.model] if runs_the_model else [])


@pytest.mark.parametrize("script", [_marked(script) for script in SNIPPETS])
def test_snippet_runs_and_prints(script, page_output):
    """A script that a page runs whole was run with that page (``page_output``, once per
    test run): the trained model's experiments take 15 to 30 s each time they run."""
    if page := page_running_whole(script):
        text = script.read_text(encoding="utf-8")
        bodies = [
            m[2].strip()
            for m in re.finditer(r"# --8<-- \[start:(\w+)\]\n(.*?)# --8<-- \[end:\1\]", text, re.S)
        ]
        # the blocks that run its sections (a block may include several): one printed
        assert any(
            block.text.strip()
            for block in page_output(page).blocks
            if any(b and b in block.code for b in bodies)
        ), f"{script.name} printed nothing on {page}; a snippet shows its result"
        return
    done = subprocess.run(
        [sys.executable, str(script.relative_to(ROOT))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), f"{script.name} printed nothing; a snippet shows its result"
