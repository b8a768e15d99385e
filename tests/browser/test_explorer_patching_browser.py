"""Patching in the explorer's lab (issue 34, part 3), in headless Chromium: each head's output,
or the stream entering a layer at one position, copied from text 2's run into text 1's.

Expected numbers come from ``qkv.lab.effects.MinimalPair`` run on the same pair here, never
from the page. qkv counts layers, heads and positions from 0; the page from 1, and its
layer 1 of the stream is the embeddings, qkv's stream entering layer 0.
"""

from __future__ import annotations

from functools import cache
from urllib.parse import quote

import numpy as np
import pytest
from axe_views import AXE_JS, WIDTHS, audit_views
from browser_model import model

from qkv.lab import effects

pytestmark = pytest.mark.usefixtures("offline_and_quiet")

EFFECT_SHOWN = 0.00005 + 1e-4  # four decimals, rounded once; plus the 1e-4 the worker may differ
PANEL = "#qkv-explorer .qx-trained"

# (text 1, text 2, continuation 1, continuation 2): one-token continuations, and two-token ones
CAPITALS = ("The capital of France is", "The capital of Italy is", " Paris", " Rome")
LANGUAGES = (
    "Anna lives in Paris, so she speaks",
    "Anna lives in Berlin, so she speaks",
    " French fluently",
    " German fluently",
)


@cache
def minimal_pair(t1: str, t2: str, c1: str, c2: str) -> effects.MinimalPair:
    return effects.MinimalPair.of(model(), t1, t2, c1, c2)


def open_pair(page, site_url, t1: str, t2: str, c1: str, c2: str) -> None:
    page.goto(
        f"{site_url}explorer/?model=smollm2&text={quote(t1, safe='')}&text2={quote(t2, safe='')}"
        f"&cont1={quote(c1, safe='')}&cont2={quote(c2, safe='')}"
    )
    page.wait_for_selector("#qkv-explorer.qx-ready")
    page.get_by_test_id("load-model").click()
    page.wait_for_selector(f"{PANEL}[data-paired]", timeout=180000)


def shown_grid(page, testid: str, column: str, shape: tuple[int, int]) -> np.ndarray:
    """The page's cells as an array indexed from 0, (layer, head or position)."""
    got = page.eval_on_selector_all(
        f'[data-testid="{testid}"]',
        f"cs => cs.map(c => [+c.dataset.layer, +c.dataset.{column}, c.dataset.value])",
    )
    grid = np.full(shape, np.nan)
    for layer, k, value in got:
        grid[layer - 1, k - 1] = float(value)
    assert len(got) == shape[0] * shape[1]
    return grid


@pytest.mark.claim("explorer-lab-patching")
@pytest.mark.parametrize("pair", [CAPITALS, LANGUAGES], ids=["capitals", "languages"])
def test_patching_each_head_gives_qkvs_effects(page, site_url, pair):
    open_pair(page, site_url, *pair)
    page.get_by_test_id("patch-heads").click()
    page.wait_for_selector(f"{PANEL}[data-patched='heads']", timeout=600000)
    want = minimal_pair(*pair).head_effects()  # (n_layers, n_heads), from 0
    got = shown_grid(page, "patch-head-cell", "head", want.shape)
    np.testing.assert_allclose(got, want, rtol=0, atol=EFFECT_SHOWN)
    # the largest effect is named as qkv finds it
    layer, head = np.unravel_index(np.argmax(np.abs(want)), want.shape)
    assert f"layer {layer + 1} head {head + 1}" in page.get_by_test_id("patch-summary").text_content()


@pytest.mark.claim("explorer-lab-patching")
@pytest.mark.parametrize("pair", [CAPITALS, LANGUAGES], ids=["capitals", "languages"])
def test_patching_the_stream_gives_qkvs_effects_with_layer_1_the_embeddings(page, site_url, pair):
    open_pair(page, site_url, *pair)
    page.get_by_test_id("patch-stream").click()
    page.wait_for_selector(f"{PANEL}[data-patched='stream']", timeout=600000)
    mp = minimal_pair(*pair)
    want = mp.stream_effects()  # (n_layers, T): row 0 the embeddings
    got = shown_grid(page, "patch-stream-cell", "position", want.shape)
    np.testing.assert_allclose(got, want, rtol=0, atol=EFFECT_SHOWN)
    # control: at the first position where the texts differ, copying the embedding of text 2's
    # token moves text 1 a long way towards text 2, and positions before it move nothing
    assert got[0, mp.since] > 0.5
    assert np.all(got[:, : mp.since] == 0)
    first_row = page.locator('[data-testid="patch-stream-cell"][data-layer="1"]').first
    header = first_row.locator("xpath=../th").text_content()
    assert "embeddings" in header


@pytest.mark.claim("explorer-lab-patching")
def test_texts_of_different_lengths_are_not_patched_and_the_page_says_why(page, site_url):
    t1, t2 = "The capital of France is", "The capital of the United Kingdom is"
    open_pair(page, site_url, t1, t2, " Paris", " London")
    n1, n2 = (len(model().encode(t)) for t in (t1, t2))
    assert n1 != n2
    note = page.get_by_test_id("patch-note").text_content()
    assert f"text 1 has {n1} tokens and text 2 has {n2}" in note
    assert not page.get_by_test_id("patch-heads").is_visible()
    assert not page.get_by_test_id("patch-stream").is_visible()
    with pytest.raises(ValueError, match="as many tokens"):
        effects.MinimalPair.of(model(), t1, t2, " Paris", " London")


@pytest.mark.claim("explorer-lab-patching")
def test_cancel_stops_the_run_and_frees_the_model(page, site_url):
    open_pair(page, site_url, *LANGUAGES)
    page.get_by_test_id("patch-heads").click()
    cells = '[data-testid="patch-head-cell"][data-value]'
    page.wait_for_selector(cells, timeout=180000)  # the first layer's results are in
    page.get_by_test_id("patch-cancel").click()
    page.wait_for_selector(f"{PANEL}[data-patched='cancelled:heads']")
    filled = page.locator(cells).count()
    assert 0 < filled < 270
    assert "Cancelled" in page.get_by_test_id("patch-status").text_content()
    assert not page.get_by_test_id("patch-cancel").is_visible()
    page.wait_for_timeout(3000)
    assert page.locator(cells).count() == filled  # nothing more arrives
    # the worker is free: the stream runs to its end
    page.get_by_test_id("patch-stream").click()
    page.wait_for_selector(f"{PANEL}[data-patched='stream']", timeout=600000)


@pytest.mark.claim("explorer-lab-python")
def test_open_in_python_prints_the_patching_grid_on_the_page(page, site_url, tmp_path):
    import subprocess
    import sys

    from support import HANG

    open_pair(page, site_url, *CAPITALS)
    page.get_by_test_id("patch-stream").click()
    page.wait_for_selector(f"{PANEL}[data-patched='stream']", timeout=600000)
    with page.expect_download() as info:
        page.get_by_test_id("open-python").click()
    script = tmp_path / info.value.suggested_filename
    info.value.save_as(script)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=HANG, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    printed = [line.split() for line in done.stdout.splitlines() if line.startswith("patch stream layer ")]
    n_layers = model().config.n_layers
    assert [int(words[3]) for words in printed] == list(range(1, n_layers + 1))
    from_script = np.array([[float(x) for x in words[4:]] for words in printed])
    shown = shown_grid(page, "patch-stream-cell", "position", from_script.shape)
    np.testing.assert_allclose(shown, from_script, rtol=0, atol=EFFECT_SHOWN)


def test_axe_finds_nothing_in_the_patching_view(browser, site_url):
    context = browser.new_context(viewport={"width": WIDTHS[0], "height": 900}, reduced_motion="reduce")
    context.add_init_script(path=str(AXE_JS))
    page = context.new_page()
    try:
        open_pair(page, site_url, *CAPITALS)
        page.get_by_test_id("patch-stream").click()
        page.wait_for_selector(f"{PANEL}[data-patched='stream']", timeout=600000)
        page.get_by_test_id("patch-heads").click()
        page.wait_for_selector('[data-testid="patch-head-cell"][data-value]', timeout=180000)
        found = audit_views(page)  # light and dark, 1280 and 390 px, while the heads run
        assert found == []
        page.wait_for_selector(f"{PANEL}[data-patched='heads']", timeout=600000)
        region = page.locator(".qx-patch-table").locator("xpath=..")
        region.focus()  # the table scrolls by keyboard inside its own region
        assert page.evaluate("document.activeElement.getAttribute('role')") == "region"
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            assert page.evaluate("document.documentElement.scrollWidth") <= width
    finally:
        context.close()
