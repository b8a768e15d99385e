"""Site builds made once per test run, in the background, shared by every pytest-xdist worker.

A build starts as soon as a worker's session begins and some selected test needs it, so it
runs while the fast tests run; a test that needs the result waits only for what is left.
Every worker of the run finds the build in one folder (the run's temporary folder):

- ``started`` marks that a build was started, so it is started once;
- ``running.lock`` is locked (``flock``) by the process that runs the build for as long as it
  runs, so waiting for it is waiting for the lock: no polling, no sleep;
- ``returncode`` and ``build.log`` are what it left; ``site/`` is the site.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

# What to build: () -> (project folder, environment). Called by the one worker that starts
# the build, while it holds the lock, so it may prepare the folder (copy a snapshot, say).
Recipe = Callable[[], tuple[Path, dict[str, str]]]

# Runs the build and writes its exit code; it holds the lock (its inherited descriptor).
# With ``after``, it first waits for that build to end and copies the entries of that build's
# artifact cache that this one's lacks (the tests' ``page_output`` may have filled some of it
# meanwhile); an entry is copied beside its place and renamed into it, so nothing reading the
# cache sees half an entry, and an entry already there is never overwritten. Should this
# script itself fail, its traceback is kept (``recorder.log``) and shown with the failure.
_RUN_AND_RECORD = r"""
import fcntl, json, os, shutil, subprocess, sys
log, returncode, after, cwd, *argv = sys.argv[1:]
if after := json.loads(after):
    lock = os.open(after["lock"], os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)
    os.close(lock)
    source, target = after["cache"], after["into"]
    kinds = os.listdir(source) if os.path.isdir(source) else []
    for kind in kinds:
        # the cache's own bookkeeping (``.locks``, a half-written ``.tmp-*``) is not an entry
        if kind.startswith(".") or not os.path.isdir(os.path.join(source, kind)):
            continue
        os.makedirs(os.path.join(target, kind), exist_ok=True)
        for key in os.listdir(os.path.join(source, kind)):
            entry = os.path.join(target, kind, key)
            if key.startswith(".") or os.path.exists(entry):
                continue
            scratch = os.path.join(target, kind, f".copying-{key}")
            shutil.copytree(os.path.join(source, kind, key), scratch, dirs_exist_ok=True)
            try:
                os.rename(scratch, entry)
            except OSError:  # the entry appeared meanwhile
                shutil.rmtree(scratch, ignore_errors=True)
with open(log, "wb") as out:
    code = subprocess.call(argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
with open(returncode, "w") as f:
    f.write(str(code))
"""


class BackgroundBuild:
    """``mkdocs build --strict`` of a project into ``folder/site``, started once per run."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.site = self.folder / "site"
        self.log = self.folder / "build.log"

    def start(self, recipe: Recipe, after: tuple[BackgroundBuild, Path, Path] | None = None) -> None:
        """Start the build ``recipe`` gives unless this run has started it already.

        ``after=(build, its_cache, this_cache)``: wait for ``build`` to end, then copy the
        entries of its artifact cache that this build's cache lacks, then build."""
        self.folder.mkdir(parents=True, exist_ok=True)
        lock = os.open(self.folder / "running.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return  # another worker's build is running
            if (self.folder / "started").exists():
                return  # it has run already
            (self.folder / "started").touch()
            project, env = recipe()
            recorder = open(self.folder / "recorder.log", "wb")
            argv = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(self.site)]
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    _RUN_AND_RECORD,
                    str(self.log),
                    str(self.folder / "returncode"),
                    json.dumps(
                        after
                        and {
                            "lock": str(after[0].folder / "running.lock"),
                            "cache": str(after[1]),
                            "into": str(after[2]),
                        }
                    ),
                    str(project),
                    *argv,
                ],
                env={**env, "NO_MKDOCS_2_WARNING": "1"},
                pass_fds=[lock],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=recorder,
            )
            recorder.close()  # the child holds its own descriptor
        finally:
            os.close(lock)  # the build's process keeps the lock until it ends

    def wait_until_ended(self, recipe: Recipe) -> None:
        """Return once the build has ended, whether it passed or failed."""
        self.start(recipe)
        lock = os.open(self.folder / "running.lock", os.O_RDWR)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)  # returns when the build's process has ended
        finally:
            os.close(lock)

    def wait(self, recipe: Recipe) -> Path:
        """The built site, once the build is done; AssertionError with its log if it failed."""
        self.wait_until_ended(recipe)
        try:
            code = int((self.folder / "returncode").read_text())
        except (OSError, ValueError):
            code = None
        if code != 0:
            log = self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""
            recorder = self.folder / "recorder.log"
            if recorder.exists():  # the recording script's own traceback, if it failed
                log += recorder.read_text(encoding="utf-8", errors="replace")
            raise AssertionError(
                f"mkdocs build --strict (log: {self.log}) "
                f"{'died' if code is None else f'failed ({code})'}:\n{log[-6000:]}"
            )
        return self.site
