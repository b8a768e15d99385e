"""Head cards in the explorer's lab (issue 34, part 4), in headless Chromium: choosing a head in
any of the lab's grids or tables shows its scores on the probe set, each beside chance and with
its rank, its effect in the reader's experiment as the lab shows it, and a ranking of every head.

The probe file's numbers are checked against the model in tests/fast/test_smollm2_probes.py;
here the card must show that file's numbers for the head chosen, with ranks and orders worked
out here, and the experiment's numbers exactly as the lab's own cells hold them.
"""

from __future__ import annotations

import json
from urllib.parse import quote

import numpy as np
import pytest
from browser_model import open_lab

pytestmark = pytest.mark.usefixtures("offline_and_quiet")

TEXT = "The capital of France is"


@pytest.fixture(scope="module")
def probes(built_site) -> dict:
    data = json.loads((built_site / "explorer" / "smollm2" / "probes.json").read_text())
    return {p["id"]: p for p in data["probes"]}


def card_of(page, layer: int, head: int):
    card = page.get_by_test_id("head-card")
    page.wait_for_selector(
        f'[data-testid="head-card"][data-layer="{layer}"][data-head="{head}"]:not([hidden])'
    )
    page.wait_for_selector('[data-testid="head-card-score"]')
    return card


def shown_scores(page) -> dict:
    return {
        r["probe"]: r
        for r in page.eval_on_selector_all(
            '[data-testid="head-card-score"]',
            "rs => rs.map(r => ({probe: r.dataset.probe, value: +r.dataset.value,"
            " baseline: +r.dataset.baseline, rank: +r.lastElementChild.textContent}))",
        )
    }


def rank_items(page) -> list[tuple[int, int, float]]:
    return page.eval_on_selector_all(
        '[data-testid="head-rank-item"]',
        "bs => bs.map(b => [+b.dataset.layer, +b.dataset.head, +b.dataset.value])",
    )


@pytest.mark.claim("explorer-lab-head-cards")
def test_choosing_a_head_shows_its_probe_scores_ranks_and_a_ranking(page, site_url, probes):
    open_lab(page, site_url, TEXT)
    page.locator('[data-testid="head-cell"][data-layer="19"][data-head="7"]').click()
    card_of(page, 19, 7)
    shown = shown_scores(page)
    assert list(shown) == ["first", "previous", "duplicate", "induction", "copying"]
    for name, probe in probes.items():
        scores = np.array(probe["scores"])
        mine = scores[18, 6]
        assert shown[name]["value"] == mine and shown[name]["baseline"] == probe["baseline"], name
        assert shown[name]["rank"] == 1 + int((scores > mine).sum()), name
    assert shown["induction"]["rank"] == 1  # the trained-model page's strongest induction head
    # the card sits next to the grid the head was chosen in
    assert (
        page.evaluate(
            "() => document.querySelector('[data-testid=\"head-grid\"]').closest('.qx-lab-part')"
            ".nextElementSibling.dataset.testid"
        )
        == "head-card"
    )
    # the keyboard: moving the focus in a grid moves the card to that head
    page.locator('[data-testid="head-cell"][data-layer="19"][data-head="7"]').press("ArrowRight")
    card_of(page, 19, 8)
    # the ranking, by a probe: every head in order, and an entry chooses its head
    page.get_by_test_id("head-rank-by").select_option("previous")
    scores = np.array(probes["previous"]["scores"])
    order = sorted(
        ((ly + 1, h + 1, scores[ly, h]) for ly in range(30) for h in range(9)),
        key=lambda e: (-e[2], e[0], e[1]),
    )
    assert rank_items(page) == [list(e) for e in order[:10]]
    second = page.locator('[data-testid="head-rank-item"]').nth(1)
    second.click()
    card_of(page, order[1][0], order[1][1])


@pytest.mark.claim("explorer-lab-head-cards")
def test_the_card_shows_the_experiments_numbers_as_the_lab_holds_them(page, site_url):
    text, text2, cont1, cont2 = TEXT, "The capital of England is", " Paris", " London"
    open_lab(page, site_url, text, text2=quote(text2), cont1=quote(cont1), cont2=quote(cont2), off="24.5")
    page.wait_for_selector("#qkv-explorer .qx-trained[data-attributed]", timeout=180000)
    page.wait_for_selector('[data-testid="kl"][data-value]', timeout=180000)
    cell = page.locator('[data-testid="dla-cell"][data-layer="24"][data-head="5"]')
    cell.click()
    card_of(page, 24, 5)
    attribution = page.get_by_test_id("head-card-attribution")
    assert attribution.get_attribute("data-value") == cell.get_attribute("data-value")
    # switched off alone: the KL the lab shows
    off = page.get_by_test_id("head-card-off")
    assert off.get_attribute("data-value") == page.get_by_test_id("kl").get_attribute("data-value")
    # ranked by attribution, by size: the lab's own cells, largest first
    page.get_by_test_id("head-rank-by").select_option("attribution")
    cells = page.eval_on_selector_all(
        '[data-testid="dla-cell"]',
        "cs => cs.filter(c => c.dataset.head !== 'mlp')"
        ".map(c => [+c.dataset.layer, +c.dataset.head, +c.dataset.value])",
    )
    order = sorted(cells, key=lambda e: (-abs(e[2]), e[0], e[1]))
    assert rank_items(page) == order[:10]
    # an MLP cell names no head: choosing it leaves the card on its head
    page.locator('[data-testid="dla-cell"][data-head="mlp"]').first.click()
    card_of(page, 24, 5)


@pytest.mark.claim("explorer-lab-head-cards")
def test_the_card_shows_a_heads_patching_effect_and_ranks_heads_by_it(page, site_url):
    text, text2 = "The capital of France is", "The capital of Italy is"  # as many tokens
    open_lab(page, site_url, text, text2=quote(text2), cont1=quote(" Paris"), cont2=quote(" Rome"))
    page.wait_for_selector("#qkv-explorer .qx-trained[data-paired]", timeout=180000)
    page.get_by_test_id("patch-heads").click()
    page.wait_for_selector("#qkv-explorer .qx-trained[data-patched='heads']", timeout=600000)
    cells = page.eval_on_selector_all(
        '[data-testid="patch-head-cell"]',
        "cs => cs.map(c => [+c.dataset.layer, +c.dataset.head, +c.dataset.value])",
    )
    assert len(cells) == 270
    layer, head, _ = max(cells, key=lambda e: abs(e[2]))
    cell = page.locator(f'[data-testid="patch-head-cell"][data-layer="{layer}"][data-head="{head}"]')
    cell.click()
    card_of(page, layer, head)
    assert page.get_by_test_id("head-card-patching").get_attribute("data-value") == cell.get_attribute(
        "data-value"
    )
    page.get_by_test_id("head-rank-by").select_option("patching")
    order = sorted(cells, key=lambda e: (-abs(e[2]), e[0], e[1]))
    assert rank_items(page) == order[:10]
