"""Page snippets: the output of every ``python exec="on"`` block, computed out of process.

markdown-exec still reads the block's options and formats what it prints (through its
public ``base_format``); only the running is replaced. The blocks of a session run in order
in one session process (:mod:`qkv_site.artifacts.session`). Each block's printed text is
cached by its code and the state it starts from: the digest of the names the earlier blocks
of its session left and of NumPy's and ``random``'s global state
(:mod:`qkv_site.artifacts.state`), or, where that state cannot be hashed, all the code run
before it in its session on the page. An entry is reused while the files the session had
imported (``qkv``...) are unchanged. So editing one block reruns that block, and the later
blocks of its session only if the state it leaves changed (a comment or the wording of a
print changes nothing after it). Nothing of a block outlives a build, so no stale module or
session can hide an error.

A block that raises stops the build, naming the page, the block and its traceback.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import markdown_exec

from qkv_site.artifacts.runner import ArtifactError, Job
from qkv_site.artifacts.session import STATE

EMPTY_STATE = "empty"  # what the first block of a session, or a block without one, starts from


def _newest(folder: Path) -> float:
    return max(p.stat().st_mtime for p in folder.glob("*.py"))


def _not_run(code: str, **_) -> str:
    return "(not run in this build: artifacts are disabled)\n"


class SessionProcess:
    """One running session: the blocks it has run, and the process holding their globals."""

    def __init__(self, runner):
        self.ran: list[str] = []
        self.started = time.time()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "qkv_site.artifacts.session", str(runner.root)],
            cwd=runner.root, env=runner.env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True)

    def run(self, code: str, out: Path, job: Job) -> None:
        log = out / "_log.txt"
        request = {"code": code, "out": str(out), "log": str(log)}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline().strip()
        self.ran.append(code)
        if answer != "0":
            output = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
            raise ArtifactError(f"{job.source}: the block failed. Its output:\n{output.strip()}"
                                f"\n\nThe block:\n{code}")

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


class Snippets:
    """The snippet kind: markdown-exec's Python formatter, with running done here."""

    def __init__(self, plugin):
        self.plugin = plugin
        self.original = markdown_exec.formatters["python"]
        self.page = "?"
        self.sessions: dict[str | None, list[str]] = {}  # the code each session has run
        self.states: dict[str | None, str | None] = {}  # the state each session is in
        self.processes: dict[str | None, SessionProcess] = {}
        self.spare: SessionProcess | None = None

    def on_config(self, config):
        markdown_exec.formatters["python"] = markdown_exec.formatters["py"] = self.format

    def on_shutdown(self):
        markdown_exec.formatters["python"] = markdown_exec.formatters["py"] = self.original
        self._close_sessions()
        if self.spare is not None:
            self.spare.close()

    def _new_process(self) -> SessionProcess:
        """A fresh session process. One more is started at once and kept for next time:
        starting one takes ~0.4 s, which an edit under `mkdocs serve` then does not wait for.
        A spare older than the session code is not used."""
        spare, self.spare = self.spare, SessionProcess(self.plugin.runner)
        if spare is not None and spare.started > _newest(Path(__file__).parent):
            return spare
        if spare is not None:
            spare.close()
        return SessionProcess(self.plugin.runner)

    def _close_sessions(self):
        for process in self.processes.values():
            process.close()
        self.processes = {}

    def on_page_markdown(self, markdown, page, config, files):
        self._close_sessions()  # sessions belong to one page
        self.page, self.sessions, self.states = page.file.src_uri, {}, {}

    def on_env(self, env, config, files):
        self._close_sessions()

    def format(self, **options):
        run = self.run if self.plugin.config.enabled else _not_run
        return markdown_exec.base_format(language="python", run=run, **options)

    def run(self, code: str, returncode=None, session=None, id=None, **extra) -> str:
        earlier = self.sessions.setdefault(session, []) if session else []
        state = self.states.get(session, EMPTY_STATE) if session else EMPTY_STATE
        where = f"session '{session}', block {len(earlier) + 1}" if session else "a block"
        # keyed by the state it starts from; by all the code before it when that is unknown
        args = {"state": state, "code": code} if state else {"blocks": [*earlier, code]}
        job = Job("snippets", "session", args, source=f"docs/{self.page} ({where})")

        def compute(job: Job, out: Path) -> None:
            process = self.processes.get(session)
            if process is None or process.ran != earlier or session is None:
                if process is not None:
                    process.close()
                process = self.processes[session] = self._new_process()
                for block in earlier:  # their output is cached; only their state is needed
                    process.run(block, out, job)
            process.run(code, out, job)

        result = self.plugin.runner.run(job, compute=compute)
        self.plugin.page_inputs.used(result.folder)
        if session:
            earlier.append(code)
            self.states[session] = result.text(STATE).strip() or None
        return result.text("output.txt")
