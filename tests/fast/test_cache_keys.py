"""A cache entry answers only where it would be computed the same: its key names the BLAS
kernel and the workers' thread settings (rounding follows the order of the sums, which both
decide; docs/contributing.md, "Numbers that depend on the machine")."""

from __future__ import annotations

import os
import subprocess
import sys

from support import HANG, ROOT

KEY = """
import sys
sys.path.insert(0, "sitebuild")
from qkv_site.artifacts.runner import Job
print(Job("snippets", "m:f", {"code": "print(1)"}).key())
"""


def key_with(**env) -> str:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENBLAS_", "OMP_", "MKL_"))}
    command = [sys.executable, "-c", KEY]
    env = {**base, **env}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=HANG)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_key_changes_with_the_blas_kernel_and_threads_and_only_with_them():
    plain = key_with()
    assert key_with() == plain  # the same machine and settings: the same entry
    assert key_with(OPENBLAS_CORETYPE="Haswell") != plain
    assert key_with(OPENBLAS_NUM_THREADS="2") != plain
    assert key_with(OPENBLAS_NUM_THREADS="1") == plain  # what a worker runs with anyway
