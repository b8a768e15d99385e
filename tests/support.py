"""Helpers the tests share: where things are, how the site is built, how Chromium is run."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
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


def build_site(out: Path, extra_env: dict[str, str] | None = None, *, cwd: Path = ROOT,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``mkdocs build --strict`` in ``cwd`` into ``out``; return the finished process.

    ``env`` replaces this process's environment as the base (``extra_env`` goes on top).
    """
    env = {**(os.environ if env is None else env), "NO_MKDOCS_2_WARNING": "1",
           **(extra_env or {})}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=1200,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def html_pages(site: Path) -> list[Path]:
    """Every built HTML page except the 404 page, in a stable order."""
    return sorted(p for p in site.rglob("*.html") if p.name != "404.html")


def build_dist(out: Path) -> tuple[Path, Path]:
    """Build qkv's sdist and wheel into ``out`` with ``python -m build``; return their paths.

    ``--no-isolation`` builds with the test environment's pinned setuptools instead of
    fetching one into a fresh environment (the release workflow does that; same backend).
    """
    done = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out),
                           str(ROOT)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"python -m build failed:\n{done.stdout}\n{done.stderr}"
    (sdist,), (wheel,) = out.glob("qkv-*.tar.gz"), out.glob("qkv-*.whl")
    return sdist, wheel
