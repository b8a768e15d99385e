"""Figures: deterministic, cached, placed by the chapters, and showing what their alt text says.

The build computes them with the qkv-artifacts plugin (``sitebuild/qkv_site/artifacts/``); the
figures are the modules of ``sitebuild/qkv_site/figures/``.
Tests that change code work on a temporary copy of ``qkv/`` and a temporary cache, never
on the real tree.
"""

from __future__ import annotations

import importlib.metadata
import io
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from mkdocs.exceptions import PluginError
from qkv_site.artifacts.figures import figure_html, tokens_of
from qkv_site.artifacts.figures import job as figure_job
from qkv_site.artifacts.runner import ArtifactError, Runner
from qkv_site.figures import (
    cross_attention,
    data_flow,
    explorer_widths,
    four_stages,
    head_roles,
    key_or_value,
    kv_cache_memory,
    kv_cache_work,
    masks,
    multi_head,
    multi_head_flow,
    names,
    one_row_three_vectors,
    saturation,
    scale_training,
    score_spread,
    soft_vs_hard,
    tied_qk,
    vanishing_gradient,
    wide_scores,
    wrong_axis,
)
from qkv_site.figures.render import load
from qkv_site.figures.style import STYLES
from support import ROOT, attention_product_flops, numbers, softmax_by_hand

from qkv import MODELS, KVCache, causal_mask, project, self_attention, toy

NAMES = names()


def copy_project_qkv(dest: Path, keep: set[str] | None = None) -> Path:
    """Copy ``qkv/`` and the site package to ``dest``; with ``keep``, drop every figure module
    not named in it."""
    for package in ("qkv", "sitebuild/qkv_site"):
        shutil.copytree(ROOT / package, dest / package, ignore=shutil.ignore_patterns("__pycache__"))
    if keep is not None:
        for name in set(NAMES) - keep:
            (dest / figure_job(name, dest).source).unlink()
    return dest


@pytest.fixture
def runner(tmp_path):
    """A runner for the real tree with an empty cache; its worker processes end with it."""
    made = []

    def make(root: Path = ROOT) -> Runner:
        made.append(Runner(root, tmp_path / "cache", concurrency=1))
        return made[-1]

    yield make
    for r in made:
        r.close()


# ---- determinism and the cache (the runner of sitebuild/qkv_site/artifacts) -----------------


def test_svg_has_no_timestamp_and_salted_ids(runner):
    result = runner().run(figure_job("kv-cache-memory", ROOT))
    light, dark = (result.text(f"kv-cache-memory-{theme}.svg") for theme in ("light", "dark"))
    assert "<dc:date>" not in light
    hashed = re.compile(r'id="([mp][0-9a-f]{10})"')  # marker and clip-path ids
    assert hashed.findall(light), "the figure has hashed ids"
    # each theme has its own salt, so two SVGs inlined in one page could never collide
    assert set(hashed.findall(light)).isdisjoint(hashed.findall(dark))


def test_cache_hits_when_nothing_changed_and_misses_when_a_dependency_changes(tmp_path, runner):
    root = copy_project_qkv(tmp_path / "project", keep={"kv-cache-memory", "score-spread"})
    assert names(root / "sitebuild" / "qkv_site" / "figures") == ["kv-cache-memory", "score-spread"]
    run = runner(root)
    folder = root / "sitebuild" / "qkv_site" / "figures"

    def render():
        run.start_build()
        return run.run(figure_job("kv-cache-memory", root))

    first = render()
    assert first.fresh, "an empty cache renders"
    assert not render().fresh, "nothing changed: served from the cache"

    with (folder / "score_spread.py").open("a") as f:
        f.write("\n# another figure's module changed\n")
    assert not render().fresh, "another figure's module is not a dependency"

    with (folder / "kv_cache_memory.py").open("a") as f:
        f.write("\n# this figure's module changed\n")
    assert render().fresh, "the figure's own module changed"
    assert not render().fresh

    with (root / "qkv" / "cost.py").open("a") as f:
        f.write("\n# the package changed\n")
    assert render().fresh, "a module of qkv it imports changed"

    with (folder / "style.py").open("a") as f:
        f.write("\n# the style changed\n")
    assert render().fresh, "the style changed"


def test_cache_entry_covers_the_library_versions(runner, monkeypatch):
    run = runner()
    job = figure_job("kv-cache-memory", ROOT)
    run.run(job)
    assert run.cached(job) is not None
    real_version = importlib.metadata.version
    monkeypatch.setattr(
        importlib.metadata, "version", lambda p: "0.0-other" if p == "matplotlib" else real_version(p)
    )
    run.start_build()  # the next build reads the versions again
    assert run.cached(job) is None, "a figure drawn with another matplotlib is not reused"


def test_a_failing_figure_script_names_the_script_and_shows_its_stderr(tmp_path, runner):
    root = copy_project_qkv(tmp_path / "project", keep=set())
    (root / "sitebuild" / "qkv_site" / "figures" / "broken_demo.py").write_text(
        'ALT = CAPTION = "x"\n\ndef build(style):\n    raise RuntimeError("the data went missing")\n'
    )
    with pytest.raises(ArtifactError) as caught:
        runner(root).run(figure_job("broken-demo", root))
    message = str(caught.value)
    assert "sitebuild/qkv_site/figures/broken_demo.py" in message
    assert "RuntimeError: the data went missing" in message  # the script's own stderr
    assert not any((tmp_path / "cache" / "figures").iterdir()), "no half-written entry"


def test_a_token_sharing_its_line_fails_naming_the_page():
    with pytest.raises(PluginError, match=r"page\.md: a figure token shares its line"):
        tokens_of("<p>text <!-- figure: masks --> more</p>", "page.md", NAMES)


def test_figure_html_escapes_alt_and_caption():
    svg = b'<svg width="360pt" height="180pt">'
    meta = {"alt": 'a "quoted" <alt>', "caption": "1 < 2 & 3"}
    out = figure_html("x", meta, {"light": svg, "dark": svg}, lambda variant: f"../figures/x-{variant}.svg")
    assert 'alt="a &quot;quoted&quot; &lt;alt&gt;"' in out
    assert "<figcaption>1 &lt; 2 &amp; 3</figcaption>" in out
    assert 'width="480" height="240"' in out  # points to CSS pixels


# ---- each figure shows what its alt text says ---------------------------------------------


def test_every_figure_has_alt_text_stating_a_finding_and_a_caption():
    for name in NAMES:
        module = load(name)
        assert len(module.ALT) > 80 and module.ALT.endswith("."), name
        assert module.CAPTION.strip(), name


def test_score_spread_follows_sqrt_d_k_and_scaled_stays_near_one():
    d = score_spread.data()
    rel_se = 0.5 * np.sqrt((2 + 6 / d.dims) / score_spread.N_DRAWS)  # std of a sample std
    assert np.all(np.abs(d.unscaled / np.sqrt(d.dims) - 1) < 5 * rel_se)
    for d_k in (1, 64, 512):  # "about 1 / 8 / 23": the rounded √d_k, within 10 %
        stated = round(math.sqrt(d_k))
        assert f"about {stated} at dₖ = {d_k}" in score_spread.ALT
        assert abs(d.unscaled[list(d.dims).index(d_k)] / stated - 1) < 0.1
    assert np.all(np.abs(d.scaled - 1) < 0.05)


def test_saturation_without_scaling_becomes_one_hot():
    d = saturation.data()
    mean = 0
    assert abs(d.entropy[False][0, mean] - 1.5) < 0.15 and d.entropy[False][-1, mean] < 0.15
    assert d.max_weight[False][0, mean] < 0.4 and d.max_weight[False][-1, mean] > 0.9
    assert np.all(d.entropy[True][:, mean] > 1.4)
    assert np.all(d.max_weight[True][:, mean] < 0.45)
    assert np.all(d.entropy[False][1:, mean] < d.entropy[False][:-1, mean]), "falls steadily"


def test_vanishing_gradient_shrinks_without_scaling():
    d = vanishing_gradient.data()
    median = 1
    scaled, raw = d.quartiles[True][:, median], d.quartiles[False][:, median]
    assert np.all((scaled > 0.35) & (scaled < 0.45))
    at_64, at_512 = list(d.dims).index(64), list(d.dims).index(512)
    assert 5 < scaled[at_64] / raw[at_64] < 20  # "about 10 times smaller"
    assert scaled[at_512] / raw[at_512] > 1000


def test_scale_training_alt_states_what_the_curves_show(once_per_run):
    d = once_per_run("figure-data-scale-training", scale_training.data)  # one run (10 s) for all
    for (d_k, t), loss in d.loss.items():
        unscaled, scaled = d.best_rate(d_k, t)
        mean = loss.mean(axis=0)  # (arm, rate, eval)
        assert mean[0, unscaled, 0] >= 1 and mean[1, scaled, 0] > 0.95  # "from a loss of 1 or more"
        assert mean[0, unscaled, -1] < 0.1 and mean[1, scaled, -1] < 0.1
        assert mean[0, scaled, -1] > 0.1
        if d_k == 256:
            assert mean[0, scaled, -1] > 1.8


def _shapes(text: str) -> list[tuple[int, ...]]:
    """Every shape a chapter prints in ``text``: "(6, 8) @ (8, 6) -> (6, 6)" gives three."""
    return [tuple(int(n) for n in m.split(",")) for m in re.findall(r"\((\d+(?:, \d+)*)\)", text)]


def _printed_weights(text: str, columns) -> tuple[list[str], np.ndarray]:
    """The weight table a chapter prints below a header of column labels ("  she  drank ..."):
    its row labels and its numbers, as printed (three decimals)."""
    lines = text.splitlines()
    header = [i for i, line in enumerate(lines) if line.split() == list(columns)]
    assert len(header) == 1, f"no single table with columns {columns} in:\n{text}"
    labels, rows = [], []
    for line in lines[header[0] + 1 :]:
        label, *cells = line.split() or [""]
        if len(cells) != len(columns) or not all(re.fullmatch(r"-?\d+\.\d+", c) for c in cells):
            break
        labels.append(label)
        rows.append([float(c) for c in cells])
    return labels, np.array(rows)


def test_soft_vs_hard_draws_the_chapters_palette(page_output):
    d = soft_vs_hard.data()
    shown = page_output("soft-lookup.md")
    section = "soft_lookup.py:soft"
    # the chapter's scores are the figure's keys against its query ...
    np.testing.assert_allclose(
        numbers(shown.line(section, "scores:")), soft_vs_hard.KEYS @ soft_vs_hard.QUERY[0], rtol=0, atol=5e-4
    )
    # ... its weights, entry by entry in the figure's order, are the figure's soft bars ...
    printed = [line.split() for line in shown[section].splitlines() if "weight on" in line]
    assert [words[2] for words in printed] == list(d.names)
    np.testing.assert_allclose([float(words[3]) for words in printed], d.soft, rtol=0, atol=5e-4)
    # ... and its answer, the blend of the values, is the figure's soft swatch
    np.testing.assert_allclose(numbers(shown.line(section, "answer:")), d.soft_answer, rtol=0, atol=5e-4)
    # the dict's lookup moved to the chapter's depth page
    orange = numbers(page_output("soft-lookup-in-depth.md").line("soft_lookup.py:hard", "palette['orange']"))
    np.testing.assert_array_equal(orange, soft_vs_hard.VALUES[list(d.names).index("orange")])


def test_soft_vs_hard_soft_weighs_everything_hard_picks_one():
    d = soft_vs_hard.data()
    assert np.all(d.soft > 0) and np.isclose(d.soft.sum(), 1)
    order = [d.names[i] for i in np.argsort(-d.soft)]
    assert set(order[:2]) == {"red", "orange"} and order[-1] == "blue"
    assert d.hard.tolist() == [1.0, 0.0, 0.0, 0.0] and d.names[0] == "red"
    assert not any(np.allclose(d.soft_answer, v) for v in soft_vs_hard.VALUES), "a blend"
    np.testing.assert_array_equal(d.hard_answer, soft_vs_hard.VALUES[0])


def test_soft_vs_hard_calls_the_hard_panel_an_argmax_not_a_dictionary():
    # The chapter's text: a dict needs a key equal to the one asked for, and no key equals
    # the query, so a dict would return nothing; the panel's answer is the argmax's.
    from qkv_site.figures.style import LIGHT

    assert not any(np.array_equal(k, soft_vs_hard.QUERY[0]) for k in soft_vs_hard.KEYS)
    titles = [ax.get_title(loc="left") for ax in soft_vs_hard.build(LIGHT).axes]
    (hard,) = [t for t in titles if t.startswith("Hard")]
    assert "argmax" in hard and "dictionary" not in hard
    assert "dictionary-style" not in soft_vs_hard.ALT and "argmax" in soft_vs_hard.ALT
    d = soft_vs_hard.data()
    assert d.hard.argmax() == (soft_vs_hard.KEYS @ soft_vs_hard.QUERY[0]).argmax()


def test_key_or_value_shows_a_value_leaving_the_weights_and_a_key_moving_them():
    d = key_or_value.data()
    words, hands = list(d.words), list(d.hands)
    milk = words.index("milk")  # the word edited; every number here is drank's
    dairy, container = hands.index("dairy"), hands.index("container")
    built, new_value, wiped_key = d.weights
    # drank's scaled scores as built: 8/√8 on milk, 4/√8 on she, 0 on the other four;
    # with milk's key wiped, milk scores 0 like the others
    e8, e4 = np.exp(8 / np.sqrt(8)), np.exp(4 / np.sqrt(8))
    assert built[milk] == pytest.approx(e8 / (e8 + e4 + 4), rel=1e-12)
    assert wiped_key[milk] == pytest.approx(1 / (e4 + 5), rel=1e-12)
    np.testing.assert_array_equal(new_value, built)  # "do not move at all"
    assert not np.allclose(wiped_key, built)
    # the output is the weights times the values: a new value moves drank's output by its
    # weight on milk, out of dairy and into container
    moved = d.received[1] - d.received[0]
    np.testing.assert_allclose(moved[[dairy, container]], [-built[milk], built[milk]], rtol=1e-12)
    assert d.received[2, dairy] < d.received[0, dairy]  # "the dairy it receives falls"
    assert d.received[2, dairy] == pytest.approx(wiped_key[milk], rel=1e-12)  # milk's value kept
    # the alt text's numbers, in its order: dairy lost, container gained, then the weight on
    # milk before and after its key is wiped
    stated = [-moved[dairy], moved[container], built[milk], wiped_key[milk]]
    assert numbers(key_or_value.ALT) == [round(float(x), 2) for x in stated]


def test_wide_scores_only_the_wide_undivided_head_lands_on_one_key():
    d = wide_scores.data()
    # the same draws, with softmax written out: q·k, divided by √d_k or not
    rng = np.random.default_rng(wide_scores.SEED)
    for i, d_k in enumerate(wide_scores.WIDTHS):
        q = rng.standard_normal(d_k)
        k = rng.standard_normal((wide_scores.N_KEYS, d_k))
        for got, divisor in ((d.unscaled[i], 1.0), (d.scaled[i], np.sqrt(d_k))):
            e = np.exp((k @ q - (k @ q).max()) / divisor)
            np.testing.assert_allclose(got, e / e.sum(), rtol=1e-12, atol=1e-15)
    # the ALT's finding: one key takes more than 0.99 only in the wide head undivided;
    # every other panel keeps each key at or below 0.4
    narrow, wide = (wide_scores.WIDTHS.index(w) for w in (4, 256))
    assert d.unscaled[wide].max() > 0.99
    assert d.scaled.max() <= 0.4 and d.unscaled[narrow].max() <= 0.4
    assert "more than 0.99" in wide_scores.ALT and "more than 0.4" in wide_scores.ALT
    assert "head 4 wide" in wide_scores.ALT and "head 256 wide" in wide_scores.ALT


def test_tied_qk_is_symmetric_only_when_tied_and_matches_the_chapter(page_output):
    d = tied_qk.data()
    i, j = (d.words.index(w) for w in tied_qk.PAIR)
    assert abs(d.separate[i, j] - d.separate[j, i]) > 1.0  # "differs clearly"
    np.testing.assert_allclose(d.tied, d.tied.T, rtol=0, atol=1e-12)
    q, k, _ = project(toy.embeddings(), toy.projections(tied_qk.D_K))
    root = np.sqrt(tied_qk.D_K)
    np.testing.assert_allclose(d.separate, q @ k.T / root, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(d.tied, k @ k.T / root, rtol=1e-12, atol=1e-12)  # W_Q = W_K
    # Chapter 4's deep dive prints each direction of the pair with separate matrices, the
    # chapter itself tied.
    lines = [
        line
        for page in ("why-three-projections-in-depth.md", "why-three-projections.md")
        for b in page_output(page).blocks
        for line in b.text.splitlines()
    ]
    for (a, b), (row, col) in ((tied_qk.PAIR, (i, j)), (tied_qk.PAIR[::-1], (j, i))):
        printed = [numbers(line)[0] for line in lines if line.startswith(f"{a} -> {b}: score")]
        np.testing.assert_allclose(printed, [d.separate[row, col], d.tied[row, col]], rtol=0, atol=5e-4)
    largest = [numbers(line)[0] for line in lines if line.startswith("largest |S - Sᵀ|:")]
    np.testing.assert_allclose(largest, [np.abs(d.separate - d.separate.T).max(), 0], rtol=0, atol=5e-4)


def test_data_flow_shapes_are_those_of_the_toy_layer(page_output):
    t, d_model, d_k, d_v = len(toy.SENTENCE), toy.D_MODEL, toy.D_K, toy.D_V
    expected = {
        "x": (t, d_model),
        "w_q": (d_model, d_k),
        "w_k": (d_model, d_k),
        "w_v": (d_model, d_v),
        "q": (t, d_k),
        "k": (t, d_k),
        "v": (t, d_v),
        "scores": (t, t),
        "scaled": (t, t),
        "masked": (t, t),
        "weights": (t, t),
        "mixed": (t, d_v),
        "w_o": (d_v, d_model),
        "update": (t, d_model),
        "next": (t, d_model),
    }
    assert data_flow.data() == expected
    for shape in ("6 × 16", "6 × 8", "6 × 4", "6 × 6", "4 × 16"):  # the alt text's shapes
        assert shape in data_flow.ALT
    # the chapter prints the same shapes, step by step
    shown = page_output("step-by-step.md")
    printed = {}
    printed["x"], printed["q"], printed["k"], printed["v"] = _shapes(shown["step_by_step.py:inputs"])
    printed["scores"] = _shapes(shown.line("step_by_step.py:scores", "scores = Q @ K.T:"))[-1]
    printed["scaled"] = _shapes(shown.line("step_by_step.py:scale", "scaled ="))[-1]
    printed["weights"] = _shapes(shown.line("step_by_step.py:softmax", "weights ="))[-1]
    printed["mixed"], printed["w_o"], printed["update"] = _shapes(
        shown.line("step_by_step.py:residual", "output")
    )
    printed["next"] = _shapes(shown.line("step_by_step.py:residual", "X_next ="))[-1]
    assert printed == {name: expected[name] for name in printed}


def test_four_stages_follow_the_formula_and_match_the_chapter(page_output):
    d = four_stages.data()
    assert 7.5 < d.raw.max() - d.raw.min() < 8.5  # "spread over about eight units"
    np.testing.assert_allclose(d.scaled, d.raw / np.sqrt(8))
    assert d.scaled.max() - d.scaled.min() < 3.2  # "within about three units"
    assert d.values.shape == (len(toy.SENTENCE), toy.D_V)
    q, k, v = project(toy.embeddings(), toy.projections(toy.D_K, toy.D_V))  # the chapter's toy
    scores = q @ k.T
    row = d.words.index(four_stages.QUERY)
    np.testing.assert_allclose(d.raw, scores[row], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(d.values, v, rtol=1e-12, atol=1e-12)
    spreads = {w: np.ptp(r) for w, r in zip(d.words, scores, strict=True)}
    assert max(spreads, key=spreads.get) == four_stages.QUERY  # "the row whose scores spread most"
    assert np.isclose(d.weights.sum(), 1) and np.all(d.weights > 0)
    np.testing.assert_allclose(d.output, d.weights @ d.values, atol=1e-12)
    # the figure's weights are the query's row of the chapter's printed table
    shown = page_output("step-by-step.md")
    labels, table = _printed_weights(shown["step_by_step.py:softmax"], d.words)
    assert labels == list(d.words)
    np.testing.assert_allclose(table[row], d.weights, rtol=0, atol=5e-4)


def test_explorer_widths_spread_with_the_division_and_collapse_without_it():
    d = explorer_widths.data()
    x = toy.embeddings(d.words)
    i = d.words.index(explorer_widths.QUERY)
    for row, d_k in enumerate(d.widths):
        p = toy.projections(d_k, d_v=toy.D_V)
        raw = (x @ p.w_q)[i] @ (x @ p.w_k).T  # the query against every key, written out
        np.testing.assert_allclose(d.scaled[row], softmax_by_hand(raw / np.sqrt(d_k)), atol=1e-12)
        np.testing.assert_allclose(d.unscaled[row], softmax_by_hand(raw), atol=1e-12)
    assert d.widths == (1, 16, 64)  # the widths the alt text names
    np.testing.assert_array_equal(d.scaled[0], d.unscaled[0])  # "at dₖ = 1 the two are the same"
    assert d.scaled.max() < 0.6  # "stays below 0.6 at every width"
    # "grows from 0.28 to 0.97 at dₖ = 16 and to 1.00 at dₖ = 64"
    assert [f"{w:.2f}" for w in d.unscaled.max(axis=1)] == ["0.28", "0.97", "1.00"]
    assert np.all(np.diff(d.unscaled.max(axis=1)) > 0)
    for shown in ("0.28", "0.97", "1.00", "below 0.6"):
        assert shown in explorer_widths.ALT


def test_masks_give_exact_zeros_and_match_the_printed_tables(page_output):
    d = masks.data()
    assert np.all(d.causal[np.triu_indices(6, 1)] == 0.0)
    assert np.all(d.padding[:, masks.REAL :] == 0.0)
    for w in (d.causal, d.padding):
        np.testing.assert_allclose(w.sum(axis=-1), 1.0)
    causal = self_attention(
        toy.embeddings(), toy.projections(toy.D_K), mask=causal_mask(len(toy.SENTENCE))
    ).weights
    np.testing.assert_array_equal(causal, d.causal)
    # both panels are printed tables: the causal one in the chapter, the padded one (its
    # padded sequence is the second) on the chapter's depth page, masks-in-pytorch.md
    for page, section, words, weights in (
        ("three-kinds.md", "three_kinds.py:causal", d.words, d.causal),
        ("masks-in-pytorch.md", "three_kinds.py:padding", d.padded_words, d.padding),
    ):
        labels, table = _printed_weights(page_output(page)[section], words)
        assert labels == list(words)
        np.testing.assert_allclose(table, weights, rtol=0, atol=5e-4)


def test_cross_attention_is_rectangular_with_unit_rows_and_matches_the_printed_run(page_output):
    d = cross_attention.data()
    assert d.weights.shape == (len(cross_attention.DECODER), len(toy.SENTENCE))
    # random weights carry no alignment, so no row or column is named by a word (the figure
    # once put a French phrase over the English toy sentence), and the text says random
    labels = [*d.query_words, *d.key_words, *(t.title for t in cross_attention.tables())]
    assert all(re.fullmatch(r"[ts]\d", label) for label in [*d.query_words, *d.key_words])
    assert not any(word in label.split() for label in labels for word in toy.SENTENCE)
    assert "random" in cross_attention.ALT and "random" in cross_attention.CAPTION
    assert "random" in cross_attention.tables()[0].title
    np.testing.assert_allclose(d.row_sums, 1.0)
    shown = page_output("masks-in-pytorch.md")  # the run moved to the depth page
    labels, table = _printed_weights(shown["three_kinds.py:cross"], d.key_words)
    assert labels == list(d.query_words)
    np.testing.assert_allclose(table, d.weights, rtol=0, atol=5e-4)


def test_multi_head_maps_differ_and_costs_are_equal():
    d = multi_head.data()
    top = d.weights.argmax(axis=-1)  # (heads, T): each head's favourite key per query
    assert all(len(set(top[:, row])) > 1 for row in range(top.shape[1]))
    (h1, d1), (h2, d2) = multi_head.COST_SPLITS
    assert h1 * d1 == h2 * d2 and d.flops[(h1, d1)] == d.flops[(h2, d2)]
    for (heads, d_head), flops in d.flops.items():  # counted on the arrays attention computes
        assert flops == attention_product_flops(multi_head.COST_T, multi_head.COST_T, d_head, d_head, heads)


def test_kv_cache_work_counts_are_linear_and_quadratic():
    d = kv_cache_work.data()
    t = d.position
    assert d.cached.kv_projections == [1] * len(t)
    assert d.uncached.kv_projections == t.tolist()
    assert d.cached.scores == (kv_cache_work.N_HEADS * t).tolist()
    assert d.uncached.scores == (kv_cache_work.N_HEADS * t * t).tolist()


def test_kv_cache_memory_lines_are_the_bytes_a_cache_holds():
    lines = {line.label: line for line in kv_cache_memory.data()}
    by_name = {m.name: m for m in MODELS}
    for line in lines.values():
        if line.kind in ("sliding-window", "latent"):
            continue  # the next test
        model = by_name[line.label.split(" / ")[0]]
        # measured, not the formula the figure draws: one float16 token in a real cache
        one = KVCache.empty(model.n_kv_heads, model.d_head, dtype=np.float16)
        one.append(*np.zeros((2, model.n_kv_heads, 1, model.d_head)))
        expected = [one.nbytes() * model.n_layers * n / 2**30 for n in kv_cache_memory.CONTEXTS]
        np.testing.assert_allclose(line.gib, expected)
    mha, gqa = lines["Llama 2 7B"], lines["Llama 3 8B / Mistral 7B"]
    np.testing.assert_allclose(mha.gib / gqa.gib, 4.0)  # "4 times the memory"
    assert min(lines.values(), key=lambda line: line.gib[0]).label == "Falcon 7B"


def test_kv_cache_memory_windowed_and_latent_lines_follow_the_alt_text():
    lines = {line.label: line for line in kv_cache_memory.data()}
    contexts = np.array(kv_cache_memory.CONTEXTS)
    # by hand: K and V × KV heads × head width × 2 bytes, per layer and token kept
    mistral = lines["Mistral 7B"].gib * 2**30
    np.testing.assert_array_equal(mistral, 32 * 2 * 8 * 128 * 2 * np.minimum(contexts, 4096))
    assert (np.diff(mistral[contexts >= 4096]) == 0).all()  # "stays flat from 4,096 tokens on"
    gemma = lines["Gemma 2 9B, half the layers"].gib * 2**30
    per_layer_token = 2 * 8 * 256 * 2
    np.testing.assert_array_equal(gemma, per_layer_token * (21 * np.minimum(contexts, 4096) + 21 * contexts))
    full_rate = 42 * per_layer_token
    assert (np.diff(gemma[contexts >= 4096]) / np.diff(contexts[contexts >= 4096]) == full_rate / 2).all()
    latent = lines["DeepSeek-V2"].gib * 2**30
    np.testing.assert_array_equal(latent, 60 * (512 + 64) * 2 * contexts)
    assert (latent < lines["Llama 3 8B / Mistral 7B"].gib * 2**30).all()  # "below Llama 3 8B's"
    dashed = {line.label for line in lines.values() if line.kind in kv_cache_memory.DASHED}
    assert dashed == {"Mistral 7B", "Gemma 2 9B, half the layers", "DeepSeek-V2"}


def test_render_refuses_a_figure_whose_text_sticks_out():
    from matplotlib.figure import Figure
    from qkv_site.figures.render import check_text_inside

    figure = Figure(figsize=(2, 1.5), layout="constrained")
    ax = figure.add_subplot()
    ax.set_title("a title far too long to fit in a figure two inches wide")
    figure.savefig(io.BytesIO(), format="svg")
    with pytest.raises(ValueError, match="stick out past the edge"):
        check_text_inside(figure, "demo")
    ax.set_title("short")
    figure.savefig(io.BytesIO(), format="svg")
    check_text_inside(figure, "demo")  # fits: no error


def test_multi_head_flow_splits_attends_concatenates_and_projects():
    d = multi_head_flow.data()
    n, t = multi_head_flow.N_HEADS, len(toy.SENTENCE)
    d_head = toy.D_MODEL // n
    assert d.queries.shape == d.concat.shape == d.output.shape == (t, toy.D_MODEL)
    assert d.weights.shape == (n, t, t) and d.per_head.shape == (n, t, d_head)
    np.testing.assert_allclose(d.weights.sum(axis=-1), 1.0, rtol=0, atol=1e-12)
    # Recomputed here by column slicing, without split_heads / merge_heads:
    w = multi_head_flow.MultiHeadWeights.random(
        np.random.default_rng(multi_head_flow.SEED), toy.D_MODEL, n_heads=n
    )
    x = toy.embeddings()
    for h in range(n):
        band = slice(h * d_head, (h + 1) * d_head)  # head h owns these columns only
        q, k, v = x @ w.w_q[:, band], x @ w.w_k[:, band], x @ w.w_v[:, band]
        np.testing.assert_allclose(d.queries[:, band], q, atol=1e-12)
        s = q @ k.T / np.sqrt(d_head)
        e = np.exp(s - s.max(axis=1, keepdims=True))
        weights = e / e.sum(axis=1, keepdims=True)
        np.testing.assert_allclose(d.weights[h], weights, atol=1e-12)
        np.testing.assert_allclose(d.per_head[h], weights @ v, atol=1e-12)
        np.testing.assert_allclose(d.concat[:, band], weights @ v, atol=1e-12)
    np.testing.assert_allclose(d.output, d.concat @ w.w_o, atol=1e-12)
    # the alt text's sizes
    assert f"{t} rows by {toy.D_MODEL} columns" in multi_head_flow.ALT
    assert f"{n} coloured bands of {d_head} columns" in multi_head_flow.ALT


def test_wrong_axis_rows_sum_to_one_only_over_the_keys():
    d = wrong_axis.data()
    q, k, _ = project(toy.embeddings(), toy.projections(toy.D_K, toy.D_V))
    scores = q @ k.T / np.sqrt(toy.D_K)
    for axis, weights in ((1, d.by_key), (0, d.by_query)):  # by hand, each axis
        e = np.exp(scores - scores.max(axis=axis, keepdims=True))
        np.testing.assert_allclose(weights, e / e.sum(axis=axis, keepdims=True), rtol=1e-12)
    # first: every row sums to 1 and the column sums vary
    np.testing.assert_allclose(d.by_key.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert np.ptp(d.by_key.sum(axis=0)) > 0.1
    # second: every column sums to 1, and the row sums run from 0.78 to 1.57 (the ALT's
    # numbers, to the two decimals written), some under 1 and some over
    np.testing.assert_allclose(d.by_query.sum(axis=0), 1.0, rtol=0, atol=1e-12)
    rows = d.by_query.sum(axis=1)
    low, high = (float(x) for x in re.search(r"run from ([\d.]+) to ([\d.]+)", wrong_axis.ALT).groups())
    assert abs(rows.min() - low) <= 0.005 and abs(rows.max() - high) <= 0.005
    assert rows.min() < 1 < rows.max()


def test_wrong_axis_panels_tables_and_text_name_each_axis_in_the_order_drawn():
    """Each panel's title, the table under it and the alt text name the same axis with the
    same verdict, in the order the panels are drawn (left then right, or top then bottom on a
    phone), and no title says "left" or "right": "right: softmax over the keys", meaning
    correct, stood over the left panel."""
    d, words = wrong_axis.data(), ("keys", "queries")
    drawn = {"keys": d.by_key, "queries": d.by_query}
    tables = [t.title for t in wrong_axis.tables()]
    for narrow in (False, True):
        fig = wrong_axis.build(STYLES["light"], narrow=narrow)
        panels = [ax for ax in fig.axes if ax.get_title()]
        if narrow:  # stacked: top first (the larger y)
            panels = sorted(panels, key=lambda ax: -ax.get_position().y0)
        else:
            panels = sorted(panels, key=lambda ax: ax.get_position().x0)
        titles = [ax.get_title().replace("\n", " ") for ax in panels]
        assert len(titles) == 2 == len(tables)
        for title, table, axis, verdict in zip(titles, tables, words, ("correct", "wrong"), strict=True):
            assert not re.search(r"\b(left|right)\b", f"{title} {table}", re.I), (title, table)
            assert f"over the {axis}" in title and f"over the {axis}" in table.lower()
            assert verdict in title and f"({verdict})" in table
        for ax, axis in zip(panels, words, strict=True):  # the cells drawn are that axis's softmax
            np.testing.assert_array_equal(ax.collections[0].get_array().reshape(d.by_key.shape), drawn[axis])
    # the alt text and the caption take the panels in the same order
    alt = wrong_axis.ALT
    assert alt.index("The first, softmax over the keys") < alt.index("The second, softmax over the queries")
    assert "only the first gives every query a total weight of 1" in wrong_axis.CAPTION
    chapter = (ROOT / "docs" / "traps.md").read_text(encoding="utf-8")
    intro = chapter[: chapter.index("<!-- figure: wrong-axis -->")]
    assert intro.index("over the keys") < intro.index("over the queries")  # the text's order too


def test_head_roles_find_the_key_before_and_the_key_after_the_earlier_copy():
    d = head_roles.data()
    t = len(head_roles.TOKENS)
    # causal: no weight on a later key, and each row sums to 1
    later = np.triu_indices(t, 1)
    assert np.all(d.previous[later] == 0) and np.all(d.induction[later] == 0)
    np.testing.assert_allclose(d.previous.sum(axis=1), 1.0, atol=1e-12)
    found = re.search(r"at least ([\d.]+) of its weight on the key just before", head_roles.ALT)
    least = float(found.group(1))
    # previous-token head: every query after the first, on the key at i - 1
    assert min(d.previous[i, i - 1] for i in range(1, t)) >= least
    # induction head: the second half repeats the first, so the key after the earlier copy of
    # query i's token is i - half + 1; the first half has no copy and spreads evenly
    half = t // 2
    assert head_roles.TOKENS[:half] == head_roles.TOKENS[half:]
    assert f"at least {least} on the key just after the earlier copy" in head_roles.ALT
    assert min(d.induction[i, i - half + 1] for i in range(half, t)) >= least
    for i in range(half):
        np.testing.assert_allclose(d.induction[i, : i + 1], 1 / (i + 1), atol=1e-12)
    # the figure outlines the same keys
    before, after_copy = head_roles.targets()
    assert before == [None, *range(t - 1)]
    assert after_copy == [None] * half + [i - half + 1 for i in range(half, t)]


def test_one_row_three_vectors_gives_milk_a_query_a_key_and_a_value_that_share_no_feature():
    rows = one_row_three_vectors.data()
    assert [r.label for r in rows] == ["X (milk)", "query", "key", "value"]
    x, q, k, v = (dict(zip(r.columns, r.values.tolist(), strict=True)) for r in rows)
    # milk's features, as qkv.toy writes them down, and its row times each matrix, by hand
    assert {f for f, e in x.items() if e} == set(toy.WORD_FEATURES["milk"]) == {"liquid", "dairy"}
    hand, row = toy.hand_built_projections(), rows[0].values
    for r, w in zip(rows[1:], (hand.w_q, hand.w_k, hand.w_v), strict=True):
        by_hand = [sum(row[i] * w[i, j] for i in range(len(row))) for j in range(w.shape[1])]
        np.testing.assert_array_equal(r.values, by_hand)
    # the alt text's finding: one non-zero entry each, under verb, liquid and dairy
    assert [f for f, e in q.items() if e] == ["verb"]
    assert [f for f, e in k.items() if e] == ["liquid"]
    assert [f for f, e in v.items() if e] == ["dairy"] and len(v) == 4 != len(q)
    for word in ("verb", "liquid", "dairy", "four numbers wide"):
        assert word in one_row_three_vectors.ALT
