"""A snippet session: ``python -m qkv_site.artifacts.session ROOT``.

The blocks of one ``session="..."`` on a page share their globals, so they run in order in
one process. This process reads one block per line on stdin (JSON: ``code``, ``out``,
``log``), runs it in the session's namespace, writes what the block printed to
``out/output.txt``, what the session has imported so far to ``out/_deps.json`` (see
:mod:`qkv_site.artifacts.worker`) and the digest of the state it leaves to
``out/state.txt`` (see :mod:`qkv_site.artifacts.state`; empty when it cannot be hashed), and
answers with a line: ``0`` or ``1`` (the traceback is in ``log``). Like markdown-exec, a
block shows only its own ``print()``.
"""

from __future__ import annotations

import functools
import io
import json
import linecache
import os
import sys
import traceback
import types
from pathlib import Path

from qkv_site.artifacts.state import SNIPPET_MODULE, note_untouched_generators, state_digest
from qkv_site.artifacts.worker import DEPS, installed_version, project_files, versions_imported

MODULE = SNIPPET_MODULE  # the blocks' __name__
STATE = "state.txt"


def _print(buffer, *texts, sep=" ", end="\n", **_):
    buffer.write(sep.join(str(text) for text in texts) + end)


def run_block(namespace: dict, number: int, code: str) -> str:
    """Run one block in ``namespace``; what it printed."""
    printed = io.StringIO()
    namespace["print"] = functools.partial(_print, printed)
    filename = f"<code block {number}>"
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    exec(compile(code, filename, "exec"), namespace)
    return printed.getvalue()


def main(argv: list[str]) -> int:
    root = Path(argv[0]).resolve()
    sys.path[:0] = [str(root), str(root / "sitebuild")]
    os.chdir(root)
    namespace = {"__name__": MODULE}
    # a session lasts one page of one build: read each version once (~2 ms a read)
    version = functools.cache(installed_version)
    note_untouched_generators()
    sys.modules[MODULE] = types.ModuleType(MODULE)  # dataclasses look their module up
    answer = os.fdopen(os.dup(1), "w")  # replies; fds 1 and 2 go to each block's log
    for number, line in enumerate(sys.stdin, start=1):
        request = json.loads(line)
        out = Path(request["out"])
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        try:
            printed = run_block(namespace, number, request["code"])
            (out / "output.txt").write_text(printed, encoding="utf-8")
            deps = {"files": project_files(root), "versions": versions_imported(version=version)}
            (out / DEPS).write_text(json.dumps(deps, indent=1), encoding="utf-8")
            (out / STATE).write_text(state_digest(namespace) or "", encoding="utf-8")
            code = 0
        except BaseException:
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
        answer.write(f"{code}\n")
        answer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
