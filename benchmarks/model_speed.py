"""How fast the explorer's model runs in headless Chromium: this tree's worker against an
earlier commit's, in one run, turn about, so that the load of a shared machine falls on both.

Measured for each worker (from posting the message to the reply, in the page; the model file
loaded): a 12-token text from "run" to attention tables and next-token predictions; a
64-token text, the same; heads-off reruns of the 12-token text (heads of layer 15 off: it
reruns layers 15 to 30; a head of layer 1: every layer) and of the 64-token text; minimal
pairs with heads switched off, one with one-token continuations and one with a continuation
of five tokens. Beside each figure, the machine's 1-minute load average when it was taken,
and how much of it lies outside the worker's own timing of the run (`seconds` in its
reply: tokenizing before it, and the messages both ways).

Then one table, each goal of issue 25 with this tree's median, its ratio to the goal (at most
1 meets it) and the earlier commit's median: 12 tokens at most 0.4 s, 64 tokens at most 2 s,
a heads-off rerun at most 0.4 s (the slowest kind, every layer rerun, of the 12-token text),
a minimal pair at most 1 s (the slower pair). Memory: benchmarks/model_in_browser.py.

Run: python benchmarks/model_speed.py [--against REV] [--rounds N]
(REV: the commit whose docs/assets/explorer/model/ is compared; default main)
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import shutil
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

from qkv import smollm2  # noqa: E402

MODEL_DIR = "docs/assets/explorer/model"
TEXT_12 = "The capital of France is Paris, and it is lovely."  # 12 tokens
TEXT_64 = "Alice met Bob in the park, and they talked about the weather. " * 6  # cut to 64 tokens
OFF_LATE = [[14, 2], [14, 7]]  # layer 15 (from 0: 14), heads 3 and 8
OFF_FIRST = [[0, 4]]  # layer 1: every layer reruns
PAIRS = {  # the coreference chapter's kind of pair: one word differs; heads of layers 14 and 16 off
    "pair, one-token continuations": (
        [
            "The cat sat on the mat because it was hungry. The",
            "The cat sat on the mat because it was soft. The",
        ],
        [" cat", " mat"],
    ),
    "pair, a five-token continuation": (
        [
            "The trophy did not fit in the suitcase because it was too big. It was the",
            "The trophy did not fit in the suitcase because it was too small. It was the",
        ],
        [" trophy", " suitcase that was small"],
    ),
}
PAIR_OFF = [[13, 8], [15, 3]]
GOALS = [  # (what, the measurement it is read from, the goal in seconds)
    ("12 tokens, run to bars and predictions", ["12 tokens"], 0.4),
    ("64 tokens, run to bars and predictions", ["64 tokens"], 2.0),
    ("heads-off rerun (12 tokens, every layer)", ["12 tokens, rerun, layer 1 off"], 0.4),
    ("minimal pair, heads off (the slower pair)", list(PAIRS), 1.0),
]

START = """([src, url, bytes]) => {
  const w = new Worker(src, { type: "module" });
  window.__w = w;
  window.__ask = (msg, want) => new Promise((resolve) => {
    const on = (e) => {
      if (want.includes(e.data.type) && (e.data.id === undefined || e.data.id === msg.id)) {
        w.removeEventListener("message", on);
        resolve(e.data);
      }
    };
    w.addEventListener("message", on);
    w.postMessage(msg);
  });
  return window.__ask({ type: "load", url, bytes }, ["loaded", "error"])
    .then((m) => m.type === "loaded" ? m.product || "javascript" : m.type);
}"""
TIMED = """async (msg) => {
  const t0 = performance.now();
  const m = await window.__ask(msg, ["result", "edited", "paired", "error"]);
  if (m.type === "error") throw new Error(m.message);
  return [performance.now() - t0, 1000 * m.seconds];
}"""


def load_average() -> float:
    return os.getloadavg()[0]


def old_worker(rev: str, folder: Path) -> None:
    """The model folder of commit ``rev``, written to ``folder``."""
    names = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", rev, MODEL_DIR],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in names:
        target = folder / Path(name).relative_to(MODEL_DIR)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(
            subprocess.run(["git", "show", f"{rev}:{name}"], cwd=ROOT, capture_output=True, check=True).stdout
        )


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--against", default="main")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp())
    shutil.copytree(ROOT / MODEL_DIR, folder / "new")
    old_worker(args.against, folder / "old")
    gguf = smollm2.gguf_path()
    os.symlink(gguf, folder / "model.gguf")
    (folder / "index.html").write_text("<!doctype html><title>bench</title>", encoding="utf-8")
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Quiet, directory=str(folder))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    size = gguf.stat().st_size
    print(f"machine: {os.cpu_count()} cores, load average {load_average():.1f}; against {args.against}")
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    outside: dict[tuple[str, str], list[float]] = {}  # the time not in the worker's own figure
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        pages = {}
        for name in ("old", "new"):
            page = browser.new_page()
            page.goto(base + "index.html")
            product = page.evaluate(START, [base + name + "/worker.js", base + "model.gguf", size])
            assert product in ("javascript", "wasm-simd"), product
            print(f"{name} worker: matrix product {product}")
            page.evaluate(TIMED, {"type": "run", "id": 1, "text": "Warm up.", "maxTokens": 64})
            pages[name] = page
        n = 10

        def timed(name: str, label: str, msg: dict) -> None:
            nonlocal n
            n += 1
            ms, inside = pages[name].evaluate(TIMED, {**msg, "id": n})
            times.setdefault((name, label), []).append((ms / 1000, load_average()))
            outside.setdefault((name, label), []).append((ms - inside) / 1000)

        for _ in range(args.rounds):
            for name in pages:  # turn about: old, new, old, new, ...
                for label, text in (("12 tokens", TEXT_12), ("64 tokens", TEXT_64)):
                    timed(name, label, {"type": "run", "text": text, "maxTokens": 64})
                    for what, off in (("layer 15 off", OFF_LATE), ("layer 1 off", OFF_FIRST)):
                        timed(name, f"{label}, rerun, {what}", {"type": "edit", "off": off})
                for label, (texts, conts) in PAIRS.items():
                    msg = {"type": "pair", "texts": texts, "conts": conts, "off": PAIR_OFF, "maxTokens": 64}
                    timed(name, label, msg)
        browser.close()
    server.shutdown()
    for (name, label), got in times.items():
        secs = [s for s, _ in got]
        loads = ", ".join(f"{s:.2f} s (load {la:.1f})" for s, la in got)
        rest = statistics.median(outside[(name, label)])
        print(
            f"  {name} worker, {label}: median {statistics.median(secs):.2f} s, "
            f"{rest:.3f} s of it outside the worker's timing; each: {loads}"
        )
    med = {key: statistics.median(s for s, _ in got) for key, got in times.items()}
    head = ("goal (issue 25)", "goal", "this tree", "/ goal", "earlier", "new/old")
    print("\n  {:44} {:>6} {:>10} {:>7} {:>8} {:>8}".format(*head))
    for what, labels, goal in GOALS:
        new = max(med[("new", label)] for label in labels)
        old = max(med[("old", label)] for label in labels)
        print(f"  {what:44} {goal:5.1f}s {new:9.2f}s {new / goal:7.2f} {old:7.2f}s {new / old:8.2f}")
    print(f"machine after: load average {load_average():.1f}")


if __name__ == "__main__":
    main()
