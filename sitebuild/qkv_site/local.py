"""The site on this machine, for the tests and the benchmarks: build it with ``--strict``,
serve it with ``mkdocs serve`` on a free port, drive the system's Chromium at it, and copy
the project to a folder of its own. Nothing here is part of a build."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Seconds: the limit every test puts on a process it waits for. It guards against a hang, not
# a slow run, so it is sized for a loaded machine: the longest wait (the copy-paste run of the
# trained-model chapters, about 3 minutes on two quiet cores) took over 10 minutes with other
# work on the machine. A speed goal belongs in benchmarks/, never here.
HANG = 1800
CHROMIUM = os.environ.get("QKV_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def build_site(
    out: Path, extra_env: dict[str, str] | None = None, *, cwd: Path = ROOT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run ``mkdocs build --strict`` in ``cwd`` into ``out``; return the finished process.

    ``env`` replaces this process's environment as the base (``extra_env`` goes on top).
    """
    env = {**(os.environ if env is None else env), "NO_MKDOCS_2_WARNING": "1", **(extra_env or {})}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG,
    )


def dev_serve_watch_options() -> list[str]:
    """The options ``./dev serve`` passes to ``mkdocs serve`` (watched folders and flags)."""
    text = (ROOT / "dev").read_text(encoding="utf-8")
    serve = re.search(r"^\s*serve\)\n(.*?);;", text, re.M | re.S).group(1)
    command = re.search(r"mkdocs\" serve (.*?)(?:\n\s*;;|$)", serve.replace("\\\n", " "), re.S)
    words = command.group(1).split()
    # drop the fixed address: the tests and benchmarks hand the server a socket instead
    return [
        w for i, w in enumerate(words) if w != "-a" and (i == 0 or words[i - 1] != "-a") and w != "--strict"
    ]


class Served:
    """A ``mkdocs serve`` started by :func:`serve`: its URL, its process, its log lines."""

    def __init__(self, process: subprocess.Popen, url: str):
        self.process, self.url = process, url
        self.lines: list[str] = []
        self._changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for_log(self, pattern: str, after: int = 0, timeout: float = HANG) -> int:
        """Block until a log line from index ``after`` on matches ``pattern``; its index."""
        regex = re.compile(pattern)

        def found():
            for i in range(after, len(self.lines)):
                if regex.search(self.lines[i]):
                    return i + 1
            if self.process.poll() is not None:
                return -1
            return None

        with self._changed:
            index = self._changed.wait_for(found, timeout=timeout)
        if not index or index < 0:
            raise AssertionError(f"mkdocs serve never logged {pattern!r}:\n{self.log()}")
        return index - 1

    def log(self) -> str:
        return "".join(self.lines[-60:])


@contextlib.contextmanager
def serve(root: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[Served]:
    """``mkdocs serve ARGS`` in ``root`` on a socket bound here to a free port; stopped after.

    Yields once the first build is done and the server listens (its log says "Serving on").
    """
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    env = {**(os.environ if env is None else env), "NO_MKDOCS_2_WARNING": "1"}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "qkv_site.serve_socket",
            str(sock.fileno()),
            "serve",
            "--strict",
            *args,
        ],
        cwd=root,
        env=env,
        pass_fds=[sock.fileno()],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    sock.close()  # the server holds its own copy
    served = Served(process, url)
    try:
        served.wait_for_log(r"Serving on")
        yield served
    finally:
        stop(process)


def stop(process: subprocess.Popen, timeout: float = 30) -> None:
    """Stop a process started in a session of its own (``start_new_session=True``), and
    everything it started: Ctrl-C to its process group, then SIGKILL if it lingers."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=timeout)


@contextlib.contextmanager
def chromium() -> Iterator:
    """A headless Chromium (the system's) driven by Playwright, closed after."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def project_files(root: Path = ROOT) -> list[str]:
    """Paths (relative to ``root``) of the files a clone plus uncommitted work would hold."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    return sorted(p for p in listed if p and (root / p).is_file())


def copy_project(dest: Path, root: Path = ROOT) -> Path:
    """Copy the project's files into ``dest`` (created); returns ``dest``."""
    for rel in project_files(root):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, target)
    return dest


def clean_env(**extra: str) -> dict[str, str]:
    """The environment for commands run in a copy: no variable pointing back at this tree
    (``QKV_VENV``, ``QKV_CACHE``, ...) or changing what a build makes, and none of this
    pytest run's (``PYTEST_XDIST_WORKER`` would make a pytest run in the copy take itself
    for a worker of this one, and put its builds in another folder)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not (k.startswith("QKV_") and k != "QKV_CHROMIUM")
        and not k.startswith("PYTEST_")
        and k not in ("VIRTUAL_ENV", "PYTHONPATH", "SOURCE_DATE_EPOCH")
    }
    return {**env, "NO_MKDOCS_2_WARNING": "1", **extra}
