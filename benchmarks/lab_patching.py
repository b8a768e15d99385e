"""Patching in the explorer's lab (issue 34, part 3): how long, how much memory, how responsive.
Measured in headless Chromium on the built site served from 127.0.0.1, through the page: the
lab opened on a minimal pair of 16-token texts, the model loaded, then a button pressed.

Prints, for each pair (medians of RUNS runs, each in a fresh page, so that the worker records
the pair's runs anew):
- all 270 heads patched: from the press of "Patch each head" to the last cell filled;
- the stream, 30 layers x the positions from the first difference (the earlier ones are 0
  without running): the same from "Patch the stream";
- the time to the first result: from the press to the first cell filled;
- the peak JavaScript heap (V8's Runtime.getHeapUsage over CDP, page and worker, sampled every
  ~50 ms while patching runs); the model file's bytes sit in the WebAssembly memory, outside
  the heap;
- the input delay while patching runs: a key pressed on the page every ~100 ms, the delay
  from each key event's creation to its handler (median and largest).

How long patching takes grows with the rows rerun: the positions from the first where the texts
differ, so the script prints it. Two pairs: one that differs late (the names of an indirect-
object sentence, as Wang et al. 2022 use) and one that differs at its fourth token.

Goals (issue 34): 270 heads at most 10 s; the stream at most 10 s; first results within 1 s;
peak JS heap at most 400 MB; input delay at most 100 ms. Timings depend on the machine and its
load; they belong here, never in a test.

Run: python benchmarks/lab_patching.py [SITE_DIR]   (builds the site when no folder is given)
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "sitebuild"))
sys.path.insert(0, str(ROOT / "benchmarks"))
from model_in_browser import Heaps, load, serve  # noqa: E402
from qkv_site.local import CHROMIUM, CHROMIUM_ARGS, build_site  # noqa: E402

from qkv import smollm2  # noqa: E402

RUNS = 3
PAIRS = [
    (
        "When Mary and John went to the store on Monday, John gave a drink to",
        "When Mary and John went to the store on Monday, Mary gave a drink to",
        " Mary",
        " John",
    ),
    (
        "The capital of France is a city that so many people like to visit in the",
        "The capital of Italy is a city that so many people like to visit in the",
        " spring",
        " summer",
    ),
]
PANEL = "#qkv-explorer .qx-trained"

KEYS = """() => {
  window.__keys = [];
  document.addEventListener("keydown", (e) => window.__keys.push(performance.now() - e.timeStamp), true);
}"""


def open_pair(page, base: str, pair) -> None:
    t1, t2, c1, c2 = (quote(x, safe="") for x in pair)
    page.goto(f"{base}explorer/?model=smollm2&text={t1}&text2={t2}&cont1={c1}&cont2={c2}")
    page.wait_for_selector("#qkv-explorer.qx-ready")
    page.get_by_test_id("load-model").click()
    page.wait_for_selector(f"{PANEL}[data-paired]", timeout=300000)
    page.evaluate(KEYS)


def one_run(browser, base: str, pair, kind: str) -> dict:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    try:
        open_pair(page, base, pair)
        heaps = Heaps(browser, context, page)
        heaps.sample()
        cell = f'[data-testid="patch-{"head" if kind == "heads" else "stream"}-cell"]'
        page.evaluate(
            """cell => { window.__first = null; new MutationObserver(() => {
                 const real = cell + '[data-value]:not(.qx-patch-same)';  // not a 0 left unrun
                 if (window.__first === null && document.querySelector(real))
                   window.__first = performance.now(); })
               .observe(document.getElementById('qkv-explorer'), { attributes: true, subtree: true,
                        attributeFilter: ['data-value'] }); }""",
            cell,
        )
        pressed = page.evaluate("() => performance.now()")
        page.get_by_test_id(f"patch-{kind}").click()
        last_key, deadline = 0.0, time.time() + 900
        while not page.evaluate(
            f"() => document.querySelector('{PANEL}').getAttribute('data-patched') === '{kind}'"
        ):
            if time.time() > deadline:
                raise TimeoutError(f"patching the {kind} never ended")
            heaps.sample()
            if time.time() - last_key > 0.1:
                page.keyboard.press("Shift")
                last_key = time.time()
            time.sleep(0.05)
        done = page.evaluate("() => performance.now()")
        heaps.sample()
        first = page.evaluate("() => window.__first")
        keys = page.evaluate("() => window.__keys")
        return {
            "total": (done - pressed) / 1000,
            "first": (first - pressed) / 1000,
            "heap": max(heaps.peak["page used"], 0) + max(heaps.peak["worker used"], 0),
            "worker heap": heaps.peak["worker used"],
            "page heap": heaps.peak["page used"],
            "keys": keys,
        }
    finally:
        context.close()


def main(site: Path) -> None:
    model = smollm2.load()
    server, base = serve(site)
    print(load())
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for pair in PAIRS:
            a, b = (model.encode(t) for t in pair[:2])
            if len(a) != len(b):
                raise SystemExit(f"the pair's texts have {len(a)} and {len(b)} tokens: {pair[:2]}")
            since = next(i for i in range(len(a)) if a[i] != b[i])
            print(
                f"\n{pair[0]!r} / {pair[1]!r}: {len(a)} tokens, first difference at position "
                f"{since + 1}, continuations {pair[2]!r} / {pair[3]!r}"
            )
            for kind in ("heads", "stream"):
                runs = [one_run(browser, base, pair, kind) for _ in range(RUNS)]
                keys = [k for r in runs for k in r["keys"]]

                def med(key, runs=runs):
                    return statistics.median(r[key] for r in runs)

                print(
                    f"  {kind:6s} total {med('total'):6.1f} s (runs: "
                    + ", ".join(f"{r['total']:.1f}" for r in runs)
                    + f"); first result {med('first'):.2f} s; peak JS heap "
                    f"{max(r['heap'] for r in runs) / 1e6:.0f} MB (page "
                    f"{max(r['page heap'] for r in runs) / 1e6:.0f}, worker "
                    f"{max(r['worker heap'] for r in runs) / 1e6:.0f}); input delay median "
                    f"{statistics.median(keys) if keys else float('nan'):.1f} ms, largest "
                    f"{max(keys) if keys else float('nan'):.1f} ms over {len(keys)} keys"
                )
        browser.close()
    server.shutdown()
    print("\n" + load())
    print(
        json.dumps({"goals": "heads <= 10 s, stream <= 10 s, first <= 1 s, heap <= 400 MB, delay <= 100 ms"})
    )


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as folder:
            done = build_site(Path(folder) / "site")
            if done.returncode:
                sys.exit(done.stderr[-3000:])
            main(Path(folder) / "site")
