"""Run jobs out of process and keep their results in one cache, keyed by content hash.

A :class:`Job` names a task (a function run by :mod:`qkv_site.artifacts.worker`), its
arguments and the file a failure should name. Its cache entry lives in
``CACHE/KIND/KEY/``, where KEY hashes the task, its arguments and the Python version.
The entry is used while every file the task read is unchanged and every library it
imported, or that the job names in ``packages``, has the same version (the worker records
both in ``_deps.json``); otherwise the task runs again. So an edit to ``qkv/cost.py``
recomputes exactly the artifacts that imported it, and nothing else.

Up to ``concurrency`` jobs run at once, each in a worker process kept between jobs (and
between the rebuilds of ``mkdocs serve``) that forks a fresh child for every job. A snippet
session borrows a worker (:meth:`Runner.session_worker`), whose one child runs the session's jobs
one after the other.

Processes share the cache: a build, the tests reading a page's output and a second build
may compute at once. An entry is computed under a lock of its own (``.locks/KIND-KEY``), so
whoever comes second waits for it and reads it instead of computing it again, and it is
put in place by one rename, so nobody sees half of one.

Snippets may run in another Python (``snippet_python``): a reader's environment, holding
the built wheel of qkv and what a reader installs with it, with no path to this tree, the
build package or the test tools (:class:`ReaderPython`). A block that needs anything else
then fails the build, as it would fail a reader; its entry is keyed by that environment.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from mkdocs.exceptions import PluginError
from pymdownx.superfences import SuperFencesException

from qkv_site.artifacts.worker import CPU, DEPS, installed_version

# Seconds: a full build removes the entries that no build has used for this long. Days, not
# an hour: an entry can be minutes of CPU (the trained-model chapters), and a contributor
# who works on one chapter for an afternoon must find the others' entries still there.
STALE_AFTER = 14 * 24 * 3600


class ArtifactError(PluginError, SuperFencesException):
    """An artifact could not be computed; the message names the file and carries the log.

    It is a :class:`SuperFencesException` too, so a failure inside a code fence is not
    swallowed by pymdownx.superfences but stops the build.
    """


@dataclass(frozen=True)
class Job:
    kind: str  # the cache folder: "figures", "snippets", ...
    task: str  # "module:function", run as function(out_dir, **args) by the worker
    args: dict = field(hash=False)  # JSON; part of the cache key
    source: str = ""  # what a failure names, e.g. "sitebuild/qkv_site/figures/masks.py"
    # Distributions the result depends on although the task need not import them (a data
    # file they ship, found without importing): their versions are recorded like imports.
    packages: tuple = ()

    def key(self) -> str:
        text = json.dumps([self.kind, self.task, self.args, sys.version, rounding()], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:24]


@functools.cache
def rounding() -> list:
    """What orders NumPy's sums in a worker: each BLAS library, its version and the kernel it
    runs (chosen for the processor, or by ``OPENBLAS_CORETYPE``), and the workers' thread
    settings. Part of every key: another kernel rounds differently, and a result that
    amplifies rounding (a head trained at a high rate) differs in more than its last digits,
    so a cache filled on one machine must not answer on another."""
    import numpy  # noqa: F401  (threadpoolctl finds the BLAS libraries that are loaded)
    from threadpoolctl import threadpool_info

    libraries = [
        [lib.get("internal_api"), lib.get("version"), lib.get("architecture")]
        for lib in threadpool_info()
        if lib.get("user_api") == "blas"
    ]
    settings = {name: os.environ.get(name, "1") for name in ONE_THREAD}  # Worker's defaults
    settings |= {name: os.environ.get(name) for name in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    return [libraries, settings]


@dataclass(frozen=True)
class Result:
    job: Job
    folder: Path
    fresh: bool  # computed by this build, not read from the cache

    def read(self, name: str) -> bytes:
        return (self.folder / name).read_bytes()

    def text(self, name: str) -> str:
        return self.read(name).decode("utf-8")


class Runner:
    """Computes jobs in worker processes, caching their results under ``cache_dir``."""

    def __init__(self, root: Path, cache_dir: Path, concurrency: int, snippet_python: str = ""):
        self.root = Path(root).resolve()
        self.cache_dir = Path(cache_dir)
        self.concurrency = max(1, concurrency)
        self.reader = ReaderPython(Path(snippet_python)) if snippet_python else None
        self._reader_workers: queue.SimpleQueue = queue.SimpleQueue()
        self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="artifact")
        self._ahead = ThreadPoolExecutor(self.concurrency, thread_name_prefix="ahead")
        self._workers: queue.SimpleQueue = queue.SimpleQueue()  # idle pooled workers
        self._all_workers: list[Worker] = []
        self._hashes: dict[tuple, str] = {}  # (path, mtime, size) -> sha256
        self._versions: dict[str, str | None] = {}  # distribution -> version, for one build
        self._lock = threading.Lock()
        self.used: set[Path] = set()
        self.computed: list[Job] = []
        self.computed_entries: set[Path] = set()  # their folders
        self.cpu_seconds: list[tuple[Job, float]] = []  # each computed job's CPU, this build

    # ---- the cache -------------------------------------------------------------------------

    def _hash(self, path: Path) -> str | None:
        try:
            stat = path.stat()
        except OSError:
            return None
        memo = (path, stat.st_mtime_ns, stat.st_size)
        if memo not in self._hashes:
            self._hashes[memo] = hashlib.sha256(path.read_bytes()).hexdigest()
        return self._hashes[memo]

    def _valid(self, folder: Path) -> bool:
        """Whether the entry in ``folder`` exists and nothing it depends on changed."""
        try:
            deps = json.loads((folder / DEPS).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        for rel, digest in deps["files"].items():
            if self._hash(self.root / rel) != digest:
                return False
        return all(self._version(dist) == version for dist, version in deps["versions"].items())

    def _version(self, dist: str) -> str | None:
        # importlib.metadata searches every installed distribution on each call (~2 ms);
        # an entry names ten or so, and a rebuild of `mkdocs serve` checks every entry
        if dist not in self._versions:
            self._versions[dist] = installed_version(dist)
        return self._versions[dist]

    def deps(self, folder: Path) -> list[str]:
        """The project files (relative paths) the entry in ``folder`` was computed from."""
        return list(json.loads((folder / DEPS).read_text(encoding="utf-8"))["files"])

    def cached(self, job: Job) -> Result | None:
        """The job's result if the cache holds a valid one."""
        folder = self.cache_dir / job.kind / job.key()
        if self._valid(folder):
            self._mark_used(folder)
            return Result(job, folder, fresh=False)
        return None

    def _mark_used(self, folder: Path) -> None:
        """Count the entry as used by this build, and date it now: its age is the time since
        a build last used it, which is what :meth:`forget_unused` goes by."""
        with self._lock:
            self.used.add(folder)
        try:
            os.utime(folder)
        except OSError:  # removed meanwhile by another build's clean-up: it is computed again
            pass

    # ---- running -----------------------------------------------------------------------------

    def submit(self, job: Job) -> Future:
        return self._pool.submit(self._get, job)

    def background(self, function, *args) -> Future:
        """Run ``function(*args)`` (which runs jobs itself with :meth:`run`) in a thread of
        its own, not behind the jobs already queued: a snippet session started ahead of its
        page, the page's longest chain of work (:mod:`qkv_site.artifacts.snippets`)."""
        return self._ahead.submit(function, *args)

    def run(self, job: Job, compute=None) -> Result:
        """The job's result, computed in this thread (by ``compute(job, out)`` if given)."""
        return self._get(job, compute or self._compute)

    def _get(self, job: Job, compute=None) -> Result:
        if found := self.cached(job):
            return found
        folder = self.cache_dir / job.kind / job.key()
        folder.parent.mkdir(parents=True, exist_ok=True)
        # one process computes a key at a time: another build or a test that wants the same
        # entry waits here, then finds it (a process holds one such lock at a time: no deadlock)
        locks = self.cache_dir / ".locks"
        locks.mkdir(parents=True, exist_ok=True)
        with open(locks / f"{job.kind}-{folder.name}", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            if found := self.cached(job):
                return found
            return self._compute_into(job, folder, compute)

    def _compute_into(self, job: Job, folder: Path, compute=None) -> Result:
        scratch = Path(tempfile.mkdtemp(prefix=".computing-", dir=folder.parent))
        try:
            (compute or self._compute)(job, scratch)
            old = folder.with_name(f".old-{scratch.name}")
            if folder.exists():
                folder.rename(old)  # an outdated entry of the same key
            try:
                scratch.rename(folder)  # atomic: no build sees half an entry
                fresh = True
            except OSError:  # a concurrent job or build finished the same key first
                fresh = False
            shutil.rmtree(old, ignore_errors=True)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        self._mark_used(folder)
        with self._lock:
            if fresh:
                self.computed.append(job)
                self.computed_entries.add(folder)
                self.cpu_seconds.append((job, _cpu_of(folder)))
        return Result(job, folder, fresh=fresh)

    def _borrow(self, reader: bool = False) -> Worker:
        idle = self._reader_workers if reader else self._workers
        try:
            worker = idle.get_nowait()
        except queue.Empty:
            worker = None
        if worker is None or worker.process.poll() is not None:  # none idle, or it died
            worker = Worker(self.root, self.reader if reader else None)
            self._all_workers.append(worker)
        return worker

    def _compute(self, job: Job, out: Path) -> None:
        worker = self._borrow()
        try:
            worker.compute(job, out)
        finally:
            self._workers.put(worker)

    def session_worker(self) -> SessionWorker:
        """A snippet session: a borrowed worker whose one child runs the jobs given to it,
        in one process (in the reader's Python, if the runner has one); ``close()`` ends it."""
        reader = self.reader is not None
        return SessionWorker(self._borrow(reader), (self._reader_workers if reader else self._workers).put)

    def snippet_environment(self) -> str | None:
        """What a snippet's cache entry depends on beyond its code: the reader's environment
        (:meth:`ReaderPython.identity`), or None for the build's own."""
        return None if self.reader is None else self.reader.identity()

    # ---- housekeeping ----------------------------------------------------------------------

    def start_build(self) -> None:
        self.used, self.computed, self.cpu_seconds = set(), [], []
        self.computed_entries = set()
        self._versions = {}  # packages may have been installed since the last build

    def from_cache(self) -> int:
        """How many entries this build used without computing them."""
        with self._lock:
            return len(self.used - self.computed_entries)

    def forget_unused(self) -> None:
        """Remove the entries this build did not use and no build used for ``STALE_AFTER``
        seconds. Call it after a full build only: a build that renders some pages (a
        rebuild of ``mkdocs serve --dirty``) uses only their entries."""
        now = time.time()
        for entry in self.cache_dir.glob("*/*"):
            if entry.parent.name.startswith("."):
                continue  # the entries' locks: a process may hold one
            try:
                age = now - entry.stat().st_mtime
            except OSError:  # removed meanwhile by another build
                continue
            if entry not in self.used and age > STALE_AFTER:
                shutil.rmtree(entry, ignore_errors=True)

    def close(self) -> None:
        for pool in (self._pool, self._ahead):
            pool.shutdown(wait=True, cancel_futures=True)  # a failed build stops its queued work
        for worker in self._all_workers:
            worker.close()
        self._all_workers.clear()


def _cpu_of(folder: Path) -> float:
    """The CPU seconds the worker recorded for the runs that made the entry in ``folder``
    (a session's block counts the earlier blocks it had to run again for their state)."""
    try:
        lines = (folder / CPU).read_text(encoding="utf-8").split()
    except OSError:
        return float("nan")
    return sum(float(line) for line in lines)


ONE_THREAD = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


class ReaderPython:
    """A reader's Python: a virtual environment with the built wheel of qkv and what a reader
    installs with it. Snippet workers run in it isolated (``-I``: no ``PYTHONPATH``, no user
    site, not even the worker's folder on the path), in an empty folder of their own, so a
    block sees only what a reader's install brings."""

    # what the environment holds: every distribution's name and version, and the bytes of
    # every file of qkv's (the wheel's contents, whatever its zip's dates)
    _IDENTITY = """
import hashlib, importlib.metadata as m
h = hashlib.sha256()
for d in sorted(m.distributions(), key=lambda d: (d.metadata["Name"] or "").lower()):
    h.update(f"{d.metadata['Name']}=={d.version}\\n".encode())
    if (d.metadata["Name"] or "").lower() == "qkv":
        for f in sorted(d.files or [], key=str):
            if f.suffix != ".pyc" and f.name != "RECORD":
                h.update(str(f).encode() + b"\\0" + d.locate_file(f).read_bytes())
print(h.hexdigest())
"""

    def __init__(self, python: Path):
        if not python.is_file():
            raise ArtifactError(f"qkv-artifacts: snippet_python {python} is not a Python interpreter")
        self.python = python
        self._identity: str | None = None

    def identity(self) -> str:
        if self._identity is None:
            done = subprocess.run(
                [str(self.python), "-I", "-c", self._IDENTITY], capture_output=True, text=True
            )
            if done.returncode != 0:
                raise ArtifactError(f"qkv-artifacts: snippet_python {self.python} failed:\n{done.stderr}")
            self._identity = done.stdout.strip()
        return self._identity


WORKER = Path(__file__).resolve().with_name("worker.py")


class Worker:
    """A worker process (:mod:`qkv_site.artifacts.worker`): a job in, its exit code out."""

    def __init__(self, root: Path, reader: ReaderPython | None = None):
        # PYTHONHASHSEED: sets of strings iterate (print, pickle) the same in every process.
        # One BLAS/OpenMP thread per worker (unless set by hand): the build runs a worker per
        # core, and a thread per core in each made them fight over the cores.
        env = {**{name: "1" for name in ONE_THREAD}, **os.environ, "MPLBACKEND": "svg", "PYTHONHASHSEED": "0"}
        self.scratch = None
        if reader is None:
            paths = [str(root), str(root / "sitebuild"), os.environ.get("PYTHONPATH")]
            env["PYTHONPATH"] = os.pathsep.join(filter(None, paths))
            argv, cwd = [sys.executable, "-m", "qkv_site.artifacts.worker", str(root)], root
        else:  # isolated, by path, in a folder of its own: nothing of this tree on its path
            self.scratch = tempfile.mkdtemp(prefix="qkv-reader-")
            argv, cwd = [str(reader.python), "-I", str(WORKER), str(root), "--reader"], self.scratch
        self.process = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def send(self, request: dict) -> str:
        """Write one request line; the answer line ("" when the worker has died)."""
        if self.process.poll() is not None:
            return ""
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return self.process.stdout.readline().strip()

    def compute(self, job: Job, out: Path) -> None:
        """Run ``job``, its files going to ``out``; ArtifactError with its log if it fails."""
        log = out / "_log.txt"
        answer = self.send(
            {
                "task": job.task,
                "args": job.args,
                "out": str(out),
                "log": str(log),
                "packages": list(job.packages),
            }
        )
        if answer != "0":
            output = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
            raise ArtifactError(
                f"{job.source or job.task}: computing this {job.kind} artifact "
                f"failed (exit code {answer or 'none: the worker died'}). "
                f"Its output:\n{output.strip()}"
            )

    def close(self) -> None:
        try:
            self.process.stdin.close()  # its loop ends at end of input
        except OSError:
            pass
        self.process.wait()
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)


class SessionWorker:
    """A worker lent to one snippet session: its jobs run in one forked child, in order."""

    def __init__(self, worker: Worker, give_back):
        self.worker, self.give_back = worker, give_back
        if worker.send({"session": True}) != "0":
            raise ArtifactError("a worker process could not start a snippet session")

    def compute(self, job: Job, out: Path) -> None:
        self.worker.compute(job, out)

    def close(self) -> None:
        """End the session (its child exits; if it died already, the worker ignores the line)
        and give the worker back."""
        self.worker.send({"end": True})
        self.give_back(self.worker)
