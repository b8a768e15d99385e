"""The explorer's exported data is qkv's computation, and the five experiments hold on it.

The reference here recomputes every state from qkv's public API, all six queries at once,
independently of ``qkv.toy.query_state`` (the page's own code) and
``qkv_site.explorer_data``; the exported JSON must match it to its 6 decimals.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from pages_support import by_state, decoded, reference
from prose import check_prose
from qkv_site.explorer_data import explorer_json, to_fixed
from support import HANG, ROOT

import qkv
from qkv import toy
from qkv.toy import D_K_MAX, D_V, query_state

WORDS = toy.SENTENCE

HALF_UNIT = 0.5e-6 + 1e-12  # rounding to 6 decimals moves a number by at most this


@pytest.fixture(scope="module")
def data() -> dict:
    return json.loads(explorer_json())


@pytest.mark.claim("explorer-dk-adds-columns")
def test_each_dk_step_adds_one_term_to_every_score():
    full = toy.projections(D_K_MAX, d_v=D_V)
    q, k, _ = qkv.project(toy.embeddings(), full)  # (T, 64) each
    for d_k in range(1, D_K_MAX + 1):
        p = toy.projections(d_k, d_v=D_V)
        assert np.array_equal(p.w_q, full.w_q[:, :d_k]) and np.array_equal(p.w_k, full.w_k[:, :d_k])
        if d_k > 1:  # the scores at d_k are those at d_k - 1 plus the new column's products
            step = reference(d_k, False)[0] - reference(d_k - 1, False)[0]
            np.testing.assert_allclose(step, np.outer(q[:, d_k - 1], k[:, d_k - 1]), atol=1e-12)


@pytest.mark.claim("explorer-dv-four")
def test_values_have_four_numbers_whatever_dk(data):
    assert D_V == data["d_v"]
    for d_k in (1, 16, 64):
        assert reference(d_k, True)[3].shape == (len(WORDS), D_V)  # outputs
        assert reference(d_k, True)[4].shape == (len(WORDS), D_V)  # values
    check_prose("explorer-dv-four", D_V, ...)  # "stage 4" is a label


def test_the_metadata_describes_the_arrays_the_page_indexes(data):
    # the page sizes its slider and its tables from these fields, and indexes the arrays by them
    t, d_k_max, d_v = len(data["words"]), data["d_k_max"], data["d_v"]
    assert data["words"] == list(WORDS) and d_k_max == D_K_MAX  # what the reference computes
    assert np.array(data["raw"]).shape == (t, d_k_max, t)
    assert np.array(data["weights"]).shape == (2, t, d_k_max, t)
    assert np.array(data["output"]).shape == (2, t, d_k_max, d_v)
    assert np.array(data["entropy"]).shape == (2, t, d_k_max)
    defaults = data["defaults"]  # a state that exists
    assert defaults["query"] in data["words"] and 1 <= defaults["dk"] <= d_k_max


@pytest.mark.claim("explorer-numbers-are-qkvs", "try-numbers-from-explorer-state", "explorer-shared-toy")
def test_every_exported_state_equals_qkv(data):
    values_seen = []
    for d_k in range(1, D_K_MAX + 1):
        for scale in (False, True):
            raw, scaled, weights, output, values = reference(d_k, scale)
            values_seen.append(values)
            for i, word in enumerate(WORDS):
                expected = {
                    "raw": raw[i],
                    "scaled": scaled[i],
                    "weights": weights[i],
                    "output": output[i],
                    "entropy": qkv.entropy(weights[i]),
                    "max_weight": weights[i].max(),
                }
                state = query_state(word, d_k, scale)
                for field, want in expected.items():
                    got = by_state(data, field, word, d_k, scale)
                    assert np.abs(got - want).max() <= HALF_UNIT, (word, d_k, scale, field)
                    # the snippet's numbers (query_state) are the same computation
                    np.testing.assert_allclose(getattr(state, field), want, rtol=0, atol=1e-12)
    # the values do not depend on d_k, so the data stores them once
    assert all(np.array_equal(v, values_seen[0]) for v in values_seen)
    assert np.abs(decoded(data["values"], data) - values_seen[0]).max() <= HALF_UNIT
    assert np.isclose(decoded(data["entropy_even"], data), np.log(len(WORDS)), atol=HALF_UNIT)


def test_to_fixed_rounds_to_nearest_millionth():
    assert to_fixed([0.0000004, 0.0000006, -2.5e-7 - 1e-9, 1.2345675]) == [0, 1, 0, 1234568]


@pytest.mark.parametrize(
    "bad",
    [
        {"query": "tea"},
        {"d_k": 0},
        {"d_k": 65},
        {"d_k": 2.0},
        {"d_k": True},
        {"scale": 1},
    ],
)
def test_bad_state_is_refused_with_a_clear_message(bad):
    args = {"query": "she", "d_k": 8, "scale": True, **bad}
    with pytest.raises(ValueError, match=f"{next(iter(bad))} must"):
        query_state(**args)


def test_the_exported_json_is_the_same_in_another_process_with_other_string_hashes():
    # the build exports it in a worker process; sets and dicts of strings iterate in an order
    # that depends on PYTHONHASHSEED, which must not reach the published bytes
    code = "from qkv_site.explorer_data import explorer_json; import sys; sys.stdout.write(explorer_json())"
    env = {
        **os.environ,
        "PYTHONHASHSEED": "12345",
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "sitebuild")]),
    }
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=HANG)
    assert done.returncode == 0, done.stderr
    assert done.stdout == explorer_json()
