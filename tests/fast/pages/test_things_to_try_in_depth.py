"""Guards for the claims of docs/things-to-try-in-depth.md, the explorer's experiments in
depth, recomputed from qkv's public API on the explorer's states.
"""

from __future__ import annotations

import numpy as np
import pytest
from pages_support import reference
from prose import check_prose

import qkv
from qkv import toy

WORDS = toy.SENTENCE


@pytest.mark.claim("try-gradient-vanishes")
def test_4_saturated_softmax_passes_almost_no_gradient():
    she = WORDS.index("she")
    unscaled = np.abs(qkv.softmax_jacobian(reference(64, False)[2][she])).max()
    scaled = np.abs(qkv.softmax_jacobian(reference(64, True)[2][she])).max()
    assert scaled > 1000 * unscaled
    check_prose("try-gradient-vanishes", 64, unscaled, scaled)
