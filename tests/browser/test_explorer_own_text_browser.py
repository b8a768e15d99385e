"""The explorer's trained mode on the reader's own text, in headless Chromium: the model file
is fetched only when the reader asks and once per visit, the bars show qkv's numbers rounded
once, the address carries the text, long texts are cut with a message, a download can be
cancelled, a device without the memory gets a clear message, hostile text stays text, the
keyboard reaches everything, and axe finds nothing.

Expected numbers are computed by ``qkv.smollm2`` from the same text, never read from the page.
"""

from __future__ import annotations

import functools
import http.server
import json
import threading
import time
from functools import cache
from pathlib import Path
from urllib.parse import parse_qs, quote, urlparse

import numpy as np
import pytest
from axe_views import AXE_JS, WIDTHS, audit_views
from qkv_site.smollm2_data import DEFAULTS, MAX_TOKENS, label
from support import PUBLISHED_PATH, QuietHTTPServer, trained_row

from qkv import smollm2

SCORE_SHOWN = 0.05 + 2e-3  # one decimal, rounded once; plus float32's error in q · k
SCALED_SHOWN = 0.05 + 2e-3 / 8
WEIGHT_SHOWN = 0.0005 + 1e-4  # three decimals, rounded once; plus the 1e-4 the worker may differ
DRAWN = "#qkv-explorer.qx-ready .qx-trained[data-drawn^='own,']"
SLOW_BYTES_PER_S = 4_000_000  # a slow download, to catch it half way


class Server:
    """The built site below PUBLISHED_PATH, on 127.0.0.1; it counts the model file's requests
    and sends the model file slowly when the address asks (``?slow``)."""

    def __init__(self, folder: Path, csp: str | None = None):
        self.model_requests = []
        outer = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def end_headers(self):
                if csp:
                    self.send_header("Content-Security-Policy", csp)
                super().end_headers()

            def translate_path(self, path):
                path = urlparse(path).path
                if not path.startswith(PUBLISHED_PATH):
                    return str(folder / "not-below-the-site-path")
                return super().translate_path("/" + path[len(PUBLISHED_PATH) :])

            def copyfile(self, source, outputfile):
                if self.path.split("?")[0].endswith(".gguf"):
                    outer.model_requests.append(self.path)
                if "slow" not in self.path:
                    return super().copyfile(source, outputfile)
                try:
                    while chunk := source.read(1 << 18):
                        outputfile.write(chunk)
                        time.sleep(len(chunk) / SLOW_BYTES_PER_S)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the reader cancelled

            def log_message(self, *args):
                pass

        self.httpd = QuietHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(folder)))
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}{PUBLISHED_PATH}"


@pytest.fixture(scope="module")
def server(built_site):
    s = Server(built_site)
    yield s
    s.httpd.shutdown()


@pytest.fixture(scope="module")
def index(built_site) -> dict:
    return json.loads((built_site / "explorer" / "smollm2" / "index.json").read_text(encoding="utf-8"))


# every test: no request leaves 127.0.0.1, and no error is logged (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("offline_and_quiet")


@cache
def trace(text: str):
    model = smollm2.load()
    ids = model.tokenizer.encode(text, add_special_tokens=False).ids[:MAX_TOKENS]
    return smollm2.forward(model, ids)


def expected(text: str, layer: int, head: int, query: int, scale: int) -> dict:
    return trained_row(trace(text), layer, head, query, scale)


def address(text: str, **state) -> str:
    return (
        "explorer/?model=smollm2&text="
        + quote(text, safe="")
        + "".join(f"&{k}={v}" for k, v in state.items())
    )


def shown_number(text: str) -> float:
    return float(text.replace("\u2212", "-"))


def assert_shows(page, text, layer, head, query, stage, scale):
    """The page shows qkv's numbers for this state of the reader's text, rounded once."""
    page.wait_for_selector(
        f"#qkv-explorer .qx-trained[data-drawn='own,{layer},{head},{query},{stage},{scale}']", timeout=60000
    )
    want = expected(text, layer, head, query, scale)
    field, atol = [("raw", SCORE_SHOWN), ("scaled", SCALED_SHOWN), ("weights", WEIGHT_SHOWN)][stage - 1]
    bars = page.eval_on_selector_all(
        '[data-testid="bar"]',
        "els => els.map(e => [e.dataset.pos, e.dataset.key, e.dataset.value, "
        "e.querySelector('.qx-num').textContent])",
    )
    assert [int(b[0]) for b in bars] == list(range(1, query + 1))
    assert [b[1] for b in bars] == [label(p) for p in trace(text).pieces][:query]
    values = np.array([float(b[2]) for b in bars])
    np.testing.assert_allclose(values, want[field], rtol=0, atol=atol)
    assert [shown_number(b[3]) for b in bars] == values.tolist()  # data-value is the number shown
    digits = 1 if stage <= 2 else 3
    assert all(len(b[2].split(".")[1]) == digits for b in bars)  # the decimals shown, no more
    entropy = shown_number(page.get_by_test_id("entropy").text_content())
    largest = shown_number(page.get_by_test_id("max-weight").text_content())
    assert entropy == pytest.approx(want["entropy"], abs=WEIGHT_SHOWN)
    assert largest == pytest.approx(want["max_weight"], abs=WEIGHT_SHOWN)


def url_state(page) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlparse(page.url).query, keep_blank_values=True).items()}


def load_model(page):
    page.get_by_test_id("load-model").click()
    page.wait_for_selector(DRAWN, timeout=90000)


TEXT = "The capital of France is Paris, and it is lovely."


@pytest.mark.claim("explorer-own-text-numbers")
@pytest.mark.claim("explorer-own-text-on-request")
@pytest.mark.claim("explorer-own-text-address")
def test_an_address_with_text_loads_on_request_then_shows_qkvs_numbers(page, server, index):
    page.goto(server.url + address(TEXT, layer=3, head=2, query=5, stage=1, scale=1))
    page.wait_for_selector("#qkv-explorer.qx-ready")
    load = page.get_by_test_id("load-model")
    assert load.is_visible()
    assert f"({round(index['weights']['bytes'] / 1e6)} MB)" in load.text_content()  # the size
    assert page.get_by_test_id("text").input_value() == TEXT
    assert page.get_by_test_id("bar").count() == 0
    assert server.model_requests == []  # nothing fetched before the reader asks
    load_model(page)
    assert_shows(page, TEXT, 3, 2, 5, 1, 1)
    assert url_state(page) == {
        "model": "smollm2",
        "text": TEXT,
        "layer": "3",
        "head": "2",
        "query": "5",
        "stage": "1",
        "scale": "1",
    }
    for stage, scale in ((2, 1), (2, 0), (3, 0), (3, 1)):
        page.get_by_test_id("stage").fill(str(stage))
        page.get_by_test_id("scale").set_checked(bool(scale))
        assert_shows(page, TEXT, 3, 2, 5, stage, scale)
    page.get_by_test_id("layer").fill("30")
    page.get_by_test_id("query").select_option("12")
    assert_shows(page, TEXT, 30, 2, 12, 3, 1)
    assert page.get_by_test_id("kv-head").text_content().startswith("Query head 2 reads key/value head 1")


@pytest.mark.claim("explorer-own-text-on-request")
def test_the_model_file_is_fetched_once_per_visit(page, server):
    server.model_requests.clear()
    page.goto(server.url + address("First text."))
    load_model(page)
    last = len(trace("First text.").ids)
    assert_shows(
        page, "First text.", DEFAULTS["layer"], DEFAULTS["head"], last, DEFAULTS["stage"], DEFAULTS["scale"]
    )
    # another text: the Run button, no second download
    page.get_by_test_id("text").fill("A second, longer text.")
    page.get_by_test_id("run").click()
    assert_shows(
        page,
        "A second, longer text.",
        DEFAULTS["layer"],
        DEFAULTS["head"],
        len(trace("A second, longer text.").ids),
        DEFAULTS["stage"],
        DEFAULTS["scale"],
    )
    # the toy and back: the model is still loaded
    page.get_by_test_id("model").select_option("toy")
    page.wait_for_selector("#qkv-explorer.qx-ready [data-testid=dk]")
    page.get_by_test_id("model").select_option("smollm2")
    page.wait_for_selector("#qkv-explorer.qx-ready .qx-trained[data-drawn]")
    page.get_by_test_id("sentence").select_option("own")
    assert page.get_by_test_id("run").is_visible() and not page.get_by_test_id("load-model").is_visible()
    assert len(server.model_requests) == 1, server.model_requests


@pytest.mark.claim("explorer-own-text-cut")
def test_a_long_text_is_cut_to_64_tokens_with_a_message(page, server):
    text = "word " * 80
    total = len(smollm2.load().tokenizer.encode(text, add_special_tokens=False).ids)
    assert total > MAX_TOKENS
    page.goto(server.url + address(text))
    load_model(page)
    assert page.get_by_test_id("cut").text_content() == (
        f"Your text has {total} tokens; the model ran on the first {MAX_TOKENS}, up to \u201cword\u201d."
    )
    assert page.get_by_test_id("query").locator("option").count() == MAX_TOKENS
    assert_shows(
        page, text, DEFAULTS["layer"], DEFAULTS["head"], MAX_TOKENS, DEFAULTS["stage"], DEFAULTS["scale"]
    )


@pytest.mark.claim("explorer-own-text-announced")
def test_a_download_shows_progress_politely_and_can_be_cancelled(page, server, index):
    def slow_index(route):
        body = json.loads(route.fetch().text())
        body["weights"]["file"] += "?slow"
        route.fulfill(json=body)

    page.route("**/explorer/smollm2/index.json", slow_index)
    page.goto(server.url + address("Cancel me."))
    page.wait_for_selector("#qkv-explorer.qx-ready")
    page.get_by_test_id("load-model").focus()
    page.keyboard.press("Enter")
    announce = page.get_by_test_id("model-announce")
    assert announce.get_attribute("aria-live") == "polite"
    page.wait_for_function(
        "() => document.querySelector('[data-testid=model-announce]').textContent"
        ".includes('25 percent downloaded')",
        timeout=30000,
    )
    progress = page.get_by_test_id("progress")
    assert 0 < page.evaluate("() => document.querySelector('[data-testid=progress]').value")
    assert page.evaluate("document.activeElement.dataset.testid") == "cancel-load"
    page.keyboard.press("Enter")  # the focused Cancel button
    page.wait_for_function(
        "() => document.querySelector('[data-testid=model-status]').textContent === 'Download cancelled.'",
        timeout=10000,
    )
    assert announce.text_content() == "Download cancelled."
    assert page.get_by_test_id("load-model").is_visible() and not progress.is_visible()
    assert page.evaluate("document.activeElement.dataset.testid") == "load-model"
    assert page.get_by_test_id("bar").count() == 0


@pytest.mark.claim("explorer-own-text-memory")
def test_a_device_without_the_memory_gets_a_clear_message(page, server):
    def huge(route):
        body = json.loads(route.fetch().text())
        body["weights"]["bytes"] = 2**40  # a terabyte: no browser sets that aside
        route.fulfill(json=body)

    page.route("**/explorer/smollm2/index.json", huge)
    page.goto(server.url + address("Too big."))
    page.wait_for_selector("#qkv-explorer.qx-ready")
    page.get_by_test_id("load-model").click()
    page.wait_for_function(
        "() => document.querySelector('[data-testid=model-status]').textContent"
        ".includes('could not set aside the memory')",
        timeout=20000,
    )
    status = page.get_by_test_id("model-status").text_content()
    assert "the built sentences still work" in status
    assert page.get_by_test_id("load-model").is_visible()
    page.get_by_test_id("sentence").select_option("1")  # and they do
    page.wait_for_selector("#qkv-explorer .qx-trained[data-drawn^='1,']")


@pytest.mark.parametrize(
    "payload",
    [
        "<img src=x onerror=window.__xss=1>",
        '"><script>window.__xss=2</script>',
        "</textarea><svg onload=window.__xss=3>",
    ],
)
def test_hostile_text_is_run_as_text_and_never_injected(page, server, payload):
    page.goto(server.url + address(payload, layer="<b>", query="1e9", stage="x"))
    load_model(page)
    page.wait_for_timeout(200)  # give an injected handler the chance to run
    assert page.evaluate("typeof window.__xss") == "undefined"
    assert page.locator("#qkv-explorer img, #qkv-explorer script, #qkv-explorer svg").count() == 0
    assert page.get_by_test_id("text").input_value() == payload
    last = len(trace(payload).ids)
    assert_shows(
        page, payload, DEFAULTS["layer"], DEFAULTS["head"], last, DEFAULTS["stage"], DEFAULTS["scale"]
    )
    assert url_state(page)["text"] == payload and url_state(page)["query"] == str(last)


@pytest.mark.claim("explorer-own-text-address")
def test_the_keyboard_loads_runs_and_reruns(page, server):
    page.goto(server.url + address("Keyboard first."))
    page.wait_for_selector("#qkv-explorer.qx-ready")
    page.get_by_test_id("sentence").focus()
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.dataset.testid") == "text"
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.dataset.testid") == "load-model"
    page.keyboard.press("Enter")
    page.wait_for_selector(DRAWN, timeout=90000)
    assert page.evaluate("document.activeElement.dataset.testid") == "run"  # the next step
    page.get_by_test_id("text").focus()
    page.keyboard.press("End")
    page.keyboard.type(" Then more.")
    page.keyboard.press("Control+Enter")
    text = "Keyboard first. Then more."
    assert_shows(
        page,
        text,
        DEFAULTS["layer"],
        DEFAULTS["head"],
        len(trace(text).ids),
        DEFAULTS["stage"],
        DEFAULTS["scale"],
    )
    assert url_state(page)["text"] == text


@pytest.mark.claim("explorer-own-text-announced")
def test_the_result_is_announced_once(page, server):
    page.goto(server.url + address("Say it once."))
    page.wait_for_selector("#qkv-explorer.qx-ready")
    page.evaluate("""() => {
      window.__spoken = [];
      const status = document.querySelector('.qx-trained [role="status"]');
      new MutationObserver(() => window.__spoken.push(status.textContent))
        .observe(status, { childList: true, characterData: true, subtree: true });
    }""")
    load_model(page)
    page.wait_for_function("() => window.__spoken.length > 0", timeout=5000)
    page.wait_for_timeout(1000)  # nothing more is coming
    spoken = page.evaluate("window.__spoken")
    n = len(trace("Say it once.").ids)
    assert len(spoken) == 1 and spoken[0].startswith(f"The model ran on your text, {n} tokens."), spoken
    assert "largest weight" in spoken[0]


# What issue 19's policy allows (default-src 'self'), plus what Material itself needs: its
# inline scripts and styles (that issue allows them by hash) and the data: images its bundle
# draws. The explorer's code must need nothing more.
CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:"
)


def test_the_model_runs_under_a_content_security_policy(browser, built_site):
    """No eval, no blob: worker, no request elsewhere: the page, its worker (which gets the
    policy with its own script) and the model file all come from 'self'."""
    strict = Server(built_site, csp=CSP)
    context = browser.new_context()
    context.add_init_script("""window.__csp = [];
      document.addEventListener('securitypolicyviolation',
        e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI + ' ' + e.sourceFile));""")
    page = context.new_page()
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        page.goto(strict.url + address("Under a policy."))
        load_model(page)
        assert page.evaluate("window.__csp") == [] and errors == []
        assert len(strict.model_requests) == 1
    finally:
        context.close()
        strict.httpd.shutdown()


def test_axe_finds_nothing_before_and_after_a_run(browser, server):
    context = browser.new_context(viewport={"width": WIDTHS[0], "height": 900}, reduced_motion="reduce")
    context.add_init_script(path=str(AXE_JS))
    page = context.new_page()
    try:
        page.goto(server.url + address("Accessible text, with a comma."))
        page.wait_for_selector("#qkv-explorer.qx-ready")
        found = []
        for when in ("before", "after"):
            if when == "after":
                load_model(page)
            found += [(when, *view) for view in audit_views(page)]
            for width in WIDTHS:
                page.set_viewport_size({"width": width, "height": 900})
                assert page.evaluate("document.documentElement.scrollWidth") <= width
        assert found == []
    finally:
        context.close()
