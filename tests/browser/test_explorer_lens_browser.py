"""The logit lens in the explorer's lab (issue 34, part 1), in headless Chromium: for each
layer, the stream at the chosen position through the final norm and the unembedding.

Expected numbers come from ``qkv.lab.lens.logit_lens`` (and, with heads switched off, from
``qkv.lab.interventions``) run on the same text here, never from the page.
"""

from __future__ import annotations

from urllib.parse import parse_qs, quote, urlparse

import numpy as np
import pytest
from browser_model import PROB_SHOWN, ids_of, model, open_lab

from qkv.lab import interventions, lens

pytestmark = pytest.mark.usefixtures("offline_and_quiet")

TEXT = "The capital of France is"


def lens_rows(page, lensed: str) -> list[dict]:
    page.wait_for_selector(f"#qkv-explorer .qx-trained[data-lensed='{lensed}']", timeout=180000)
    return page.eval_on_selector_all(
        '[data-testid="lens-row"]',
        "rs => rs.map(r => ({layer: +r.dataset.layer, token: r.dataset.token, id: +r.dataset.id,"
        " prob: +r.dataset.prob, finalProb: +r.dataset.finalProb, finalRank: +r.dataset.finalRank}))",
    )


@pytest.mark.claim("explorer-lab-lens")
def test_the_lens_shows_each_layers_top_token_as_qkv_reads_it(page, site_url):
    open_lab(page, site_url, TEXT)
    ids = np.array(ids_of(TEXT))
    shown = lens_rows(page, f"{len(ids)}:")
    expected = lens.logit_lens(model(), ids, position=-1, top=1)
    n = model().config.n_layers
    assert [r["layer"] for r in shown] == list(range(n + 1))  # the embeddings, then every layer
    assert [r["id"] for r in shown] == [int(i) for i in expected.top_ids[:, 0]]
    assert [r["token"] for r in shown] == list(model().pieces(expected.top_ids[:, 0]))
    np.testing.assert_allclose([r["prob"] for r in shown], expected.top_probs[:, 0], rtol=0, atol=PROB_SHOWN)
    np.testing.assert_allclose([r["finalProb"] for r in shown], expected.final_probs, rtol=0, atol=PROB_SHOWN)
    assert [r["finalRank"] for r in shown] == [int(k) for k in expected.final_ranks]
    # the last row is the model's own prediction, which the predictions list shows too
    top = page.locator('[data-testid="prediction"][data-rank="1"]').get_attribute("data-token")
    assert shown[-1]["token"] == top
    note = page.get_by_test_id("lens-note").text_content()
    assert f"from layer {expected.top_from()} on" in note or (
        expected.top_from() == 0 and "embeddings" in note
    )


@pytest.mark.claim("explorer-lab-lens", "explorer-lab-address")
def test_another_position_from_the_control_and_the_address(page, site_url):
    text = "One two three four five six"
    open_lab(page, site_url, text, lens=3)
    ids = np.array(ids_of(text))
    expected = lens.logit_lens(model(), ids, position=2, top=1)
    shown = lens_rows(page, "3:")
    assert [r["id"] for r in shown] == [int(i) for i in expected.top_ids[:, 0]]
    np.testing.assert_allclose([r["prob"] for r in shown], expected.top_probs[:, 0], rtol=0, atol=PROB_SHOWN)
    assert parse_qs(urlparse(page.url).query)["lens"] == ["3"]
    page.get_by_test_id("lens-position").select_option("5")
    expected = lens.logit_lens(model(), ids, position=4, top=1)
    shown = lens_rows(page, "5:")
    np.testing.assert_allclose([r["finalProb"] for r in shown], expected.final_probs, rtol=0, atol=PROB_SHOWN)
    page.wait_for_function("() => new URLSearchParams(location.search).get('lens') === '5'")


@pytest.mark.claim("explorer-lab-lens")
def test_with_heads_off_the_layers_before_them_stay_and_the_last_is_the_edited_prediction(page, site_url):
    open_lab(page, site_url, TEXT, off="24.5,24.6")
    ids = np.array(ids_of(TEXT))
    shown = lens_rows(page, f"{len(ids)}:24.5,24.6")
    plain = lens.logit_lens(model(), ids, top=1)
    # rows 0..23 (the stream entering layer 24) are untouched by heads of layer 24
    assert [r["id"] for r in shown[:24]] == [int(i) for i in plain.top_ids[:24, 0]]
    np.testing.assert_allclose(
        [r["prob"] for r in shown[:24]], plain.top_probs[:24, 0], rtol=0, atol=PROB_SHOWN
    )
    edits = interventions.heads_off(model().config, [{(23, 4), (23, 5)}])
    z = interventions.run_edited(model(), ids, edits, rows=[-1]).logits[0, -1].astype(np.float64)
    p = np.exp(z - z.max())
    p /= p.sum()
    assert shown[-1]["id"] == int(np.argmax(p))
    assert shown[-1]["prob"] == pytest.approx(p.max(), abs=PROB_SHOWN)
    assert shown[-1]["prob"] != pytest.approx(plain.top_probs[-1, 0], abs=10 * PROB_SHOWN)  # the edit shows


LOGIT_SHOWN = 0.00005 + 1e-4  # four decimals, rounded once; plus 1e-4


@pytest.mark.claim("explorer-lab-dla")
def test_direct_logit_attribution_of_the_pairs_question_is_qkvs(page, site_url):
    from qkv.lab import attribution

    text, cont1, cont2 = "The capital of France is", " Paris", " London"
    open_lab(
        page, site_url, text, text2=quote("The capital of England is"), cont1=quote(cont1), cont2=quote(cont2)
    )
    enc = lambda t: model().tokenizer.encode(t, add_special_tokens=False).ids  # noqa: E731
    a, b = enc(cont1)[0], enc(cont2)[0]
    page.wait_for_selector(f"#qkv-explorer .qx-trained[data-attributed='{a},{b}']", timeout=180000)
    cells = page.eval_on_selector_all(
        '[data-testid="dla-cell"]', "cs => cs.map(c => [c.dataset.layer, c.dataset.head, +c.dataset.value])"
    )
    expected = attribution.direct_logit_attribution(model(), np.array(ids_of(text)), a, b)
    n_layers, n_heads = expected.heads.shape
    heads = np.full((n_layers, n_heads), np.nan)
    mlps = np.full(n_layers, np.nan)
    for layer, head, value in cells:
        if head == "mlp":
            mlps[int(layer) - 1] = value
        else:
            heads[int(layer) - 1, int(head) - 1] = value
    assert len(cells) == n_layers * (n_heads + 1)
    np.testing.assert_allclose(heads, expected.heads, rtol=0, atol=LOGIT_SHOWN)
    np.testing.assert_allclose(mlps, expected.mlps, rtol=0, atol=LOGIT_SHOWN)
    total = page.get_by_test_id("dla-total")
    assert float(total.get_attribute("data-value")) == pytest.approx(
        expected.logit_difference, abs=LOGIT_SHOWN
    )
    assert float(total.get_attribute("data-embedding")) == pytest.approx(expected.embedding, abs=LOGIT_SHOWN)
    # the largest head is named as qkv finds it
    layer, head = np.unravel_index(np.argmax(np.abs(expected.heads)), expected.heads.shape)
    assert f"layer {layer + 1} head {head + 1}" in page.get_by_test_id("dla-note").text_content()


def run_downloaded_script(page, tmp_path) -> list[str]:
    """Click "Open in Python", run the script it saves with this interpreter (which has qkv
    and the model), and return its printed lines."""
    import subprocess
    import sys

    from support import HANG

    with page.expect_download() as info:
        page.get_by_test_id("open-python").click()
    script = tmp_path / info.value.suggested_filename
    info.value.save_as(script)
    assert script.name == "qkv_explorer.py"
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=HANG, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def printed(lines: list[str], label: str) -> list[tuple[str, ...]]:
    import ast
    import re

    found = []
    for line in lines:
        m = re.fullmatch(rf"{re.escape(label)} (\d+) ('.*'|\".*\") ([0-9.]+)(?: rank (\d+))?", line)
        if m:
            found.append((int(m.group(1)), ast.literal_eval(m.group(2)), float(m.group(3))))
    return found


def page_rows(page, testid: str) -> list[tuple[int, str, float]]:
    got = page.eval_on_selector_all(
        f'[data-testid="{testid}"]', "els => els.map(e => [e.dataset.rank, e.dataset.token, e.dataset.value])"
    )
    return [(int(r), t, float(v)) for r, t, v in got]


@pytest.mark.claim("explorer-lab-python")
@pytest.mark.parametrize(
    ("text", "state", "waits"),
    [
        ("The capital of France is", {}, ["data-lensed"]),
        ("The capital of France is", {"off": "24.5,24.6"}, ["data-lensed", "data-edited"]),
        (
            "The trophy did not fit in the suitcase because it was too",
            {
                "text2": quote("The trophy did not fit in the suitcase because it was too small so"),
                "cont1": quote(" big"),
                "cont2": quote(" small"),
            },
            ["data-lensed", "data-paired", "data-attributed"],
        ),
    ],
    ids=["plain", "heads-off", "pair"],
)
def test_open_in_python_prints_the_numbers_on_the_page(page, site_url, tmp_path, text, state, waits):
    open_lab(page, site_url, text, **state)
    for attribute in waits:
        page.wait_for_selector(
            f"#qkv-explorer .qx-trained[{attribute}]:not([{attribute}=''])"
            if attribute == "data-edited"
            else f"#qkv-explorer .qx-trained[{attribute}]",
            timeout=180000,
        )
    lines = run_downloaded_script(page, tmp_path)
    shown = page_rows(page, "prediction")
    script = printed(lines, "prediction")
    assert [(r, t) for r, t, _ in script] == [(r, t) for r, t, _ in shown]
    np.testing.assert_allclose([v for *_, v in script], [v for *_, v in shown], atol=PROB_SHOWN)
    rows = page.eval_on_selector_all(
        '[data-testid="lens-row"]', "rs => rs.map(r => [r.dataset.token, +r.dataset.prob])"
    )
    lens_lines = printed(lines, "lens")
    first_edited = min(
        (int(x.split(".")[0]) for x in state.get("off", "").split(",") if x), default=len(rows)
    )
    for layer, token, prob in lens_lines[:first_edited]:  # the script's lens is the unedited run's
        assert rows[layer][0] == token
        assert rows[layer][1] == pytest.approx(prob, abs=PROB_SHOWN)
    if "off" in state:
        edited = printed(lines, "prediction with heads off")
        shown_edited = page_rows(page, "prediction-edited")
        assert [t for _, t, _ in edited] == [t for _, t, _ in shown_edited]
        np.testing.assert_allclose([v for *_, v in edited], [v for *_, v in shown_edited], atol=PROB_SHOWN)
        kl = next(float(line.split()[1]) for line in lines if line.startswith("kl "))
        assert kl == pytest.approx(
            float(page.get_by_test_id("kl").get_attribute("data-value")), abs=PROB_SHOWN
        )
    if "text2" in state:
        prefs = [float(line.split()[-1]) for line in lines if line.startswith("preference text ")]
        on_page = page.eval_on_selector_all(
            '[data-testid="preference"]', "es => es.map(e => +e.dataset.value)"
        )
        np.testing.assert_allclose(prefs, on_page, atol=0.0005 + 1e-3)
        dla = [line for line in lines if line.startswith("dla layer ")]
        cells = page.eval_on_selector_all(
            '[data-testid="dla-cell"]',
            "cs => cs.map(c => [+c.dataset.layer, c.dataset.head, +c.dataset.value])",
        )
        from_page = {(layer, head): value for layer, head, value in cells}
        for line in dla:
            words = line.split()
            layer, values = int(words[2]), [float(x) for x in words[4:-2]] + [float(words[-1])]
            heads = [str(h) for h in range(1, len(values))] + ["mlp"]
            assert [from_page[layer, h] for h in heads] == pytest.approx(values, abs=LOGIT_SHOWN)
