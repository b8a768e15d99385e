"""The reader's own experiment in the explorer (docs/assets/explorer/lab.js), in headless
Chromium: the next-token predictions, heads switched off, the map of heads, the address of
every state, export, the keyboard, the announcements and axe.

Expected numbers come from ``qkv`` (``qkv.smollm2`` and ``qkv.lab.interventions``) run on the same
text in the test, never from the page.
"""

from __future__ import annotations

import csv
import io
import json
import math
import time
from functools import cache
from urllib.parse import parse_qs, quote, urlparse

import numpy as np
import pytest
from axe_views import AXE_JS, WIDTHS, audit_views
from browser_model import PROB_SHOWN, ids_of, model
from qkv_site.smollm2_data import label

from qkv import smollm2
from qkv.lab import interventions

pytestmark = pytest.mark.usefixtures("offline_and_quiet")

GRID_SHOWN = 0.0005 + 1e-4  # three decimals
EDITED = "#qkv-explorer .qx-trained[data-edited]"


@cache
def trace(text: str):
    return smollm2.forward(model(), list(ids_of(text)))


def probs(logits_row) -> np.ndarray:
    z = logits_row.astype(np.float64)
    p = np.exp(z - z.max())
    return p / p.sum()


def edited_probs(text: str, off: list[tuple[int, int]]) -> np.ndarray:
    """qkv's heads off (``off`` counted from 1, as the page counts): the next-token probabilities."""
    heads = {(layer - 1, head - 1) for layer, head in off}
    run = interventions.run_edited(
        model(), np.array(ids_of(text)), interventions.heads_off(model().config, [heads]), rows=[-1]
    )
    return probs(run.logits[0, -1])


def summary(text: str, what: str, key: int = 1) -> tuple[np.ndarray, float]:
    """A per-head summary of qkv's weights, written here from its definition on the page: the
    mean over the queries from position 2 on (for a key: the queries after it) of the weight on
    the first token, the previous token, the key, or of the entropy; and the even spread's."""
    w = trace(text).weights.astype(np.float64)  # (layers, heads, T, T), the model's own
    t = w.shape[-1]
    queries = range(key, t) if what == "key" else range(1, t)
    if what == "first":
        per = [w[..., i, 0] for i in queries]
    elif what == "previous":
        per = [w[..., i, i - 1] for i in queries]
    elif what == "key":
        per = [w[..., i, key - 1] for i in queries]
    else:
        per = [-(w[..., i, : i + 1] * np.log(w[..., i, : i + 1])).sum(-1) for i in queries]
    even = [math.log(i + 1) if what == "entropy" else 1 / (i + 1) for i in queries]
    return np.mean(per, axis=0), float(np.mean(even))


def address(text: str, **state) -> str:
    return (
        "explorer/?model=smollm2&text="
        + quote(text, safe="")
        + "".join(f"&{k}={v}" for k, v in state.items())
    )


def url_state(page) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlparse(page.url).query, keep_blank_values=True).items()}


def load_model(page) -> None:
    page.wait_for_selector("#qkv-explorer.qx-ready")
    page.get_by_test_id("load-model").click()
    page.wait_for_selector("#qkv-explorer .qx-trained[data-drawn^='own,']", timeout=120000)


def rows(page, testid: str) -> list[tuple[int, str, float]]:
    got = page.eval_on_selector_all(
        f'[data-testid="{testid}"]', "els => els.map(e => [e.dataset.rank, e.dataset.token, e.dataset.value])"
    )
    return [(int(r), t, float(v)) for r, t, v in got]


def assert_predictions(page, testid: str, p: np.ndarray) -> None:
    """The page's ten rows are qkv's ten likeliest tokens, each probability rounded once."""
    best = np.argsort(-p, kind="stable")[:10]
    shown = rows(page, testid)
    assert [r for r, _, _ in shown] == list(range(1, 11))
    assert [t for _, t, _ in shown] == list(model().pieces(best))
    np.testing.assert_allclose([v for _, _, v in shown], p[best], rtol=0, atol=PROB_SHOWN)
    assert all(len(str(v).split(".")[1]) <= 4 for _, _, v in shown)


def cells(page) -> np.ndarray:
    got = page.eval_on_selector_all(
        '[data-testid="head-cell"]', "els => els.map(e => [e.dataset.layer, e.dataset.head, e.dataset.value])"
    )
    assert [(int(a), int(b)) for a, b, _ in got] == [(L, H) for L in range(1, 31) for H in range(1, 10)]
    return np.array([float(v) for _, _, v in got]).reshape(30, 9)


def wait_edited(page, off: str) -> None:
    page.wait_for_selector(f"#qkv-explorer .qx-trained[data-edited='{off}']", timeout=120000)


TEXT = "The cat sat on the mat because it was"
OFF = [(1, 1), (6, 3), (21, 9)]


@pytest.mark.claim("explorer-lab-predictions")
@pytest.mark.claim("explorer-lab-heads-off")
@pytest.mark.claim("explorer-lab-grid")
@pytest.mark.claim("explorer-lab-address")
def test_an_address_opens_heads_off_and_a_map_with_qkvs_numbers(page, site_url):
    page.goto(site_url + address(TEXT, off="21.9,1.1,6.3", grid="previous", layer=3, head=2))
    load_model(page)
    wait_edited(page, "1.1,6.3,21.9")
    assert_predictions(page, "prediction", probs(trace(TEXT).logits[-1]))
    q = edited_probs(TEXT, OFF)
    assert_predictions(page, "prediction-edited", q)
    p = probs(trace(TEXT).logits[-1])
    kl = float((p * (np.log(p) - np.log(q))).sum())
    assert float(page.get_by_test_id("kl").get_attribute("data-value")) == pytest.approx(kl, abs=PROB_SHOWN)
    values, even = summary(TEXT, "previous")
    np.testing.assert_allclose(cells(page), values, rtol=0, atol=GRID_SHOWN)
    assert f"would give {even:.3f}" in page.locator(".qx-lab [id$=map-note]").text_content()
    # the map names the head on screen, and the table holds the same numbers
    selected = page.locator('[data-testid="head-cell"][aria-selected="true"]')
    assert selected.count() == 1 and (
        selected.get_attribute("data-layer"),
        selected.get_attribute("data-head"),
    ) == (
        "3",
        "2",
    )
    first = page.eval_on_selector_all(
        "[data-testid=head-table] tbody tr:first-child td", "ds => ds.map(d => d.textContent)"
    )
    first = [float(x.replace("\u2212", "-")) for x in first]
    np.testing.assert_allclose(first, values[0], atol=GRID_SHOWN)
    assert url_state(page) == {
        "model": "smollm2",
        "text": TEXT,
        "layer": "3",
        "head": "2",
        "query": str(len(ids_of(TEXT))),
        "stage": "3",
        "scale": "1",
        "off": "1.1,6.3,21.9",
        "grid": "previous",
    }


@pytest.mark.parametrize(("grid", "key"), [("first", None), ("entropy", None), ("key", 4)])
@pytest.mark.claim("explorer-lab-grid")
def test_each_summary_opens_from_its_address(page, site_url, grid, key):
    state = {"grid": grid} | ({"key": key} if key else {})
    page.goto(site_url + address(TEXT, **state))
    load_model(page)
    values, _ = summary(TEXT, grid, key or 1)
    np.testing.assert_allclose(cells(page), values, rtol=0, atol=GRID_SHOWN)
    assert {k: url_state(page).get(k) for k in ("grid", "key")} == {
        "grid": None if grid == "first" else grid,
        "key": str(key) if key else None,
    }
    if key:
        assert page.get_by_test_id("grid-key").input_value() == str(key)


@pytest.mark.claim("explorer-lab-address")
@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        (
            {"off": "99.99,abc,1.1,1.1,-1.2,0.3,30.9,<script>", "grid": "<b>", "key": "1e9"},
            {"off": "1.1,30.9"},
        ),
        ({"off": "2.10,31.1,3.3.3", "grid": "KEY", "key": "-5"}, {"grid": "key", "key": "1"}),
        ({"off": "", "grid": "entropy"}, {"grid": "entropy"}),
    ],
)
def test_hostile_lab_values_are_dropped_or_clamped(page, site_url, given, canonical):
    """Before any run, the address is rewritten with the valid values only, and the heads grid
    shows them; nothing in them becomes HTML."""
    page.goto(site_url + address("Hostile values.", **given))
    page.wait_for_selector("#qkv-explorer.qx-ready")
    page.wait_for_selector('[data-testid="off-cell"]', state="attached")  # lab.js has read the address

    def lab_keys():
        return {k: v for k, v in url_state(page).items() if k in ("off", "grid", "key")}

    # the address is rewritten soon after the lab is built (on a loaded machine, more than the
    # 200 ms this test once waited): wait for it to settle, up to 10 s, then compare
    deadline = time.monotonic() + 10
    while lab_keys() != canonical and time.monotonic() < deadline:
        page.wait_for_timeout(100)
    assert lab_keys() == canonical
    off = [
        (c.get_attribute("data-layer"), c.get_attribute("data-head"))
        for c in page.locator('[data-testid="off-cell"][aria-selected="true"]').all()
    ]
    want = [tuple(x.split(".")) for x in canonical.get("off", "").split(",") if x]
    assert off == want
    assert page.locator("#qkv-explorer script, #qkv-explorer b").count() == 0


def announced(page) -> list[str]:
    return page.evaluate("window.__lab")


@pytest.mark.claim("explorer-lab-heads-off")
@pytest.mark.claim("explorer-lab-keyboard")
def test_the_keyboard_switches_heads_off_and_picks_a_head(page, site_url):
    text = "Alice gave Bob a book because she"
    page.goto(site_url + address(text))
    load_model(page)
    page.evaluate("""() => {
      window.__lab = [];
      const live = document.querySelector('[data-testid=lab-announce]');
      new MutationObserver(() => window.__lab.push(live.textContent))
        .observe(live, { childList: true, characterData: true, subtree: true });
    }""")
    assert page.get_by_test_id("lab-announce").get_attribute("aria-live") == "polite"
    assert rows(page, "prediction-edited") == []
    grid = page.get_by_test_id("off-grid")
    assert grid.get_attribute("role") == "grid" and grid.get_attribute("aria-multiselectable") == "true"
    # one stop in the tab order: the first cell; arrows move, Space switches the head off
    assert page.locator('[data-testid="off-cell"][tabindex="0"]').count() == 1
    page.locator('[data-testid="off-cell"][tabindex="0"]').focus()
    for key in ["ArrowDown"] * 4 + ["ArrowRight"] * 2:
        page.keyboard.press(key)
    focused = page.evaluate("[document.activeElement.dataset.layer, document.activeElement.dataset.head]")
    assert focused == ["5", "3"]
    page.keyboard.press("Space")
    wait_edited(page, "5.3")
    assert_predictions(page, "prediction-edited", edited_probs(text, [(5, 3)]))
    assert page.locator('[data-testid="off-cell"][aria-selected="true"]').count() == 1
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Space")
    wait_edited(page, "5.3,6.3")
    assert_predictions(page, "prediction-edited", edited_probs(text, [(5, 3), (6, 3)]))
    page.keyboard.press("ArrowUp")
    page.keyboard.press("Space")  # back on
    wait_edited(page, "6.3")
    page.wait_for_timeout(300)
    assert url_state(page)["off"] == "6.3"
    said = announced(page)
    results = [s for s in said if s.startswith("With ")]
    assert len(results) == 3 and results[-1].startswith("With 6.3 switched off, the likeliest next token is")
    # the map: Enter on a cell shows that head's bars
    page.get_by_test_id("grid").select_option("first")
    page.locator('[data-testid="head-cell"][tabindex="0"]').focus()
    page.keyboard.press("End")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    page.wait_for_selector("#qkv-explorer .qx-trained[data-drawn^='own,2,9,']")
    assert page.get_by_test_id("head-readout").text_content().startswith("Layer 2, head 9: ")
    # a click on the heads grid switches a head off, the button switches every head back on
    page.locator('[data-testid="off-cell"][data-layer="30"][data-head="1"]').click()
    wait_edited(page, "6.3,30.1")
    page.get_by_test_id("off-clear").click()
    wait_edited(page, "")
    page.wait_for_timeout(300)  # the address follows 100 ms after the last change
    assert rows(page, "prediction-edited") == [] and "off" not in url_state(page)


@pytest.mark.claim("explorer-lab-export")
def test_export_gives_what_is_on_screen(page, site_url):
    text = "Paris is the capital of"
    page.goto(site_url + address(text, off="4.2", grid="entropy", layer=4, head=2, stage=3))
    load_model(page)
    wait_edited(page, "4.2")
    with page.expect_download() as got:
        page.get_by_test_id("export-json").click()
    data = json.loads(open(got.value.path(), encoding="utf-8").read())
    assert data["model"] == page.get_by_test_id("model-name").text_content()
    assert data["text"] == text and data["token_ids"] == list(ids_of(text))
    assert (data["layer"], data["head"], data["heads_off"]) == (4, 2, [[4, 2]])
    assert "HeadsOff" in data["edit"]
    shown = rows(page, "prediction-edited")
    assert [(p["rank"], p["token"], p["probability"]) for p in data["predictions_edited"]] == shown
    bars = page.eval_on_selector_all('[data-testid="bar"]', "els => els.map(e => Number(e.dataset.value))")
    assert [b["value"] for b in data["bars"]] == bars
    np.testing.assert_allclose(data["grid"]["values"], cells(page), atol=0)
    with page.expect_download() as got:
        page.get_by_test_id("export-csv").click()
    table = list(csv.DictReader(io.StringIO(open(got.value.path(), encoding="utf-8").read())))
    assert [int(r["value"]) for r in table if r["what"] == "token_id"] == list(ids_of(text))
    assert [(r["layer"], r["head"]) for r in table if r["what"] == "head_off"] == [("4", "2")]
    assert [float(r["value"]) for r in table if r["what"] == "prediction"] == [
        v for *_, v in rows(page, "prediction")
    ]
    assert len([r for r in table if r["what"] == "grid_entropy"]) == 270
    with page.expect_download() as got:
        page.get_by_test_id("export-svg").click()
    svg = open(got.value.path(), encoding="utf-8").read()
    assert svg.startswith("<svg xmlns=") and svg.count("<rect") >= 270 + len(bars)
    assert label(trace(text).pieces[0]) in svg


# what sticks out of a page of width w (outside code blocks, which scroll), to name it
WIDER_THAN = """w => [...document.querySelectorAll('body *')]
  .filter(e => e.getBoundingClientRect().right > w && !e.closest('pre'))
  .slice(0, 5).map(e => e.tagName + '.' + e.className + ' ' + e.getBoundingClientRect().right)"""


def test_axe_finds_nothing_in_the_lab(browser, site_url):
    context = browser.new_context(viewport={"width": WIDTHS[0], "height": 900}, reduced_motion="reduce")
    context.add_init_script(path=str(AXE_JS))
    page = context.new_page()
    try:
        text = "Axe reads this, with a comma."
        page.goto(
            site_url
            + address(
                text,
                off="2.2,9.9",
                grid="key",
                key=3,
                text2=quote("Axe reads that."),
                cont1="%20yes",
                cont2="%20no",
            )
        )
        load_model(page)
        wait_edited(page, "2.2,9.9")
        page.wait_for_selector("#qkv-explorer .qx-trained[data-paired='2.2,9.9']", timeout=180000)
        page.locator('[data-testid="pair-cell"][tabindex="0"]').focus()
        page.locator(".qx-map-details summary").click()  # the table too
        page.locator('[data-testid="head-cell"][tabindex="0"]').focus()
        page.wait_for_selector('[data-testid="head-card-score"]')  # the head card, opened by the focus
        found = audit_views(page)
        assert found == []
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            wide = page.evaluate(WIDER_THAN, width)
            assert page.evaluate("document.documentElement.scrollWidth") <= width, wide
    finally:
        context.close()


def log_prob(text: str, cont: str, off=()) -> float:
    """log P(cont | text) from qkv: the text's ids then the continuation's (each tokenized on
    its own), the log-softmax (float64) at the position before each continuation token, summed."""
    enc = lambda t: model().tokenizer.encode(t, add_special_tokens=False).ids  # noqa: E731
    t, c = enc(text), enc(cont)
    ids = np.array([*t, *c])
    rows_ = list(range(len(t) - 1, len(ids) - 1))
    if off:
        edits = interventions.heads_off(model().config, [{(layer - 1, head - 1) for layer, head in off}])
        logits = interventions.run_edited(model(), ids, edits, rows=rows_).logits[0]
    else:
        logits = smollm2.forward(model(), ids).logits[rows_]
    z = logits.astype(np.float64)
    z = z - z.max(-1, keepdims=True)
    z -= np.log(np.exp(z).sum(-1, keepdims=True))
    return float(sum(z[j, k] for j, k in enumerate(c)))


PAIR_SHOWN = 0.0005 + 1e-3  # three decimals, rounded once; plus 1e-3 in a sum of log-probabilities


def shown(page, testid: str) -> dict[str, float]:
    got = page.eval_on_selector_all(
        f'[data-testid="{testid}"]', "els => els.map(e => [e.dataset.text, e.dataset.value])"
    )
    return {k: float(v) for k, v in got}


@pytest.mark.claim("explorer-lab-pair")
@pytest.mark.claim("explorer-lab-address")
def test_a_minimal_pair_opens_from_its_address_with_qkvs_preferences(page, site_url):
    t1 = "The cat sat on the mat because it was hungry. The"
    t2 = "The cat sat on the mat because it was soft. The"
    conts, off = (" cat", " mat"), [(14, 9)]
    page.goto(
        site_url + address(t1, text2=quote(t2), cont1=quote(conts[0]), cont2=quote(conts[1]), off="14.9")
    )
    load_model(page)
    page.wait_for_selector("#qkv-explorer .qx-trained[data-paired='14.9']", timeout=180000)
    want = [log_prob(t, conts[0]) - log_prob(t, conts[1]) for t in (t1, t2)]
    edited = [log_prob(t, conts[0], off) - log_prob(t, conts[1], off) for t in (t1, t2)]
    got = shown(page, "preference")
    assert got["1"] == pytest.approx(want[0], abs=PAIR_SHOWN) and got["2"] == pytest.approx(
        want[1], abs=PAIR_SHOWN
    )
    assert shown(page, "preference-difference")[""] == pytest.approx(want[0] - want[1], abs=2 * PAIR_SHOWN)
    got = shown(page, "preference-edited")
    assert [got["1"], got["2"]] == pytest.approx(edited, abs=PAIR_SHOWN)
    # how far each head's weights move, at the query shown (the last token of the shorter text)
    w = [trace(t).weights.astype(np.float64) for t in (t1, t2)]
    n = min(x.shape[-1] for x in w)
    moved = np.abs(w[0][:, :, n - 1, :n] - w[1][:, :, n - 1, :n]).sum(-1) / 2
    cells_ = page.eval_on_selector_all(
        '[data-testid="pair-cell"]', "els => els.map(e => Number(e.dataset.value))"
    )
    np.testing.assert_allclose(np.array(cells_).reshape(30, 9), moved, rtol=0, atol=GRID_SHOWN)
    state = url_state(page)
    assert (state["text2"], state["cont1"], state["cont2"], state["off"]) == (t2, *conts, "14.9")


@pytest.mark.claim("explorer-lab-pair")
def test_the_pair_is_scored_from_its_controls(page, site_url):
    page.goto(site_url + address("My favourite colour is"))
    load_model(page)
    page.get_by_test_id("text2").fill("Her favourite colour is")
    page.get_by_test_id("cont1").fill(" blue")
    page.get_by_test_id("cont2").fill(" red")
    page.get_by_test_id("pair-run").click()
    page.wait_for_selector("#qkv-explorer .qx-trained[data-paired='']", timeout=180000)
    got = shown(page, "preference")
    want = log_prob("Her favourite colour is", " blue") - log_prob("Her favourite colour is", " red")
    assert got["2"] == pytest.approx(want, abs=PAIR_SHOWN)
    page.wait_for_timeout(300)
    assert url_state(page)["cont2"] == " red"
