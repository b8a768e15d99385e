"""Patching on a pool of Web Workers (issue 41, item 1), in headless Chromium: the lab's
patching shared over K dedicated workers (docs/assets/explorer/model/pool.js), K forced by the
page-global ``QKV_WORKERS`` the pool reads before each run.

The cells must be the one-worker run's bit for bit: each effect is read as JavaScript's
``String(x)`` of the number the page filled the cell with (the shortest text that reads back
as the same double), and compared as text, not within a tolerance.
"""

from __future__ import annotations

import pytest
from test_explorer_patching_browser import CAPITALS, LANGUAGES, PANEL, open_pair

pytestmark = pytest.mark.usefixtures("offline_and_quiet")

CELLS = {"heads": ("patch-head-cell", "head"), "stream": ("patch-stream-cell", "position")}


def force_workers(page, k: int) -> None:
    page.evaluate(f"window.QKV_WORKERS = {k}")


def patched_exactly(page, kind: str) -> dict[tuple[int, int], str]:
    """Run one kind of patching to its end; every cell's effect as String(x), by (layer, k)."""
    page.get_by_test_id(f"patch-{kind}").click()
    page.wait_for_selector(f"{PANEL}[data-patched='{kind}']", timeout=900000)
    testid, column = CELLS[kind]
    got = page.eval_on_selector_all(
        f'[data-testid="{testid}"]',
        f"cs => cs.map(c => [+c.dataset.layer, +c.dataset.{column}, String(c.qxEffect)])",
    )
    return {(layer, k): value for layer, k, value in got}


def model_workers(page) -> int:
    """The page's live model workers (model/worker.js; the site's search has a worker too)."""
    return sum(1 for w in page.workers if w.url.split("?")[0].endswith("/model/worker.js"))


def live_workers(page, want: int, timeout_ms: int = 10000) -> int:
    """How many model workers the page has, waiting up to timeout_ms for ``want`` of them (a
    terminated worker's close event takes a moment to arrive)."""
    waited = 0
    while model_workers(page) != want and waited < timeout_ms:
        page.wait_for_timeout(200)
        waited += 200
    return model_workers(page)


@pytest.mark.claim("explorer-lab-patching")
@pytest.mark.parametrize("pair", [CAPITALS, LANGUAGES], ids=["capitals", "languages"])
def test_pool_cells_are_the_one_worker_runs_bit_for_bit_with_k_1_2_3(page, site_url, pair):
    page.add_init_script("window.QKV_WORKERS = 1")
    open_pair(page, site_url, *pair)
    for kind in ("heads", "stream"):
        force_workers(page, 1)
        one = patched_exactly(page, kind)
        assert page.get_attribute(PANEL, "data-patch-workers") == "1"
        n_cols = 9 if kind == "heads" else max(k for _, k in one)
        assert len(one) == 30 * n_cols
        assert all(v not in ("undefined", "NaN") for v in one.values())
        for k in (2, 3):
            force_workers(page, k)
            pooled = patched_exactly(page, kind)
            assert page.get_attribute(PANEL, "data-patch-workers") == str(k)
            assert live_workers(page, k) == k  # the page's worker and k - 1 more
            differ = {cell: (one[cell], pooled.get(cell)) for cell in one if pooled.get(cell) != one[cell]}
            assert differ == {}, (
                f"K={k}, {kind}: cells differ from the one-worker run: {list(differ.items())[:5]}"
            )
    # the page says in words how many cores it used
    text = page.get_by_test_id("patch-cores").text_content()
    assert "Patching runs" in text and "3" in text


@pytest.mark.claim("explorer-lab-patching")
def test_cancel_stops_every_worker_of_the_pool(page, site_url):
    page.add_init_script("window.QKV_WORKERS = 3")
    open_pair(page, site_url, *LANGUAGES)
    page.get_by_test_id("patch-heads").click()
    cells = '[data-testid="patch-head-cell"][data-value]'
    page.wait_for_selector(cells, timeout=300000)  # some batch's results are in
    assert live_workers(page, 3) == 3
    page.get_by_test_id("patch-cancel").click()
    page.wait_for_selector(f"{PANEL}[data-patched='cancelled:heads']")
    assert live_workers(page, 1) == 1  # the two the pool started are terminated; the page's stays
    filled = page.locator(cells).count()
    assert 0 < filled < 270
    page.wait_for_timeout(3000)
    assert page.locator(cells).count() == filled  # nothing more arrives, from any worker
    # the pool starts again from the one downloaded file, and runs to its end
    page.get_by_test_id("patch-stream").click()
    page.wait_for_selector(f"{PANEL}[data-patched='stream']", timeout=900000)
    assert page.get_attribute(PANEL, "data-patch-workers") == "3"
