"""How heavy the attention explorer is, and how fast it re-renders after a control change.

Builds the site (or uses the one given as the first argument), serves it on 127.0.0.1,
opens explorer/ in headless Chromium and changes controls the way a reader does. Prints:

- the bytes of a first load of the page, toy mode and trained mode (SmolLM2-135M-Instruct), counted
  in the browser: the page's HTML, the explorer's JS and CSS, and the data it fetched,
  against the 150 KB budget; and beside it what the rest of the site's shared chrome
  (Material's CSS and JS, the maths font, the search index) adds, cached after any page;
- per control change, measured in the page with performance.now(): the time the event
  handlers take (look-up and DOM update; the URL is written 100 ms after the controls
  settle, outside the frame), the time until style and layout are done too (forced by
  reading a layout property), and the time until the next animation frame starts;
  against one 60 Hz frame (16.7 ms). Other work on the machine shows up in p95 and max;
- what one history.replaceState costs, the reason the URL write is deferred.

Run: python benchmarks/explorer_render.py [SITE_DIR]
"""

from __future__ import annotations

import functools
import http.server
import os
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "sitebuild"))
from qkv_site.local import CHROMIUM, CHROMIUM_ARGS  # noqa: E402

BUDGET_BYTES = 150_000
FRAME_MS = 1000 / 60
CHANGES = 400

FIRST_LOADS = {  # the URL of a first visit, and the data it must fetch (and no other)
    "toy mode": ("explorer/", {"explorer/data.json.gz"}),
    "trained mode": (
        "explorer/?model=smollm2",
        {"explorer/smollm2/index.json", "explorer/smollm2/1-3.json.gz"},
    ),  # layers 13-18
}

MEASURE = """async (n) => {
  const $ = (id) => document.querySelector(`[data-testid="${id}"]`);
  const words = Array.from($("query").options, (o) => o.value);
  const nextFrame = () => new Promise((resolve) => requestAnimationFrame(() => resolve()));
  // Each change fires the events the browser fires: a slider being dragged sends "input"
  // only ("change" comes on release); a select or a checkbox sends "input" then "change".
  const kinds = {
    "d_k slider drag": [(i) => { $("dk").value = String(1 + (i * 7) % 64); return $("dk"); }, false],
    "stage slider drag": [(i) => { $("stage").value = String(1 + i % 4); return $("stage"); }, false],
    "query select": [(i) => { $("query").value = words[i % words.length]; return $("query"); }, true],
    "scale checkbox": [(i) => { $("scale").checked = !$("scale").checked; return $("scale"); }, true],
  };
  const names = Object.keys(kinds), out = {};
  for (const name of names) out[name] = { handler: [], layout: [], frame: [] };
  for (let i = 0; i < n; i++) {
    const name = names[i % names.length], [change, alsoChange] = kinds[name];
    const k = Math.floor(i / names.length);  // this kind's own counter: every change differs
    await nextFrame();  // start each change at the beginning of a frame
    const t0 = performance.now();
    const control = change(k);
    control.dispatchEvent(new Event("input", { bubbles: true }));
    if (alsoChange) control.dispatchEvent(new Event("change", { bubbles: true }));
    const t1 = performance.now();
    void document.body.offsetHeight;  // force style and layout now
    const t2 = performance.now();
    await nextFrame();
    const t3 = performance.now();
    out[name].handler.push(t1 - t0); out[name].layout.push(t2 - t0); out[name].frame.push(t3 - t0);
  }
  return out;
}"""


REPLACE_STATE = """(n) => {
  const times = [], url = location.href;
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    history.replaceState(history.state, "", url);
    times.push(performance.now() - t0);
  }
  return times;
}"""


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def build(out: Path) -> Path:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)],
        cwd=ROOT,
        env=env,
        check=True,
    )
    return out


def serve(site: Path):
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def is_explorers_own(path: str) -> bool:
    """The page itself, the explorer's script and style, and its data."""
    return path in ("explorer/", "explorer/index.html") or path.startswith(("assets/explorer/", "explorer/"))


def report_bytes(site: Path) -> None:
    server, base = serve(site)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for mode, (url, data) in FIRST_LOADS.items():
                page = browser.new_page()  # a fresh page: nothing cached
                loaded = []
                page.on(
                    "requestfinished",
                    lambda r, loaded=loaded: loaded.append(
                        (r.url.replace(base, "").split("?")[0], r.sizes()["responseBodySize"])
                    ),
                )
                page.goto(base + url)
                page.wait_for_selector("#qkv-explorer.qx-ready")
                page.wait_for_selector("#qkv-explorer [data-testid=bar]")
                page.wait_for_load_state("networkidle")
                page.close()
                own = [(path, size) for path, size in loaded if is_explorers_own(path)]
                fetched = {path for path, _ in own if path.startswith("explorer/") and path != "explorer/"}
                assert fetched == data, f"{mode} fetched {sorted(fetched)}, expected {sorted(data)}"
                total = sum(size for _, size in own)
                shared = sum(size for path, size in loaded if not is_explorers_own(path))
                print(f"  first load, {mode}:")
                for path, size in own:
                    print(f"    {path:<34}{size:>9,} bytes")
                print(
                    f"    {'total':<34}{total:>9,} bytes  = {total / BUDGET_BYTES:.2f} of the "
                    f"{BUDGET_BYTES:,}-byte budget"
                )
                print(
                    f"    (the site's shared CSS, JS, maths font and search index add {shared:,} bytes,"
                    " cached after the first page of the site)"
                )
            browser.close()
    finally:
        server.shutdown()
    sizes = {p.name: p.stat().st_size for p in sorted((site / "explorer" / "smollm2").iterdir())}
    print(
        "  trained-mode files, each fetched only when shown (sentence N, layers block B: N-B.json.gz;"
        " the model file only when a reader loads the model): "
        + ", ".join(f"{name} {size:,}" for name, size in sizes.items())
    )


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]


def report_timing(site: Path) -> None:
    server, base = serve(site)
    url = base + "explorer/?stage=3&query=she&dk=16&scale=1"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(url)
            page.wait_for_selector("#qkv-explorer.qx-ready")
            page.evaluate(MEASURE, 40)  # warm up the JIT and the layout caches
            result = page.evaluate(MEASURE, CHANGES)
            replace_ms = page.evaluate(REPLACE_STATE, 50)
            browser.close()
    finally:
        server.shutdown()
    print(f"  {CHANGES} control changes, ms per change (median / p95 / max):")
    print(f"  {'':<20}{'event handlers':>24}{'+ style and layout':>24}{'next frame starts':>24}")
    for kind, timings in result.items():
        cells = []
        for name in ("handler", "layout", "frame"):
            values = timings[name]
            cells.append(
                f"{statistics.median(values):6.2f} /{percentile(values, 0.95):6.2f} /{max(values):6.1f}"
            )
        print(f"  {kind:<20}" + "".join(f"{c:>24}" for c in cells))
    layout = [x for timings in result.values() for x in timings["layout"]]
    p95 = percentile(layout, 0.95)
    print(
        f"  all changes: handlers + style + layout p95 {p95:.2f} ms = {p95 / FRAME_MS:.2f} of a "
        f"16.7 ms frame (median {statistics.median(layout):.2f} ms)"
    )
    print(
        f"  one history.replaceState: median {statistics.median(replace_ms):.2f} ms, "
        f"p95 {percentile(replace_ms, 0.95):.2f} ms (deferred, not in the numbers above)"
    )


def main() -> None:
    if len(sys.argv) > 1:
        site = Path(sys.argv[1])
        print(f"site: {site}")
        report_bytes(site)
        report_timing(site)
        return
    with tempfile.TemporaryDirectory() as tmp:
        site = build(Path(tmp) / "site")
        print("site: a fresh strict build")
        report_bytes(site)
        report_timing(site)


if __name__ == "__main__":
    main()
