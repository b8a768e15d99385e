"""The attention explorer in headless Chromium: the five experiments, qkv's numbers on
screen, state in the URL, hostile input, keyboard use, and nothing leaving 127.0.0.1.

Expected numbers are recomputed here from qkv's public API (project, attention, entropy),
not read from the page's data file, so a wrong export or a wrong lookup both fail.
"""

from __future__ import annotations

import functools
import http.server
import random
import socket
import threading
from functools import cache
from urllib.parse import quote

import numpy as np
import pytest
from qkv_site.explorer_data import DEFAULTS
from support import ROOT, QuietHTTPServer, build_site, expect_url, url_state

import qkv
from qkv import smollm2, toy
from qkv.toy import D_V

WORDS = toy.SENTENCE
SHOWN = 5e-5 + 1e-6  # a number shown to 4 decimals, from data rounded to 6


@cache
def expected(query: str, d_k: int, scale: bool) -> dict:
    q, k, v = qkv.project(toy.embeddings(), toy.projections(d_k, d_v=D_V))
    i = WORDS.index(query)
    raw = q[i] @ k.T
    weights, output = qkv.attention(q[i : i + 1], k, v, scale=scale)
    return {
        "raw": raw,
        "scaled": raw * qkv.scale_factor(scale, d_k),
        "weights": weights[0],
        "output": output[0],
        "entropy": float(qkv.entropy(weights[0])),
        "max_weight": float(weights[0].max()),
    }


def shown_field(stage: int) -> str:
    return ("raw", "scaled", "weights", "weights")[stage - 1]


# every test: no request leaves 127.0.0.1, and no error is logged (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("offline_and_quiet")


def open_explorer(page, site_url, query: str = ""):
    page.goto(site_url + "explorer/" + query)
    page.wait_for_selector("#qkv-explorer.qx-ready")


def bars(page) -> dict[str, float]:
    pairs = page.eval_on_selector_all(
        '[data-testid="bar"]', "els => els.map(e => [e.dataset.key, e.dataset.value])"
    )
    return {key: float(value) for key, value in pairs}


def bar_values(page) -> np.ndarray:
    found = bars(page)
    assert list(found) == list(WORDS)  # one bar per key, in sentence order
    return np.array([found[w] for w in WORDS])


def number(page, testid: str) -> float:
    return float(page.get_by_test_id(testid).text_content())


def controls(page) -> dict:
    return {
        "stage": int(page.get_by_test_id("stage").input_value()),
        "query": page.get_by_test_id("query").input_value(),
        "dk": int(page.get_by_test_id("dk").input_value()),
        "scale": int(page.get_by_test_id("scale").is_checked()),
    }


def assert_shows(page, stage: int, query: str, d_k: int, scale: bool):
    """The page shows qkv's numbers for this state, to 4 decimals."""
    want = expected(query, d_k, scale)
    assert controls(page) == {"stage": stage, "query": query, "dk": d_k, "scale": int(scale)}
    np.testing.assert_allclose(bar_values(page), want[shown_field(stage)], rtol=0, atol=SHOWN)
    assert number(page, "entropy") == pytest.approx(want["entropy"], abs=SHOWN)
    assert number(page, "max-weight") == pytest.approx(want["max_weight"], abs=SHOWN)
    output = page.get_by_test_id("output")
    if stage == 4:
        assert output.is_visible()
        shown = [float(x) for x in output.get_attribute("data-value").split(",")]
        np.testing.assert_allclose(shown, want["output"], rtol=0, atol=SHOWN)
        texts = page.locator(".qx-celltext").all_text_contents()
        shown_text = [float(t.replace("\u2212", "-")) for t in texts]
        np.testing.assert_allclose(shown_text, want["output"], rtol=0, atol=SHOWN)
    else:
        assert output.is_hidden()
    # the visible number beside each bar says the same as its data-value
    texts = page.locator('[data-testid="bar"] .qx-num').all_text_contents()
    shown_text = [float(t.replace("\u2212", "-")) for t in texts]
    np.testing.assert_allclose(shown_text, want[shown_field(stage)], rtol=0, atol=SHOWN)


# ---- numbers and URL state -----------------------------------------------------------------


def sample_states(n: int = 10, seed: int = 5) -> list[tuple[int, str, int, bool]]:
    rng = random.Random(seed)
    fixed = [(1, "she", 1, True), (2, "cup", 64, True), (3, "a", 64, False), (4, "milk", 33, False)]
    drawn = [(rng.randint(1, 4), rng.choice(WORDS), rng.randint(1, 64), rng.random() < 0.5) for _ in range(n)]
    return fixed + drawn


@pytest.mark.claim("explorer-numbers-are-qkvs")
@pytest.mark.parametrize("stage,query,d_k,scale", sample_states())
def test_page_shows_qkvs_numbers(page, site_url, stage, query, d_k, scale):
    open_explorer(page, site_url, f"?stage={stage}&query={query}&dk={d_k}&scale={int(scale)}")
    assert_shows(page, stage, query, d_k, scale)


def test_default_state_is_written_to_the_url(page, site_url):
    open_explorer(page, site_url)
    d = DEFAULTS
    assert url_state(page) == {
        "stage": str(d["stage"]),
        "query": d["query"],
        "dk": str(d["dk"]),
        "scale": str(d["scale"]),
    }
    assert_shows(page, d["stage"], d["query"], d["dk"], bool(d["scale"]))


def test_url_state_round_trips(page, site_url):
    open_explorer(page, site_url, "?stage=2&query=milk&dk=5&scale=1")
    assert_shows(page, 2, "milk", 5, True)
    page.get_by_test_id("query").select_option("from")
    page.get_by_test_id("dk").fill("47")
    page.get_by_test_id("scale").uncheck()
    page.get_by_test_id("stage").fill("4")
    expect_url(page, stage=4, query="from", dk=47, scale=0)
    assert url_state(page) == {"stage": "4", "query": "from", "dk": "47", "scale": "0"}
    assert_shows(page, 4, "from", 47, False)
    page.reload()
    page.wait_for_selector("#qkv-explorer.qx-ready")
    assert_shows(page, 4, "from", 47, False)


@pytest.mark.parametrize(
    "query,state",
    [
        ("?stage=9&query=tea&dk=999&scale=maybe", (4, DEFAULTS["query"], 64, DEFAULTS["scale"])),
        ("?stage=-3&query=DRANK&dk=0&scale=0", (1, "drank", 1, 0)),
        (
            "?stage=two&dk=abc&scale=",
            (DEFAULTS["stage"], DEFAULTS["query"], DEFAULTS["dk"], DEFAULTS["scale"]),
        ),
        ("?dk=12.6", (DEFAULTS["stage"], DEFAULTS["query"], 13, DEFAULTS["scale"])),
    ],
)
def test_invalid_url_values_fall_back_or_are_clamped(page, site_url, query, state):
    open_explorer(page, site_url, query)
    stage, word, d_k, scale = state
    assert_shows(page, stage, word, d_k, bool(scale))
    assert url_state(page) == {"stage": str(stage), "query": word, "dk": str(d_k), "scale": str(scale)}


@pytest.mark.parametrize(
    "payload",
    [
        "<img src=x onerror=window.__xss=1>",
        '"><script>window.__xss=2</script>',
        "she<svg onload=window.__xss=3>",
    ],
)
def test_hostile_query_is_not_executed_or_injected(page, site_url, payload):
    page.goto(site_url + "explorer/?stage=3&dk=8&query=" + payload)
    page.wait_for_selector("#qkv-explorer.qx-ready")
    # an injected handler would run by the load event (img onerror) or on insertion (svg
    # onload); wait for that event and two frames more
    page.wait_for_load_state("load")
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    assert page.evaluate("typeof window.__xss") == "undefined"
    assert page.locator("#qkv-explorer img, #qkv-explorer script, #qkv-explorer svg").count() == 0
    assert page.locator("img[src='x']").count() == 0
    assert payload not in page.locator("#qkv-explorer").inner_html()
    assert_shows(page, 3, DEFAULTS["query"], 8, bool(DEFAULTS["scale"]))


# ---- the five experiments of chapter 6 (things-to-try.md) ---------------------------------


def test_experiment_1_stepping_the_stage_from_1_to_4(page, site_url):
    open_explorer(page, site_url, "?stage=1&query=she&dk=16&scale=1")
    stage = page.get_by_test_id("stage")
    stage.focus()
    for n in (1, 2, 3, 4):
        assert_shows(page, n, "she", 16, True)
        assert page.locator(".qx-formula").text_content()  # a formula for every stage
        expect_url(page, stage=n)
        stage.press("ArrowRight")
    # scaled = raw / 4 on screen, the order never changes, and the weights sum to 1
    open_explorer(page, site_url, "?stage=1&query=she&dk=16&scale=1")
    raw = bar_values(page)
    stage.fill("2")
    scaled = bar_values(page)
    stage.fill("3")
    weights = bar_values(page)
    np.testing.assert_allclose(scaled, raw / 4, atol=2e-6)
    assert list(np.argsort(raw)) == list(np.argsort(scaled)) == list(np.argsort(weights))
    assert weights.sum() == pytest.approx(1, abs=1e-5)


def test_experiment_3_drank_rearranges_the_scores(page, site_url):
    open_explorer(page, site_url, "?stage=1&query=she&dk=16&scale=1")
    she = np.argsort(-bar_values(page))
    page.get_by_test_id("query").select_option("drank")
    expect_url(page, query="drank")
    drank = np.argsort(-bar_values(page))
    assert_shows(page, 1, "drank", 16, True)
    assert all(a != b for a, b in zip(she, drank, strict=True))  # no key keeps its rank


def test_experiment_4_unscaled_dk_64_collapses_the_weights(page, site_url):
    open_explorer(page, site_url, "?stage=3&query=she&dk=16&scale=1")
    page.get_by_test_id("dk").fill("64")
    page.get_by_test_id("scale").uncheck()
    assert_shows(page, 3, "she", 64, False)
    assert number(page, "max-weight") > 0.9
    assert number(page, "entropy") < 0.01
    collapsed = []
    for word in WORDS:
        page.get_by_test_id("query").select_option(word)
        collapsed.append(number(page, "max-weight") > 0.9)
    assert sum(collapsed) > len(WORDS) / 2  # most queries, not only the default one


def test_experiment_4_scaling_at_dk_64_restores_a_spread(page, site_url):
    open_explorer(page, site_url, "?stage=3&query=she&dk=64&scale=0")
    before = number(page, "entropy")
    page.get_by_test_id("scale").check()
    expect_url(page, scale=1)
    assert_shows(page, 3, "she", 64, True)
    assert number(page, "entropy") > 0.8 > before
    assert number(page, "max-weight") <= 0.8
    for word in WORDS:
        page.get_by_test_id("query").select_option(word)
        assert number(page, "max-weight") <= 0.8, word


def test_experiment_2_at_dk_1_scaling_makes_no_difference(page, site_url):
    for stage in (2, 3, 4):
        open_explorer(page, site_url, f"?stage={stage}&query=she&dk=1&scale=1")
        on = (
            bar_values(page),
            page.get_by_test_id("entropy").text_content(),
            page.get_by_test_id("output").get_attribute("data-value"),
        )
        page.get_by_test_id("scale").uncheck()
        off = (
            bar_values(page),
            page.get_by_test_id("entropy").text_content(),
            page.get_by_test_id("output").get_attribute("data-value"),
        )
        assert np.array_equal(on[0], off[0]) and on[1:] == off[1:]
    # while at d_k = 4 the same switch does change the weights
    open_explorer(page, site_url, "?stage=3&query=she&dk=4&scale=1")
    on = bar_values(page)
    page.get_by_test_id("scale").uncheck()
    assert np.abs(bar_values(page) - on).max() > 0.05


# ---- keyboard, labels, instant navigation --------------------------------------------------


def test_keyboard_operates_every_control(page, site_url):
    open_explorer(page, site_url, "?stage=3&query=she&dk=16&scale=1")
    page.get_by_test_id("dk").focus()
    page.keyboard.press("ArrowRight")
    assert controls(page)["dk"] == 17
    expect_url(page, dk=17)
    page.keyboard.press("End")
    assert controls(page)["dk"] == 64
    page.keyboard.press("Tab")  # the next control in tab order is the checkbox
    assert page.evaluate("document.activeElement.dataset.testid") == "scale"
    page.keyboard.press("Space")
    assert controls(page)["scale"] == 0
    page.get_by_test_id("query").focus()
    page.keyboard.press("ArrowDown")
    assert controls(page)["query"] == "drank"
    page.get_by_test_id("stage").focus()
    page.keyboard.press("ArrowLeft")
    assert controls(page)["stage"] == 2
    assert_shows(page, 2, "drank", 64, False)


def test_controls_are_labelled_and_readouts_are_announced(page, site_url):
    open_explorer(page, site_url)
    for label, testid in (
        ("Stage", "stage"),
        ("Query word", "query"),
        ("Head dimension", "dk"),
        ("Scale by", "scale"),
    ):
        assert page.get_by_label(label).first.get_attribute("data-testid") == testid
    # One live region only, the status line: the readouts change on every slider step.
    assert page.locator('#qkv-explorer [aria-live], #qkv-explorer [role="status"]').count() == 1
    assert page.get_by_test_id("announce").get_attribute("role") == "status"
    assert page.get_by_test_id("stage").get_attribute("aria-valuetext").startswith(str(DEFAULTS["stage"]))


def test_status_speaks_once_after_the_slider_settles(page, site_url):
    """Holding an arrow key on d_k does not make the status line chatter: it stays quiet
    during the burst and then names the state the reader landed on, with qkv's numbers."""
    open_explorer(page, site_url, "?stage=3&query=milk&dk=8&scale=1")
    page.evaluate("""() => {
        const status = document.querySelector('[data-testid="announce"]');
        window.__spoken = [];
        new MutationObserver(() => window.__spoken.push(status.textContent))
            .observe(status, {childList: true, characterData: true, subtree: true});
    }""")
    page.get_by_test_id("dk").focus()
    for _ in range(6):
        page.keyboard.press("ArrowRight")
    assert controls(page)["dk"] == 14
    page.wait_for_function("() => window.__spoken.length > 0", timeout=3000)
    page.wait_for_timeout(300)  # nothing more is coming
    spoken = page.evaluate("window.__spoken")
    assert len(spoken) == 1, spoken
    want = expected("milk", 14, True)
    top = WORDS[int(np.argmax(want["weights"]))]
    assert spoken[0] == (
        f"Stage 3, softmax weights, for the query \u201cmilk\u201d at d_k 14, "
        f"scaling on. Largest weight {want['max_weight']:.2f} on \u201c{top}\u201d; "
        f"entropy {want['entropy']:.2f} nats."
    )


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def instant_site_url(built_site, tmp_path_factory):
    """The site built with a site_url, as it is published: only then does Material turn on
    instant navigation (it needs the sitemap), so only this build exercises document$.
    (Material matches the sitemap's addresses port and all, so the port is bound first.)
    It uses the artifact cache that the run's build (built_site) has filled."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))  # the address is known (and kept) before the build needs it
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    out = tmp_path_factory.mktemp("site-instant")
    done = build_site(out, {"QKV_SITE_URL": url})
    assert done.returncode == 0, done.stderr[-3000:]
    handler = functools.partial(_QuietHandler, directory=str(out))
    server = QuietHTTPServer(sock.getsockname(), handler, bind_and_activate=False)
    server.socket.close()
    server.socket = sock  # hand the bound socket over
    server.server_activate()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield url
    server.shutdown()


def test_instant_navigation_from_things_to_try_opens_the_linked_state(page, instant_site_url):
    with page.expect_response("**/sitemap.xml"):  # Material reads it to turn instant on
        page.goto(instant_site_url + "things-to-try/")
    page.evaluate("window.__same_document = true")
    page.locator('a[href*="dk=64&scale=0"]').first.click()
    page.wait_for_selector("#qkv-explorer.qx-ready")
    # Material swapped the page in place (no full load), and the explorer still started
    assert page.evaluate("window.__same_document") is True
    assert_shows(page, 3, "she", 64, False)
    page.get_by_test_id("scale").check()
    expect_url(page, scale=1)
    # away and back again, still without a full load: a fresh explorer for the new page
    page.locator('article a[href$="things-to-try/"]').last.click()  # the "Read next" link
    page.wait_for_url("**/things-to-try/**")
    page.go_back()
    page.wait_for_selector("#qkv-explorer.qx-ready")
    assert page.evaluate("window.__same_document") is True
    assert_shows(page, 3, "she", 64, True)


@pytest.mark.claim("explorer-own-text-on-request")
def test_instant_navigation_keeps_the_model_loaded_for_the_visit(page, instant_site_url):
    """Once loaded, the model stays for the visit: back on the explorer by a link (Material
    swaps pages in place), an address with text= runs at once, with no second download."""
    model_files = []
    page.on("request", lambda r: model_files.append(r.url) if r.url.endswith(".gguf") else None)
    with page.expect_response("**/sitemap.xml"):  # Material reads it to turn instant on
        page.goto(instant_site_url + "explorer/?model=smollm2&text=" + quote("A first text."))
    page.evaluate("window.__same_document = true")
    page.get_by_test_id("load-model").click()
    page.wait_for_selector("#qkv-explorer .qx-trained[data-drawn^='own,']", timeout=90000)
    page.locator('article a[href$="things-to-try/"]').last.click()
    page.wait_for_url("**/things-to-try/**")
    # Material changes the address before it swaps the article in: wait for the new article,
    # or the link below lands in the old one and is swept away with it
    source = (ROOT / "docs" / "things-to-try.md").read_text(encoding="utf-8")
    title = source.split("\n# ", 1)[1].split("\n")[0]  # the page's H1
    page.locator("article h1", has_text=title).wait_for()
    link = instant_site_url + "explorer/?model=smollm2&text=" + quote("Back again.") + "&layer=20"
    page.evaluate(
        """href => { const a = document.createElement('a'); a.href = href; a.id = 'qkv-back';
                               a.textContent = 'back'; document.querySelector('article').appendChild(a); }""",
        link,
    )
    page.click("#qkv-back")
    n = len(smollm2.load().tokenizer.encode("Back again.", add_special_tokens=False).ids)
    page.wait_for_selector(f"#qkv-explorer .qx-trained[data-drawn='own,20,9,{n},3,1']", timeout=60000)
    assert page.evaluate("window.__same_document") is True
    assert not page.get_by_test_id("load-model").is_visible()
    assert len(model_files) == 1, model_files


def test_negative_scores_are_drawn_differently(page, site_url):
    open_explorer(page, site_url, "?stage=1&query=she&dk=16&scale=1")
    negative = page.locator('[data-testid="bar"].qx-neg')
    assert negative.count() == int((expected("she", 16, True)["raw"] < 0).sum()) > 0
    style = "e => getComputedStyle(e.querySelector('.qx-fill')).backgroundImage"
    assert "gradient" in negative.first.evaluate(style)
    assert "gradient" not in page.locator('[data-testid="bar"]:not(.qx-neg)').first.evaluate(style)


@pytest.mark.parametrize("width", [360, 390])
def test_usable_on_a_phone(page, site_url, width):
    page.set_viewport_size({"width": width, "height": 800})
    open_explorer(page, site_url, "?stage=4")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    for testid in ("stage", "query", "dk", "scale", "entropy", "max-weight", "output"):
        box = page.get_by_test_id(testid).bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= width, testid


def test_a_long_drag_leaves_the_url_at_the_final_value(page, site_url):
    open_explorer(page, site_url, "?stage=3&query=she&dk=16&scale=1")
    last = page.evaluate("""() => {
      const dk = document.querySelector('[data-testid="dk"]');
      for (let i = 0; i < 300; i++) {  // a drag: many input events, no change event
        dk.value = String(1 + i % 64);
        dk.dispatchEvent(new Event("input", { bubbles: true }));
      }
      return Number(dk.value);
    }""")
    assert_shows(page, 3, "she", last, True)
    expect_url(page, dk=last)
