"""The process that computes artifacts: ``python -m qkv_site.artifacts.worker ROOT``.

It imports the heavy libraries once (numpy, matplotlib), then reads one job per line on
stdin (JSON: ``task``, ``args``, ``out``, ``log``, ``packages``) and runs each in a forked child, so every
job starts from the same clean state: matplotlib's default settings and no module of the
project imported yet (an edit to ``qkv/`` is seen by the next job). The child writes its
stdout and stderr to ``log`` and, when the task succeeds, ``_deps.json`` into ``out``: every
file of the project it imported (with its hash) and the version of every installed
distribution it imported or the job names in ``packages`` (``null`` when not installed).
The parent answers each job with one line: the child's exit code.

A task is a function ``task(out: Path, **args)`` named ``"module:function"``; it writes its
files into ``out`` and may return more paths it read (files that are not imported modules).

Where ``os.fork`` does not exist, ``--once`` runs one job in this process and exits.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.metadata
import json
import os
import sys
import traceback
from pathlib import Path

DEPS = "_deps.json"
PRELOAD = ("numpy", "matplotlib")


def file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def project_files(root: Path, extra=()) -> dict[str, str]:
    """The project's files this process imported, plus ``extra``: relative path -> hash."""
    found = set()
    for module in list(sys.modules.values()):
        name = getattr(module, "__file__", None)
        if not name:
            continue
        path = Path(name).resolve()
        if path.is_relative_to(root) and "site-packages" not in path.parts \
                and ".venv" not in path.relative_to(root).parts:
            found.add(path)
    found.update(Path(p).resolve() for p in extra)
    return {p.relative_to(root).as_posix(): file_hash(p) for p in sorted(found) if p.is_file()}


@functools.cache
def _distribution_index() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def installed_version(dist: str) -> str | None:
    """The installed version of distribution ``dist``, None when it is not installed."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def versions_imported(packages=(), version=installed_version) -> dict[str, str | None]:
    """Version of every installed distribution a top-level imported module belongs to, and
    of each distribution in ``packages``; ``version(dist)`` reads one."""
    versions = {dist: version(dist) for dist in packages}
    for top in {name.partition(".")[0] for name in sys.modules}:
        for dist in _distribution_index().get(top, ()):
            if (found := version(dist)) is not None:
                versions[dist] = found
    return dict(sorted(versions.items()))


def run_job(root: Path, job: dict) -> None:
    """Run one task in this process and record what it depended on."""
    module_name, _, function = job["task"].partition(":")
    task = getattr(importlib.import_module(module_name), function)
    out = Path(job["out"])
    extra = task(out, **job["args"])
    deps = {"files": project_files(root, extra or ()),
            "versions": versions_imported(job.get("packages", ()))}
    (out / DEPS).write_text(json.dumps(deps, indent=1), encoding="utf-8")


def _child(root: Path, job: dict) -> int:
    fd = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    try:
        run_job(root, job)
        return 0
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else 1
    except BaseException:
        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def main(argv: list[str]) -> int:
    once = "--once" in argv
    root = Path(next(a for a in argv if a != "--once")).resolve()
    sys.path[:0] = [str(root), str(root / "sitebuild")]  # the tree being built comes first
    os.environ.setdefault("MPLBACKEND", "svg")
    for name in PRELOAD:
        importlib.import_module(name)
    _distribution_index()  # once, before forking
    if once:
        return _child(root, json.loads(sys.stdin.readline()))
    for line in sys.stdin:
        job = json.loads(line)
        pid = os.fork()
        if pid == 0:
            os._exit(_child(root, job))
        _, status = os.waitpid(pid, 0)
        sys.stdout.write(f"{os.waitstatus_to_exitcode(status)}\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
