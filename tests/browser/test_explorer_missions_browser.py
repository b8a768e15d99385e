"""The explorer's guided experiments (issue 34, part 5), in headless Chromium with the model.

One page walks through every mission, as a reader would, by keyboard: open the mission from
the list on the page, predict, load the model (once: the page's instant navigation keeps it
loaded), and read the box. Each mission must open the state tests/explorer_missions.py
states, keep the prediction and show it with the result, and show a measurement that is
the lab's own output on screen and qkv's computation (to 1e-4 where it is a number). The
sentences on what it means, which the box fetches from docs/things-to-try-in-depth.md, are
guarded in tests/fast/pages/test_explorer.py.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import numpy as np
import pytest
from axe_views import AXE_JS, WIDTHS, audit_views
from browser_model import PROB_SHOWN, ids_of, model
from explorer_missions import CONTINUATIONS, NEXT, PAIR, STATES
from support import watch_offline_and_quiet

from qkv import smollm2
from qkv.lab import attribution, interventions, lens
from qkv.lab.effects import preference

pytestmark = pytest.mark.browser

PREF_SHOWN = 0.0005 + 1e-4  # three decimals, rounded once; plus the 1e-4 the worker may differ
GRID_SHOWN = 0.0005 + 1e-4


def url_state(page) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlparse(page.url).query, keep_blank_values=True).items()}


def probs(logits_row) -> np.ndarray:
    z = logits_row.astype(np.float64)
    p = np.exp(z - z.max())
    return p / p.sum()


def next_word(text: str, off: str) -> tuple[float, float, int]:
    """qkv: P(NEXT) with every head on and with ``off`` (L.H,L.H from 1), and the top token then."""
    heads = {(int(L) - 1, int(H) - 1) for L, H in (x.split(".") for x in off.split(","))}
    ids = np.array(ids_of(text))
    target = model().tokenizer.encode(NEXT, add_special_tokens=False).ids[0]
    before = probs(smollm2.forward(model(), ids).logits[-1])
    run = interventions.run_edited(model(), ids, interventions.heads_off(model().config, [heads]), rows=[-1])
    after = probs(run.logits[0, -1])
    return before[target], after[target], int(np.argmax(after))


def lab_value(page, selector: str) -> str:
    return page.locator(selector).first.get_attribute("data-value")


def open_mission(page, mission: str) -> None:
    """From the list on the page: focus the mission's link and press Enter."""
    link = page.locator(f'a[data-testid="mission"][data-mission="{mission}"]')
    link.focus()
    link.press("Enter")
    page.wait_for_selector(f'[data-testid="mission-box"][data-mission="{mission}"]', timeout=60000)
    # the address is the mission's state (the lab writes it once its module has loaded)
    page.wait_for_function(f"() => new URLSearchParams(location.search).get('mission') === '{mission}'")
    state = url_state(page)
    assert {k: state.get(k) for k in STATES[mission]} == STATES[mission]
    assert state["model"] == "smollm2"


def predict(page, mission: str) -> str:
    """Choose the second answer with the keyboard; its label."""
    box = page.locator(f'[data-testid="mission-box"][data-mission="{mission}"]')
    assert box.get_by_test_id("mission-result").is_hidden()  # nothing to read before a prediction
    options = box.get_by_test_id("mission-option")
    options.first.focus()
    page.keyboard.press("ArrowDown")  # radios: the arrow moves to the next answer and chooses it
    assert options.nth(1).is_checked()
    return page.locator(f'label[for="{options.nth(1).get_attribute("id")}"]').text_content()


MEANINGS: dict[str, list[str]] = {}  # mission -> its sentences on the in-depth page


def read_meanings(context, site_url) -> None:
    """The sentences docs/things-to-try-in-depth.md writes for each mission, without the
    claim's tick, as that page shows them."""
    other = context.new_page()
    other.goto(site_url + "things-to-try-in-depth/")
    for mission in STATES:
        found = other.locator(f'.qx-mission-meaning[data-mission="{mission}"] p').all_text_contents()
        MEANINGS[mission] = [p.removesuffix("\u2713").strip() for p in found]
        assert len(MEANINGS[mission]) == 2 and all(len(p) > 40 for p in MEANINGS[mission])
    other.close()


def result(page, mission: str, chosen: str) -> tuple[str, str, str]:
    """Once measured: the measurement's data-value and text, and the answer it matches."""
    if page.get_by_test_id("load-model").is_visible():
        page.get_by_test_id("load-model").click()
    box = page.locator(f'[data-testid="mission-box"][data-mission="{mission}"][data-measured]')
    box.wait_for(timeout=180000)
    assert box.get_by_test_id("mission-prediction").text_content() == f"You predicted: {chosen}."
    reading = box.get_by_test_id("mission-measurement")
    page.locator(f'[data-testid="mission-box"][data-mission="{mission}"][data-meaning]').wait_for()
    meaning = box.locator('[data-testid="mission-meaning"] p').all_text_contents()
    assert meaning[:-1] == MEANINGS[mission]  # the sentences of the page that checks them
    assert meaning[-1] == "How this was checked, with its control"
    kept = page.evaluate(f"() => sessionStorage.getItem('qkv-mission:{mission}')")
    assert box.locator(f'[data-testid="mission-option"][value="{kept}"]').is_checked()
    answer = box.get_by_test_id("mission-verdict").get_attribute("data-answer")
    return reading.get_attribute("data-value"), reading.text_content(), answer


def test_every_mission_opens_its_state_keeps_the_prediction_and_shows_the_labs_measurement(browser, site_url):
    context = browser.new_context(viewport={"width": WIDTHS[0], "height": 900}, reduced_motion="reduce")
    context.add_init_script(path=str(AXE_JS))  # for the audit of a mission's view at the end
    page = context.new_page()
    outside, errors = watch_offline_and_quiet(page)
    try:
        read_meanings(context, site_url)
        page.goto(site_url + "explorer/")
        page.wait_for_selector("#qkv-explorer.qx-ready")
        links = 'a[data-testid="mission"]'
        missions = page.eval_on_selector_all(links, "as => as.map(a => a.dataset.mission)")
        assert len(missions) >= 5 and sorted(missions) == sorted(STATES)

        # 1. the induction head off: P(" stone") before and after, as the lab lists them
        open_mission(page, "induction")
        chosen = predict(page, "induction")
        value, text, answer = result(page, "induction", chosen)
        before, after, _ = next_word(STATES["induction"]["text"], STATES["induction"]["off"])
        shown_after = lab_value(page, f'[data-testid="prediction-edited"][data-token="{NEXT}"]')
        shown_before = lab_value(page, f'[data-testid="prediction"][data-token="{NEXT}"]')
        assert float(value) == float(shown_after)  # the lab's own number
        assert float(value) == pytest.approx(after, abs=PROB_SHOWN)  # and qkv's
        assert shown_before in text and shown_after in text
        assert lab_value(page, '[data-testid="kl"]') in text
        assert answer == ("most" if after / before <= 0.5 else "some" if after / before < 0.9 else "same")

        # 2. the logit lens: the layer from which the model's answer is the top guess
        open_mission(page, "lens")
        chosen = predict(page, "lens")
        value, text, answer = result(page, "lens", chosen)
        seen = lens.logit_lens(model(), np.array(ids_of(STATES["lens"]["text"])), top=1)
        assert int(value) == seen.top_from()
        row = page.locator(f'[data-testid="lens-row"][data-layer="{value}"]')
        shown = row.get_attribute("data-final-prob")
        assert f"from layer {value} on, with probability {shown}" in text
        assert float(shown) == pytest.approx(seen.final_probs[seen.top_from()], abs=PROB_SHOWN)
        assert answer == "last"

        # 3. the sink: heads with more than half their weight on the first token
        open_mission(page, "sink")
        chosen = predict(page, "sink")
        value, text, answer = result(page, "sink", chosen)
        cells = page.eval_on_selector_all('[data-testid="head-cell"]', "cs => cs.map(c => +c.dataset.value)")
        w = smollm2.forward(model(), np.array(ids_of(STATES["sink"]["text"]))).weights.astype(np.float64)
        first = w[:, :, 1:, 0].mean(axis=-1).ravel()
        np.testing.assert_allclose(cells, first, rtol=0, atol=GRID_SHOWN)  # the map is qkv's
        assert not (np.abs(first - 0.5) < GRID_SHOWN).any()  # no head so near the line that rounding decides
        assert int(value) == sum(x > 0.5 for x in cells) == (first > 0.5).sum()
        assert f"{value} of the 270 heads" in text
        # a mission's view passes axe, light and dark, at 1280 and 390 px, and fits the phone
        page.get_by_test_id("mission-box").scroll_into_view_if_needed()
        assert audit_views(page) == []
        page.set_viewport_size({"width": WIDTHS[1], "height": 900})
        assert page.evaluate("document.documentElement.scrollWidth") <= WIDTHS[1]
        page.set_viewport_size({"width": WIDTHS[0], "height": 900})

        # 4. the previous-token heads off
        open_mission(page, "previous")
        chosen = predict(page, "previous")
        value, text, answer = result(page, "previous", chosen)
        before, after, top = next_word(STATES["previous"]["text"], STATES["previous"]["off"])
        assert float(value) == pytest.approx(after, abs=PROB_SHOWN)
        edited = '[data-testid="prediction-edited"]'
        assert float(value) == float(lab_value(page, f'{edited}[data-token="{NEXT}"]'))
        top_shown = page.locator(f'{edited}[data-rank="1"]').get_attribute("data-token")
        assert top_shown == model().pieces([top])[0]
        assert answer == ("lost" if top_shown != NEXT else "falls")

        # 5. the pair: the preferences' difference and the largest direct head
        open_mission(page, "pair")
        chosen = predict(page, "pair")
        value, text, answer = result(page, "pair", chosen)
        one, two = (preference(model(), t, *CONTINUATIONS) for t in PAIR)
        assert float(value) == float(lab_value(page, '[data-testid="preference-difference"]'))
        assert float(value) == pytest.approx(one - two, abs=PREF_SHOWN)
        enc = lambda t: model().tokenizer.encode(t, add_special_tokens=False).ids  # noqa: E731
        dla = attribution.direct_logit_attribution(
            model(), np.array(ids_of(PAIR[0])), enc(CONTINUATIONS[0])[0], enc(CONTINUATIONS[1])[0]
        )
        layer, head = np.unravel_index(np.argmax(np.abs(dla.heads)), dla.heads.shape)
        assert f"largest direct share is layer {layer + 1} head {head + 1}" in text
        assert answer == ("first" if one - two > 0.1 else "second" if one - two < -0.1 else "same")

        # the prediction is kept in the tab: a reload shows it chosen again
        page.reload()
        page.wait_for_selector('[data-testid="mission-box"][data-mission="pair"]', timeout=60000)
        assert page.get_by_test_id("mission-option").nth(1).is_checked()
    finally:
        context.close()
    assert outside == [], f"requests left 127.0.0.1: {outside}"
    assert errors == [], errors
