"""Guards that must fail on a deliberately broken version of the code they guard.

A counter that records a formula passes any test that compares it with the same formula,
whatever the code does. Here the real decoders are broken on purpose, by editing their own
source (each edit is checked to apply, so a rewrite of the decoder makes this fail loudly
rather than test nothing), and each guard is run against the broken version:

- ``qkv.decode_with_cache`` that re-projects the whole prefix's keys and values at every
  step, or forms the full prefix's scores, with outputs still exactly right: only the work
  counters can tell, and the guards of ``cache-projections-closed-form`` and
  ``cache-scores-closed-form`` (tests/fast/pages/test_kv_cache.py) must fail;
- ``qkv.smollm2.decode_cached`` that runs the whole prefix through the layers at every step
  (right logits, right caches): the work check of tests/fast/test_smollm2.py must fail.
"""

from __future__ import annotations

import inspect
import textwrap

import pytest
import test_smollm2 as model_guards
from pages import test_kv_cache as kv_guards  # tests/fast/pages/, a namespace package

import qkv
from qkv import kvcache, smollm2, toy


def broken(function, *edits: tuple[str, str]):
    """``function`` recompiled from its source with each (old, new) text replaced once."""
    source = textwrap.dedent(inspect.getsource(function))
    source = source[source.index("def ") :]  # no decorators, no section markers before it
    for old, new in edits:
        assert source.count(old) == 1, f"{function.__qualname__} no longer contains {old!r}"
        source = source.replace(old, new)
    namespace = dict(vars(inspect.getmodule(function)))
    exec(compile(source, f"<broken {function.__qualname__}>", "exec"), namespace)
    return namespace[function.__name__]


# keys and values of every position so far, projected again at every step
REPROJECT = (
    ("split_heads(token @ w.w_k", "split_heads(x[: t + 1] @ w.w_k"),
    ("split_heads(token @ w.w_v", "split_heads(x[: t + 1] @ w.w_v"),
    ("cache.append(k_new, v_new)", "cache = KVCache(k_new, v_new)"),
)
# every query so far against every key so far, keeping the last row
ALL_SCORES = (
    ("split_heads(token @ w.w_q", "split_heads(x[: t + 1] @ w.w_q"),
    ("attention(q, k, v)", "attention(q, k, v, mask=causal_mask(t + 1))"),
    ("merge_heads(out) @ w.w_o", "merge_heads(out)[-1:] @ w.w_o"),
)


@pytest.mark.parametrize("edits", [REPROJECT, ALL_SCORES], ids=["re-projects", "all-scores"])
def test_a_wasteful_decoder_gives_the_right_outputs(edits):
    w = qkv.MultiHeadWeights.random(0, d_model=16, n_heads=4, n_kv_heads=2)
    x = toy.embeddings(d_model=16)
    wasteful = broken(kvcache.decode_with_cache, *edits)
    assert abs(wasteful(x, w) - qkv.decode_with_cache(x, w)).max() < 1e-12


def test_the_projection_guard_fails_on_a_decoder_that_re_projects(monkeypatch):
    monkeypatch.setattr(qkv, "decode_with_cache", broken(kvcache.decode_with_cache, *REPROJECT))
    # the counter shows the prefix projected again: 1, 2, 3... positions, not 1 per step
    # (the guard reads lengths 1, 2, 5, ...: the first it fails on is 2)
    with pytest.raises(AssertionError, match=r"\[1, 2\] == \[1, 1\]"):
        kv_guards.test_key_value_projection_counts()
    kv_guards.test_score_counts(4)  # it forms the scores it should


def test_the_score_guard_fails_on_a_decoder_that_forms_every_score(monkeypatch):
    monkeypatch.setattr(qkv, "decode_with_cache", broken(kvcache.decode_with_cache, *ALL_SCORES))
    # 4 heads: step s forms s x s scores, not s (first seen at length 2)
    with pytest.raises(AssertionError, match=r"\[4, 16\] == \[4, 8\]"):
        kv_guards.test_score_counts(4)
    kv_guards.test_key_value_projection_counts()  # it projects what it should


def test_the_trained_models_work_check_fails_on_a_decoder_that_reruns_the_prefix(model, monkeypatch):
    rerun = broken(
        smollm2.decode_cached,
        (
            "x, seen = run_layers(model, model.embedding[[token]], [t], caches)",
            "caches = [KVCache.empty(config.n_kv_heads, config.d_head, dtype=model.embedding.dtype)\n"
            "                  for _ in model.layers]\n"
            "        x, seen = run_layers(model, model.embedding[ids[: t + 1]], list(range(t + 1)), caches)\n"
            "        x = x[-1:]",
        ),
    )
    monkeypatch.setattr(smollm2, "decode_cached", rerun)
    # 30 layers: step s projects s positions in each, not 1
    with pytest.raises(AssertionError, match=r"\[30, 60, 90, "):
        model_guards.test_cached_decoding_equals_the_full_pass_and_counts_the_saving(model)
