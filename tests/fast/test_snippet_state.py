"""The digest of a snippet session's state (sitebuild/qkv_site/artifacts/state.py), which the
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

from support import ROOT

RUN_BLOCKS = r"""
import json, sys
from qkv_site.artifacts.session import run_block
from qkv_site.artifacts.state import note_untouched_generators, state_digest
note_untouched_generators()
namespace = {"__name__": "__snippet__"}
for number, code in enumerate(json.load(sys.stdin), start=1):
    run_block(namespace, number, code)
print(json.dumps(state_digest(namespace)))
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


def digest(*blocks: str) -> str | None:
    """The state digest after ``blocks``, computed in a fresh process."""
    env = {**os.environ, "PYTHONHASHSEED": "0",
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "sitebuild")])}
    done = subprocess.run([sys.executable, "-c", RUN_BLOCKS], input=json.dumps(blocks), env=env,
                          cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_same_blocks_give_the_same_digest_in_another_process():
    first, second = digest(SETUP), digest(SETUP)
    assert first is not None and first == second


def test_a_print_or_a_comment_leaves_the_state_and_the_digest_as_they_were():
    edited = SETUP.replace('print("set up", x.shape)', '# the shapes\nprint("x is", x.shape)')
    assert digest(edited) == digest(SETUP)


def test_a_changed_value_name_function_or_default_changes_the_digest():
    base = digest(SETUP)
    assert digest(SETUP.replace("np.arange(12.0)", "np.arange(1.0, 13.0)")) != base
    assert digest(SETUP, "y = 1") != base  # one more name
    assert digest(SETUP.replace("return v * factor", "return v + factor")) != base
    assert digest(SETUP.replace("factor=2", "factor=3")) != base
    assert digest(SETUP, "rng.normal()") != base  # a drawn-from generator moved on


def test_global_random_state_and_print_options_count():
    base = digest(SETUP)
    assert digest(SETUP, "np.random.seed(0)") != base
    assert digest(SETUP, "np.random.seed(0)") == digest(SETUP, "np.random.seed(0)")
    assert digest(SETUP, "np.set_printoptions(precision=2)") != base
    assert digest(SETUP, "import random; random.seed(1)") != base


def test_a_state_that_cannot_be_hashed_has_no_digest():
    assert digest(SETUP, "big = np.zeros(9 * 2**20)") is None  # 72 MB of arrays: over budget
    assert digest(SETUP, "squares = (i * i for i in range(3))") is None  # a generator
    assert digest(SETUP, "class Point:\n    pass") is None  # a class defined in a block
