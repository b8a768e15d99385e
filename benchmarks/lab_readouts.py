"""The logit lens and direct logit attribution in the explorer's lab (issue 34, parts 1 and 2):
what each costs beyond the forward pass, for a 16-token text, in headless Chromium.

The script starts the page's own model worker (docs/assets/explorer/model/worker.js) on the
built site, loads the model file, and times each message from posting it to its answer:
- "run": tokenize the text and run the whole model, keeping its trace (the forward pass);
- "lens": the logit lens at the last position, from the kept trace (31 rows through the final
  norm and the unembedding);
- "dla": the direct attribution of the first continuation token against the second's, from the
  kept trace.
Each is timed ROUNDS times after one warm-up round; the medians are printed, and the lens and
the attribution as a ratio to the forward pass measured in the same run. The goal (issue 34):
the lens and the attribution at most 0.1 s beyond the forward pass for 16 tokens. Timings
depend on the machine and its load; they belong here, never in a test.

Run: python benchmarks/lab_readouts.py [SITE_DIR]   (builds the site when no folder is given)
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "sitebuild"))
sys.path.insert(0, str(ROOT / "benchmarks"))
from model_in_browser import load, serve  # noqa: E402
from qkv_site.local import CHROMIUM, CHROMIUM_ARGS, build_site  # noqa: E402

from qkv import smollm2  # noqa: E402

# two texts of 16 tokens that differ from their first token on, run in turn: the worker reuses
# the part of a text that starts as the last one did, and the forward pass must not be skipped
TEXTS = [
    "The capital of France is a city that so many people like to visit in the",
    "A capital of France is a city that so many people like to visit in the",
]
CONTS = [" spring", " summer"]
ROUNDS = 5

# In the page: start the worker, load the model, then time messages one at a time.
TIMER = """async ([index, texts, conts, rounds]) => {
  const worker = new Worker(new URL("/assets/explorer/model/worker.js", location.origin), { type: "module" });

  let waiting = null;
  worker.onmessage = (e) => {
    const m = e.data;
    if (m.type === "progress" || m.type === "layer" || !waiting) return;
    const done = waiting; waiting = null; done(m);
  };
  let failing = null;  // a worker that cannot start answers with an error event, not a message
  worker.onerror = (e) => {
    if (failing) failing(new Error("the worker failed: " + (e.message || "no start")));
  };
  const ask = (message) => new Promise((resolve, reject) => {
    waiting = resolve; failing = reject; worker.postMessage(message);
  });
  const file = new URL("/explorer/smollm2/" + index.weights.file, location.origin).href;
  const loaded = await ask({ type: "load", url: file, bytes: index.weights.bytes });
  if (loaded.type !== "loaded") throw new Error(JSON.stringify(loaded));
  const times = { run: [], lens: [], dla: [] };
  let id = 1, n = 0;
  for (let r = 0; r <= rounds; r++) {
    const text = texts[r % texts.length];
    const messages = [["run", { type: "run", text: text, maxTokens: index.max_tokens }],
                      ["lens", { type: "lens", off: [] }], ["dla", { type: "dla", conts: conts }]];
    for (const [kind, message] of messages) {
      message.id = id++;
      if (kind === "lens") message.position = n - 1;
      const start = performance.now();
      const answer = await ask(message);
      const seconds = (performance.now() - start) / 1000;
      if (answer.type === "error") throw new Error(kind + ": " + answer.message);
      if (kind === "run") n = answer.ids.length;
      if (r > 0) times[kind].push(seconds);  // round 0 warms up
    }
  }
  worker.terminate();
  return { tokens: n, product: loaded.product, times: times };
}"""


def main(site: Path) -> None:
    tokens = {len(smollm2.load().encode(text)) for text in TEXTS}
    if len(tokens) != 1:
        raise SystemExit(f"the texts should have as many tokens: {tokens}")
    (tokens,) = tokens
    server, base = serve(site)
    index = json.loads((site / "explorer" / "smollm2" / "index.json").read_text())
    print(load())
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.goto(base + "explorer/")
        got = page.evaluate(TIMER, [index, TEXTS, CONTS, ROUNDS])
        browser.close()
    server.shutdown()
    if got["tokens"] != tokens:
        raise SystemExit(f"the page ran {got['tokens']} tokens, qkv's tokenizer gives {tokens}")
    med = {kind: statistics.median(t) for kind, t in got["times"].items()}
    print(
        f"{TEXTS[0]!r} and one other: {tokens} tokens, matrix products in {got['product']}, "
        f"medians of {ROUNDS} rounds"
    )
    print(f"  forward pass (run)     {med['run']:.3f} s")
    for kind, name in (("lens", "logit lens"), ("dla", "attribution")):
        print(
            f"  {name:<22} {med[kind]:.3f} s beyond it, {med[kind] / med['run']:.2f} of the forward pass "
            f"(goal: at most 0.1 s) runs: " + ", ".join(f"{t:.3f}" for t in got["times"][kind])
        )
    print(load())


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as folder:
            site = Path(folder) / "site"
            done = build_site(site)
            if done.returncode:
                raise SystemExit(done.stderr[-3000:])
            main(site)
