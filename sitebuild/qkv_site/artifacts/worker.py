"""The process that computes artifacts: ``python -m qkv_site.artifacts.worker ROOT``.

One protocol for every kind of job. The worker reads one job per line on stdin (JSON:
``task``, ``args``, ``out``, ``log``, ``packages``), runs the task ``task(out, **args)`` named
``"module:function"`` with its stdout and stderr going to ``log``, and answers with one line:
``0`` when it succeeded, another exit code when it did not (the traceback is in ``log``). A
task writes its files into ``out``; the worker adds ``_deps.json``: every file of the project
the process has imported (with its hash), plus any the task returns, and the version of
every installed distribution imported or named in ``packages`` (``null`` when not installed),
and a line to ``_cpu.txt``: the CPU seconds the run took (``benchmarks/build_times.py`` reads
them through the plugin's ``timings`` file).

The worker imports numpy and matplotlib and indexes the installed distributions once, then
runs each job in a child forked for it, so every job starts from the same clean state
(matplotlib's default settings, no module of the project imported yet: an edit to ``qkv/``
is seen by the next job) without paying for those imports again. The one exception is a
snippet session, whose blocks must share what they leave (:mod:`qkv_site.artifacts.blocks`):
the line ``{"session": true}`` forks one child that answers ``0`` and runs the jobs that
follow, one after the other in itself, until the line ``{"end": true}``; the worker answers
that line with the child's exit code (or, if the child died, the job it was running), and
goes on as before. Every line gets one answer, so no line is ever waiting in the pipe when a
child is forked or ends.

``python -I worker.py ROOT --reader`` is the same worker in a reader's environment
(:class:`~qkv_site.artifacts.runner.ReaderPython`): isolated, in the folder it was started
in, with nothing of ROOT on its path. Its tasks (a snippet block) are read from their files
in the build package, not imported as ``qkv_site``, so the code they run cannot import the build
package either: it sees what a reader's install brings, and no more.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import importlib.metadata
import importlib.util
import json
import os
import sys
import traceback
from pathlib import Path

DEPS = "_deps.json"
CPU = "_cpu.txt"  # one line per run of a task into this folder: its CPU seconds (benchmarks)
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
        if (
            path.is_relative_to(root)
            and "site-packages" not in path.parts
            and ".venv" not in path.relative_to(root).parts
        ):
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


READER = False  # started with --reader: tasks are read from their files, not imported
PACKAGES = Path(__file__).resolve().parents[2]  # the folder that holds qkv_site


def task_function(root: Path, name: str):
    """The function ``"module:function"`` names: imported, or, in a reader's environment,
    read from its file in the build package beside this one (``qkv_site.artifacts.blocks``
    is ``.../qkv_site/artifacts/blocks.py``) under a name that is no package's."""
    module_name, _, function = name.partition(":")
    if not READER:
        return getattr(importlib.import_module(module_name), function)
    path = PACKAGES.joinpath(*module_name.split(".")).with_suffix(".py")
    private = "_qkv_task_" + module_name.replace(".", "_")
    if private not in sys.modules:
        spec = importlib.util.spec_from_file_location(private, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[private] = module
        spec.loader.exec_module(module)
    return getattr(sys.modules[private], function)


def run_job(root: Path, job: dict, version=installed_version) -> int:
    """Run one job in this process, its output going to its log; its exit code."""
    log = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    started = _cpu_seconds()
    try:
        task = task_function(root, job["task"])
        out = Path(job["out"])
        extra = task(out, **job["args"])
        deps = {
            "files": project_files(root, extra or ()),
            "versions": versions_imported(job.get("packages", ()), version),
        }
        (out / DEPS).write_text(json.dumps(deps, indent=1), encoding="utf-8")
        return 0
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else 1
    except BaseException:
        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        with contextlib.suppress(OSError):  # the folder may be gone if the task removed it
            with open(Path(job["out"]) / CPU, "a", encoding="utf-8") as cpu:
                cpu.write(f"{_cpu_seconds() - started:.3f}\n")


def _cpu_seconds() -> float:
    """CPU seconds of this process and of the children it has waited for (a notebook's
    kernel), user and system."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def _session(root: Path, answer) -> int:
    """Run the jobs that follow in this process, until ``{"end": true}`` (a forked child)."""
    version = functools.cache(installed_version)  # one page of one build: read each once
    answer(0)  # ready
    while line := sys.stdin.readline():
        job = json.loads(line)
        if job.get("end"):
            break
        answer(run_job(root, job, version))
    return 0


def main(argv: list[str]) -> int:
    global READER
    root = Path(argv[0]).resolve()
    READER = "--reader" in argv[1:]
    if not READER:
        sys.path[:0] = [str(root), str(root / "sitebuild")]  # the tree being built comes first
        os.chdir(root)
    os.environ.setdefault("MPLBACKEND", "svg")
    for name in PRELOAD:
        importlib.import_module(name)
    _distribution_index()  # once, before forking (it reads every installed distribution)
    answers = os.fdopen(os.dup(1), "w")  # fds 1 and 2 go to each job's log

    def answer(code: int) -> None:
        answers.write(f"{code}\n")
        answers.flush()

    # one line at a time: nothing read ahead is left in a buffer a forked child copies
    while line := sys.stdin.readline():
        job = json.loads(line)
        if job.get("end"):
            answer(0)  # the end of a session whose child had died
            continue
        if (pid := os.fork()) == 0:
            os._exit(_session(root, answer) if job.get("session") else run_job(root, job))
        answer(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
