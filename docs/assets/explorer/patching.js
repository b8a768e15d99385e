/* Patching in the lab's minimal pair (lab.js builds it: buildPatching): text 1 run with part
 * of text 2's run copied in, as qkv.lab.effects.MinimalPair patches it, computed in the
 * worker (model/patch.js) a layer's variants at a time and shown as they come.
 *
 * Two grids, each a real table (its cells carry the numbers for tests and screen readers):
 *   patch-head-cell    data-layer (1-30), data-head (1-9), data-value: each head's output
 *                      (before W_O) at every text position, from text 2's run;
 *   patch-stream-cell  data-layer (1-30: the stream entering that layer, 1 the embeddings),
 *                      data-position (from 1), data-value: the stream at one position.
 * A value is the effect: (text 1's preference with the patch − its own) ÷ (text 2's − text
 * 1's). Layers, heads and positions are counted from 1 here, from 0 in the worker and qkv.
 * The work is shared by a pool of workers, one per core the lab uses (model/pool.js).
 */

import { makePool } from "./model/pool.js";

export const EFFECT_DECIMALS = 4; // data-value; the cell shows two

export function buildPatching(h, index, lab, ctx) {
  const { el } = h;
  const id = (name) => h.ROOT_ID + "-patch-" + name;
  const state = { pair: null, run: 0, busy: false, kind: null, start: null, cells: null, values: null, found: 0 };
  let pool = null, poolOf = null; // the pool, and the page's model worker it was made with
  const getPool = () => {
    if (!pool || poolOf !== ctx.worker()) {
      if (pool) pool.cancel();
      poolOf = ctx.worker();
      pool = makePool(poolOf, ctx.product());
    }
    return pool;
  };

  const note = el("p", { class: "qx-note", "data-testid": "patch-note" });
  const cores = el("p", { class: "qx-note", "data-testid": "patch-cores" });
  const headsButton = el("button", { type: "button", class: "qx-button", "data-testid": "patch-heads",
                                     text: "Patch each head" });
  const streamButton = el("button", { type: "button", class: "qx-button", "data-testid": "patch-stream",
                                      text: "Patch the stream" });
  const cancel = el("button", { type: "button", class: "qx-button qx-button--quiet", "data-testid": "patch-cancel",
                                text: "Cancel", hidden: "" });
  const actionsBox = el("div", { class: "qx-own-actions", hidden: "" }, [headsButton, streamButton, cancel]);
  const progress = el("progress", { max: "1", value: "0", "data-testid": "patch-progress", hidden: "",
                                    "aria-labelledby": id("status") });
  const status = el("p", { id: id("status"), class: "qx-own-status", "data-testid": "patch-status" });
  const summary = el("p", { class: "qx-map-readout", "data-testid": "patch-summary" });
  const legend = el("p", { class: "qx-note", "data-testid": "patch-legend" });
  const table = el("table", { class: "qx-map-table qx-dla-table qx-patch-table", "data-testid": "patch-table" });
  const wrap = el("div", { class: "qx-table-wrap", tabindex: "0", role: "region", hidden: "",
                           "aria-label": "Patching effects" }, [table]);
  const part = el("section", { class: "qx-lab-part", "aria-labelledby": id("title"), hidden: "" }, [
    el("h3", { id: id("title"), text: "What carries the answer: patching" }),
    el("p", { class: "qx-note", text: "Run text 1 again with one piece of text 2's run copied in, and let the " +
      "later layers run on (Meng et al. 2022 patch the stream; Wang et al. 2022, heads). Each cell is the " +
      "effect: (text 1's preference with the patch \u2212 text 1's preference) \u00F7 (text 2's preference " +
      "\u2212 text 1's). 0: the patch moved nothing; 1: it gives text 1 text 2's preference; beyond 0 or 1, " +
      "it overshoots. Each head: its output (before the layer's output matrix) at every position of the text. " +
      "The stream: what enters layer L at one position; layer 1's is the embeddings, the token itself. The " +
      "continuations' own positions are never copied, and heads switched off above do not apply here. As " +
      "qkv.lab.effects.MinimalPair computes it; results fill in from the last layer, the quickest to rerun." }),
    note, cores, actionsBox, progress, status, summary, legend, wrap,
  ]);

  /* -- the pair, as the worker scored it -- */
  function setPair(paired) {
    const key = paired ? JSON.stringify([paired.texts.map((t) => t.ids), paired.conts]) : null;
    if (paired && key === state.key) { state.pair = paired; return; } // heads off changed: patching does not use them
    state.key = key;
    stop();
    state.pair = paired;
    part.hidden = !paired;
    clearGrid();
    if (!paired) return;
    const [a, b] = paired.texts.map((t) => t.ids.length);
    const same = a === b && paired.texts[0].ids.every((x, i) => x === paired.texts[1].ids[i]);
    actionsBox.hidden = a !== b || same;
    cores.hidden = actionsBox.hidden;
    sayCores(getPool().planned());
    if (a !== b) {
      note.textContent = "Patching copies text 2's run into text 1's position by position, so it needs two " +
        "texts with the same number of tokens: text 1 has " + a + " tokens and text 2 has " + b + ". " +
        "Change a text until both have as many, then score the pair again.";
    } else if (same) {
      note.textContent = "The two texts are the same tokens: there is nothing to patch.";
    } else {
      const since = paired.texts[0].ids.findIndex((x, i) => x !== paired.texts[1].ids[i]);
      note.textContent = "Both texts have " + a + " tokens and first differ at position " + (since + 1) + ". " +
        "Patching the 270 heads or the stream at every layer and position reruns the model hundreds of " +
        "times: it takes from seconds to a minute or more, in the background; the page stays usable.";
    }
  }
  function clearGrid() {
    state.kind = null;
    state.cells = null;
    state.values = null;
    h.replaceChildren(table, []);
    wrap.hidden = true;
    progress.hidden = true;
    status.textContent = "";
    summary.textContent = "";
    legend.textContent = "";
    ctx.panel.removeAttribute("data-patched");
  }
  /* In plain words, how many of the reader's cores patching uses. */
  function sayCores(p) {
    const all = p.cores === 1 ? "your device's one core" : "of your device's " + p.cores + " cores";
    cores.textContent = p.k === 1 && p.reason === "memory"
      ? "Patching runs on one core: this device reports too little memory for a second copy of the model."
      : p.cores === 1 && p.k === 1 ? "Patching runs on " + all + "."
      : p.k > p.cores ? "Patching runs in " + p.k + " workers on " + all.replace("of your", "your") + "."
      : "Patching runs on " + (p.k === 1 ? "one" : p.k) + " " + all + (p.k > 1 ? ", each with its own copy of the model." : ".");
    ctx.panel.setAttribute("data-patch-workers", String(p.k));
  }
  function stop() {
    state.run++;
    if (state.busy && pool) pool.cancel();
    state.busy = false;
    running(false);
  }
  function running(on) {
    cancel.hidden = !on;
    headsButton.disabled = on;
    streamButton.disabled = on;
    progress.hidden = !on;
    if (on) ctx.panel.setAttribute("data-patching", state.kind); else ctx.panel.removeAttribute("data-patching");
  }
  function start(kind) {
    if (!state.pair) return;
    stop();
    clearGrid();
    state.kind = kind;
    progress.value = 0;
    status.textContent = "Recording both texts' runs\u2026";
    const run = state.run, mine = (f) => (x) => { if (run === state.run) f(x); };
    state.busy = true;
    getPool().patch({ kind: kind, texts: [ctx.own().text, lab.text2], conts: [lab.cont1, lab.cont2],
                      maxTokens: index.max_tokens }, {
      onStart: mine((msg) => {
        drawEmpty(msg);
        sayCores(Object.assign(getPool().planned(), { k: msg.k }));
        status.textContent = "Runs recorded; patching\u2026";
      }),
      onProgress: mine((p) => { progress.value = p.done / p.total; }),
      onCells: mine(onPatched),
    }).catch(mine((err) => {
      if (err.kind === "cancelled") return;
      state.busy = false;
      running(false);
      status.textContent = err.message;
      lab.say(err.message);
    }));
    running(true);
    lab.say(kind === "heads" ? "Patching each head; results fill in from the last layer." :
            "Patching the stream; results fill in from the last layer.");
  }
  headsButton.addEventListener("click", () => start("heads"));
  streamButton.addEventListener("click", () => start("stream"));
  cancel.addEventListener("click", () => {
    const kind = state.kind;
    stop();
    status.textContent = "Cancelled: the cells computed so far stay; the others are empty.";
    lab.say("Patching cancelled.");
    ctx.panel.setAttribute("data-patched", "cancelled:" + kind);
    (kind === "heads" ? headsButton : streamButton).focus();
  });

  /* -- the grid -- */
  const effectText = (x) => h.fmt(x, 2);
  function paint(td, x) {
    const alpha = (0.45 * Math.min(1, Math.abs(x))).toFixed(3);
    td.style.backgroundColor = x >= 0 ? "rgba(30, 136, 229, " + alpha + ")" : "rgba(229, 57, 53, " + alpha + ")";
  }
  function fill(td, x) {
    td.qxEffect = x; // the number itself, for the tests (pool runs give the one-worker run's, bit for bit)
    td.textContent = effectText(x);
    td.setAttribute("data-value", h.fmt(x, EFFECT_DECIMALS).replace("\u2212", "-"));
    paint(td, x);
  }
  function drawEmpty(msg) {
    const n = msg.n, L = index.n_layers, heads = state.kind === "heads";
    const labels = state.pair.texts.map((t) => t.labels);
    const cols = heads ? index.n_heads : n;
    const headRow = el("tr", {}, [el("th", { scope: "col", text: heads ? "Layer" : "Entering layer" })]);
    for (let k = 1; k <= cols; k++) {
      const text = heads ? "Head " + k : k + " \u00B7 " + labels[0][k - 1] +
        (labels[1][k - 1] !== labels[0][k - 1] ? " / " + labels[1][k - 1] : "");
      headRow.appendChild(el("th", { scope: "col", text: text }));
    }
    state.cells = [];
    const rows = [];
    for (let l = 1; l <= L; l++) {
      const tr = el("tr", {}, [el("th", { scope: "row", text: !heads && l === 1 ? "1 (embeddings)" : String(l) })]);
      const line = [];
      for (let k = 1; k <= cols; k++) {
        const td = el("td", heads
          ? { "data-testid": "patch-head-cell", "data-layer": String(l), "data-head": String(k) }
          : { "data-testid": "patch-stream-cell", "data-layer": String(l), "data-position": String(k) });
        if (!heads && k - 1 < msg.since) { // the same token in both texts: nothing to copy
          fill(td, 0);
          td.classList.add("qx-patch-same");
        } else {
          td.textContent = "\u2026";
        }
        line.push(td);
        tr.appendChild(td);
      }
      state.cells.push(line);
      rows.push(tr);
    }
    const [p1, p2] = msg.preferences;
    h.replaceChildren(table, [
      el("caption", { text: heads ? "Effect of patching each head, by layer and head"
        : "Effect of patching the stream, by the layer it enters and the position" }),
      el("thead", {}, [headRow]), el("tbody", {}, rows)]);
    legend.textContent = "0: nothing moved; 1: text 2's preference restored. Preferences without a patch: " +
      "text 1 " + h.fmt(p1, 3) + " nats, text 2 " + h.fmt(p2, 3) + "." +
      (heads ? "" : " Positions before " + (msg.since + 1) + " hold the same token in both texts: copying " +
        "them changes nothing, so they show 0 without being run.");
    wrap.setAttribute("aria-label", heads ? "Patching each head: effects by layer and head"
                                          : "Patching the stream: effects by layer and position");
    wrap.hidden = false;
    state.found = 0;
    state.best = null;
  }
  function onPatched(msg) {
    const which = state.kind === "heads" ? msg.heads : msg.positions;
    Array.from(which).forEach((k, i) => {
      const x = msg.effects[i];
      fill(state.cells[msg.layer][k], x);
      if (!state.best || Math.abs(x) > Math.abs(state.best[2])) state.best = [msg.layer + 1, k + 1, x];
    });
    progress.value = msg.done / msg.total;
    status.textContent = "Layer " + (msg.layer + 1) + " done; " + Math.round(100 * msg.done / msg.total) +
      "% of the work in " + msg.seconds.toFixed(1) + " s.";
    const [L, k, x] = state.best;
    summary.textContent = "Largest effect so far: " + (state.kind === "heads" ? "layer " + L + " head " + k
      : "entering layer " + L + " at position " + k) + ", " + effectText(x) + ".";
    if (msg.last) {
      state.busy = false;
      if (String(msg.k) !== ctx.panel.getAttribute("data-patch-workers")) { // a worker could not load the model
        sayCores(Object.assign(getPool().planned(), { k: msg.k, reason: msg.k === 1 ? "memory" : "cores" }));
      }
      running(false);
      status.textContent = "Done in " + msg.seconds.toFixed(1) + " s.";
      summary.textContent = summary.textContent.replace(" so far", "");
      ctx.panel.setAttribute("data-patched", state.kind);
      lab.say("Patching done. " + summary.textContent);
    }
  }

  /* The page's model worker's replies: patching's come through the pool (model/pool.js). */
  const onMessage = () => false;

  /* The kind of patching whose grid is complete on screen (for Open in Python), or null. */
  const done = () => (state.kind && ctx.panel.getAttribute("data-patched") === state.kind ? state.kind : null);
  return { part: part, setPair: setPair, stop: stop, onMessage: onMessage, done: done };
}
