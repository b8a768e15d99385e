"""Page snippets: the output of every ``python exec="on"`` block, computed out of process.

markdown-exec still reads the block's options and formats what it prints (through its
public ``base_format``); only the running is replaced. The blocks of a session run in order
in one session process (:mod:`qkv_site.artifacts.session`); each block's printed text is
cached by the hash of its code together with the earlier blocks of its session on the page,
and reused while the files the session imported (``qkv``, snippet scripts) are unchanged.
Editing one block reruns that block and the later blocks of its session, nothing else.
Nothing of a block outlives a build, so no stale module or session can hide an error.

A block that raises stops the build, naming the page, the block and its traceback.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import markdown_exec

from qkv_site.artifacts.runner import ArtifactError, Job


def _not_run(code: str, **_) -> str:
    return "(not run in this build: artifacts are disabled)\n"


class SessionProcess:
    """One running session: the blocks it has run, and the process holding their globals."""

    def __init__(self, runner):
        self.ran: list[str] = []
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
        self.sessions: dict[str | None, list[str]] = {}
        self.processes: dict[str | None, SessionProcess] = {}

    def on_config(self, config):
        markdown_exec.formatters["python"] = markdown_exec.formatters["py"] = self.format

    def on_shutdown(self):
        markdown_exec.formatters["python"] = markdown_exec.formatters["py"] = self.original
        self._close_sessions()

    def _close_sessions(self):
        for process in self.processes.values():
            process.close()
        self.processes = {}

    def on_page_markdown(self, markdown, page, config, files):
        self._close_sessions()  # sessions belong to one page
        self.page, self.sessions = page.file.src_uri, {}

    def on_env(self, env, config, files):
        self._close_sessions()

    def format(self, **options):
        run = self.run if self.plugin.config.enabled else _not_run
        return markdown_exec.base_format(language="python", run=run, **options)

    def run(self, code: str, returncode=None, session=None, id=None, **extra) -> str:
        earlier = self.sessions.setdefault(session, []) if session else []
        blocks = [*earlier, code]
        where = f"session '{session}', block {len(blocks)}" if session else "a block"
        job = Job("snippets", "session", {"blocks": blocks}, source=f"docs/{self.page} ({where})")

        def compute(job: Job, out: Path) -> None:
            process = self.processes.get(session)
            if process is None or process.ran != earlier or session is None:
                if process is not None:
                    process.close()
                process = self.processes[session] = SessionProcess(self.plugin.runner)
                for block in earlier:  # their output is cached; only their globals are needed
                    process.run(block, out, job)
            process.run(code, out, job)

        result = self.plugin.runner.run(job, compute=compute)
        self.plugin.page_inputs.used(result.folder)
        earlier.append(code)
        return result.text("output.txt")
