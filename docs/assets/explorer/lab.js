/* The reader's own experiment, under the bars of the trained mode's own text: the next
 * token the model predicts, heads switched off (the same edit as qkv.lab.interventions.HeadsOff,
 * run in model/worker.js), a 30 x 9 map of a per-head summary of the text's attention, and
 * an export of what is on screen. trained.js builds it (buildLab) and hands it each run.
 *
 * URL keys (every count from 1, as on the page): off=L.H,L.H (heads switched off),
 * grid=first|previous|entropy|key (the map's summary), key=P (the key of grid=key),
 * text2=, cont1=, cont2= (a minimal pair: the page's text is its first text), lens=P (the position
 * the logit lens reads; absent: the text's last); trained.js writes
 * them (lab.keys) once this module has loaded.
 * Hostile values are dropped or clamped, never written as HTML.
 */

import { buildPatching } from "./patching.js";

export const SUMMARIES = {
  first: { name: "Weight on the first token", short: "first token" },
  previous: { name: "Weight on the previous token", short: "previous token" },
  entropy: { name: "Entropy of the weights (nats)", short: "entropy" },
  key: { name: "Weight on a chosen key", short: "chosen key" },
};
const offText = (off) => off.map(([L, H]) => L + "." + H).join(","); // as the address writes it
export const PROB_DECIMALS = 4; // a probability as shown, rounded once
export const GRID_DECIMALS = 3;

/* ---- the address: off=L.H,L.H, grid=, key=, text2=, cont1=, cont2= ---------------------- */

/* off=L.H,L.H: the valid pairs only (1 <= L <= layers, 1 <= H <= heads), each once, sorted. */
function parseOff(text, nLayers, nHeads) {
  const found = new Set();
  String(text || "").slice(0, 4000).split(",").forEach((part) => {
    const m = /^\s*(\d{1,3})\.(\d{1,2})\s*$/.exec(part);
    if (!m) return;
    const L = Number(m[1]), H = Number(m[2]);
    if (L >= 1 && L <= nLayers && H >= 1 && H <= nHeads) found.add(L * 100 + H);
  });
  return Array.from(found).sort((a, b) => a - b).map((x) => [Math.floor(x / 100), x % 100]);
}

const PAIR_CHARS = 2000; // a pair's text or continuation is cut to this many characters
const cut = (text) => {
  const t = String(text || "");
  if (t.length <= PAIR_CHARS) return t;
  const code = t.charCodeAt(PAIR_CHARS - 1); // never half of a surrogate pair
  return t.slice(0, code >= 0xd800 && code <= 0xdbff ? PAIR_CHARS - 1 : PAIR_CHARS);
};

function readLab(p, index, intIn) { // values that name nothing are dropped or clamped
  const grid = (p.get("grid") || "").trim().toLowerCase();
  return {
    off: parseOff(p.get("off"), index.n_layers, index.n_heads),
    grid: Object.prototype.hasOwnProperty.call(SUMMARIES, grid) ? grid : "first",
    key: intIn(p.get("key"), 1, index.max_tokens, 1),
    lens: intIn(p.get("lens"), 1, index.max_tokens, 0), // 0: the text's last position
    text2: cut(p.get("text2")),
    cont1: cut(p.get("cont1")),
    cont2: cut(p.get("cont2")),
  };
}

/* ---- per-head summaries of one run's attention ----------------------------------------------- */

/* One number per layer and head, averaged over the queries that have a choice (position 2
   on; for a chosen key, the queries after it), and the even-spread baseline: the same
   average if every query spread its weight evenly over the keys it sees. */
export function headSummary(r, what, key) {
  const T = r.ids.length, tri = T * (T + 1) / 2, n = r.n_layers * r.n_heads;
  const w = r.weights[1], values = new Float64Array(n);
  const from = what === "key" ? Math.min(key, T) : 1; // queries i (from 0) with i >= from
  let base = 0, count = 0;
  for (let i = from; i < T; i++) {
    base += what === "entropy" ? Math.log(i + 1) : 1 / (i + 1);
    count++;
  }
  for (let t = 0; t < n; t++) {
    let s = 0;
    for (let i = from; i < T; i++) {
      const row = t * tri + i * (i + 1) / 2;
      if (what === "first") s += w[row];
      else if (what === "previous") s += w[row + i - 1];
      else if (what === "key") s += w[row + key - 1];
      else s += r.entropy[1][t * T + i];
    }
    values[t] = count ? s / count : NaN;
  }
  return { values: values, baseline: count ? base / count : NaN, count: count };
}

/* ---- colour: a perceptually uniform ramp (viridis, sampled at 9 points) ----------------------- */

const VIRIDIS = [[68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141],
                 [39, 173, 129], [92, 200, 99], [170, 220, 50], [253, 231, 37]];

export function ramp(f) {
  const x = Math.min(1, Math.max(0, Number.isFinite(f) ? f : 0)) * (VIRIDIS.length - 1);
  const i = Math.min(VIRIDIS.length - 2, Math.floor(x)), t = x - i;
  const c = VIRIDIS[i].map((a, k) => Math.round(a + (VIRIDIS[i + 1][k] - a) * t));
  return "rgb(" + c.join(", ") + ")";
}

/* ---- a 30 x 9 grid of heads: ARIA grid, arrows move, Space or Enter acts, click acts ---------- */

function headGrid(h, opts) {
  const { el } = h;
  const grid = el("div", { role: "grid", class: "qx-grid", "aria-label": opts.label, "data-testid": opts.testid,
                           "aria-describedby": opts.describedBy });
  if (opts.multi) grid.setAttribute("aria-multiselectable", "true");
  const head = el("div", { role: "row", class: "qx-grid-row" }, [el("span", { role: "columnheader", class: "qx-grid-corner", text: "L\\H" })]);
  for (let H = 1; H <= opts.nHeads; H++) head.appendChild(el("span", { role: "columnheader", text: String(H) }));
  grid.appendChild(head);
  const cells = [];
  for (let L = 1; L <= opts.nLayers; L++) {
    const row = el("div", { role: "row", class: "qx-grid-row" }, [el("span", { role: "rowheader", text: String(L) })]);
    const line = [];
    for (let H = 1; H <= opts.nHeads; H++) {
      const cell = el("span", { role: "gridcell", class: "qx-cellh", tabindex: L === 1 && H === 1 ? "0" : "-1",
                                "data-testid": opts.cellTestid, "data-layer": String(L), "data-head": String(H),
                                "aria-selected": "false" });
      line.push(cell);
      row.appendChild(cell);
    }
    cells.push(line);
    grid.appendChild(row);
  }
  let focusL = 1, focusH = 1;
  function moveTo(L, H, focus) {
    L = Math.min(opts.nLayers, Math.max(1, L));
    H = Math.min(opts.nHeads, Math.max(1, H));
    cells[focusL - 1][focusH - 1].setAttribute("tabindex", "-1");
    focusL = L; focusH = H;
    const cell = cells[L - 1][H - 1];
    cell.setAttribute("tabindex", "0");
    if (focus) cell.focus();
    if (opts.onFocus) opts.onFocus(L, H);
  }
  grid.addEventListener("click", (event) => {
    const cell = event.target.closest("[role=gridcell]");
    if (!cell) return;
    const L = Number(cell.dataset.layer), H = Number(cell.dataset.head);
    moveTo(L, H, true);
    opts.onAct(L, H);
  });
  grid.addEventListener("focusin", (event) => {
    const cell = event.target.closest("[role=gridcell]");
    if (cell && opts.onFocus) opts.onFocus(Number(cell.dataset.layer), Number(cell.dataset.head));
  });
  grid.addEventListener("keydown", (event) => {
    const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1],
                    PageUp: [-5, 0], PageDown: [5, 0] };
    if (moves[event.key]) {
      moveTo(focusL + moves[event.key][0], focusH + moves[event.key][1], true);
    } else if (event.key === "Home") {
      moveTo(event.ctrlKey ? 1 : focusL, 1, true);
    } else if (event.key === "End") {
      moveTo(event.ctrlKey ? opts.nLayers : focusL, opts.nHeads, true);
    } else if (event.key === " " || event.key === "Enter") {
      opts.onAct(focusL, focusH);
    } else {
      return;
    }
    event.preventDefault();
  });
  return { grid: grid, cells: cells, moveTo: moveTo };
}

/* ---- building the lab -------------------------------------------------------------------------- */

export function buildLab(h, index, lab, ctx) {
  const { el } = h;
  const id = (name) => h.ROOT_ID + "-lab-" + name;
  // the state, from the address trained.js was opened with
  Object.assign(lab, readLab(new URLSearchParams(lab.query), index, h.intIn),
                { run: null, edited: null, summary: null, focus: null, paired: null, editId: -1, pairId: -1,
                  lensId: -1, lensed: null, dlaId: -1, attributed: null });
  lab.keys = () => { // the address's keys, where they differ from the defaults
    const pairs = [];
    if (lab.off.length) pairs.push(["off", offText(lab.off)]);
    if (lab.grid !== "first") pairs.push(["grid", lab.grid]);
    if (lab.grid === "key") pairs.push(["key", lab.key]);
    if (lab.lens) pairs.push(["lens", lab.lens]);
    for (const key of ["text2", "cont1", "cont2"]) if (lab[key]) pairs.push([key, lab[key]]);
    return pairs;
  };
  const actions = {
    offChanged: () => { lab.sendEdit(true); lab.sendPair(); lab.sendLens(); ctx.writeUrlSoon(); },
    pairChanged: () => { lab.sendPair(); ctx.writeUrlSoon(); },
    stateChanged: () => ctx.writeUrlSoon(),
    selectHead: ctx.selectHead, selected: ctx.selected, snapshot: () => snapshot(),
  };
  if (!document.querySelector("link[data-qx-lab]")) { // this module's style, once per page
    document.head.appendChild(el("link", { rel: "stylesheet", href: new URL("lab.css", import.meta.url).href,
                                            "data-qx-lab": "" }));
  }

  // predictions, before and after the edit
  const predList = (testid) => el("ol", { class: "qx-preds", "data-testid": testid + "-list" });
  lab.before = predList("prediction");
  lab.after = predList("prediction-edited");
  lab.kl = el("span", { class: "qx-number", "data-testid": "kl" });
  lab.klNote = el("span", { class: "qx-note" });
  lab.afterTitle = el("h3", { id: id("after-title"), text: "With the heads switched off" });
  lab.predictions = el("section", { class: "qx-lab-part", "aria-labelledby": id("pred-title") }, [
    el("h2", { id: id("pred-title"), text: "What the model predicts next" }),
    el("p", { class: "qx-note", text: "The ten likeliest tokens after your text's last token, with the " +
      "probabilities the model gives them (its output at the last position only)." }),
    el("div", { class: "qx-preds-pair" }, [
      el("div", {}, [el("h3", { text: "The model" }), lab.before]),
      el("div", { "data-testid": "edited-part" }, [lab.afterTitle, lab.after]),
    ]),
    el("p", { class: "qx-kl-line" }, [el("span", { text: "KL divergence from the model's prediction: " }), lab.kl,
                                      " nats ", lab.klNote]),
  ]);

  // the logit lens: what each layer would predict at one position
  lab.lensSelect = el("select", { id: id("lens"), "data-testid": "lens-position" });
  lab.lensNote = el("p", { class: "qx-note", "data-testid": "lens-note" });
  lab.lensTable = el("table", { class: "qx-map-table qx-lens-table", "data-testid": "lens-table" });
  lab.lensPart = el("section", { class: "qx-lab-part", "aria-labelledby": id("lens-title") }, [
    el("h2", { id: id("lens-title"), text: "Where the answer forms: the logit lens" }),
    el("p", { class: "qx-note", text: "The stream leaving each layer, read as if it were the last: through the " +
      "final RMSNorm, its scale recomputed from that layer's stream, and the unembedding, as " +
      "qkv.lab.lens.logit_lens reads it (nostalgebraist 2020). Row 0 is the embeddings; row 30 is the model's own " +
      "prediction. Heads switched off below apply here too. A layer's reading is a probe, not what the model " +
      "uses: later layers may read the stream in another way." }),
    el("div", { class: "qx-controls qx-lab-controls" }, [
      el("div", { class: "qx-control" }, [el("div", { class: "qx-head" }, [
        el("label", { for: id("lens"), text: "Position read" })]), lab.lensSelect]),
    ]),
    lab.lensNote,
    el("div", { class: "qx-table-wrap", tabindex: "0", role: "region", "aria-label": "The logit lens, layer by layer" },
       [lab.lensTable]),
  ]);
  lab.lensSelect.addEventListener("change", () => {
    const r = lab.run, P = Number(lab.lensSelect.value);
    lab.lens = r && P === r.ids.length ? 0 : P;
    lab.sendLens();
    actions.stateChanged();
  });

  // the heads switched off
  lab.offNote = el("p", { id: id("off-note"), class: "qx-note", text:
    "Click a head, or move with the arrow keys and press Space, to switch it off: its output becomes " +
    "zero before the layer's output matrix, as qkv.lab.interventions.HeadsOff does; its weights are left as they are. " +
    "The model reruns from the first layer you edited." });
  lab.offSummary = el("p", { class: "qx-off-summary", "data-testid": "off-summary" });
  lab.clear = el("button", { type: "button", class: "qx-button qx-button--quiet", "data-testid": "off-clear",
                             text: "Switch every head back on" });
  lab.offGrid = headGrid(h, {
    label: "Heads switched off: 30 layers by 9 heads; a selected cell is switched off",
    testid: "off-grid", cellTestid: "off-cell", nLayers: index.n_layers, nHeads: index.n_heads, multi: true,
    describedBy: id("off-note"),
    onAct: (L, H) => {
      const at = lab.off.findIndex(([a, b]) => a === L && b === H);
      if (at >= 0) lab.off.splice(at, 1); else lab.off.push([L, H]);
      lab.off.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
      drawOff();
      actions.offChanged();
    },
  });
  lab.clear.addEventListener("click", () => { lab.off = []; drawOff(); actions.offChanged(); });
  lab.offPart = el("section", { class: "qx-lab-part", "aria-labelledby": id("off-title") }, [
    el("h2", { id: id("off-title"), text: "Switch heads off" }), lab.offNote, lab.offGrid.grid,
    el("div", { class: "qx-own-actions" }, [lab.clear]), lab.offSummary,
  ]);

  // the map of a per-head summary
  lab.gridSelect = el("select", { id: id("grid"), "data-testid": "grid" },
                      Object.keys(SUMMARIES).map((k) => el("option", { value: k, text: SUMMARIES[k].name })));
  lab.keySelect = el("select", { id: id("key"), "data-testid": "grid-key" });
  lab.keyControl = el("div", { class: "qx-control" }, [
    el("div", { class: "qx-head" }, [el("label", { for: id("key"), text: "Key token" })]), lab.keySelect]);
  lab.mapNote = el("p", { id: id("map-note"), class: "qx-note" });
  lab.legend = el("div", { class: "qx-legend", "aria-hidden": "true" });
  lab.readout = el("p", { class: "qx-map-readout", "data-testid": "head-readout" });
  lab.map = headGrid(h, {
    label: "Per-head summary of your text's attention: 30 layers by 9 heads; Enter shows a head's bars",
    testid: "head-grid", cellTestid: "head-cell", nLayers: index.n_layers, nHeads: index.n_heads,
    describedBy: id("map-note"),
    onAct: (L, H) => actions.selectHead(L, H),
    onFocus: (L, H) => { lab.focus = [L, H]; drawReadout(); },
  });
  lab.table = el("table", { class: "qx-map-table", "data-testid": "head-table" });
  lab.mapPart = el("section", { class: "qx-lab-part", "aria-labelledby": id("map-title") }, [
    el("h2", { id: id("map-title"), text: "Every head at a glance" }),
    el("div", { class: "qx-controls qx-lab-controls" }, [
      el("div", { class: "qx-control" }, [el("div", { class: "qx-head" }, [el("label", { for: id("grid"), text: "Summary" })]), lab.gridSelect]),
      lab.keyControl,
    ]),
    lab.mapNote, lab.legend, lab.map.grid, lab.readout,
    el("details", { class: "qx-map-details" }, [el("summary", { text: "The same numbers as a table" }),
      el("div", { class: "qx-table-wrap", tabindex: "0", role: "region", "aria-label": "The map's numbers as a table" },
         [lab.table])]),
  ]);
  const onMapControls = () => {
    lab.grid = lab.gridSelect.value;
    lab.key = Number(lab.keySelect.value) || 1;
    drawMap();
    actions.stateChanged();
  };
  lab.gridSelect.addEventListener("change", onMapControls);
  lab.keySelect.addEventListener("change", onMapControls);

  // a minimal pair
  const field = (name, testid, text, tag) => {
    const input = el(tag || "input", { id: id(name), "data-testid": testid, spellcheck: "false",
                                       maxlength: String(PAIR_CHARS) });
    if (!tag) input.setAttribute("type", "text"); else input.setAttribute("rows", "2");
    return { input: input, box: el("div", { class: "qx-control qx-wide qx-own" }, [
      el("div", { class: "qx-head" }, [el("label", { for: id(name), text: text })]), input]) };
  };
  lab.fText2 = field("text2", "text2", "Second text (the first is your text above)", "textarea");
  lab.fCont1 = field("cont1", "cont1", "Continuation 1");
  lab.fCont2 = field("cont2", "cont2", "Continuation 2");
  lab.pairRun = el("button", { type: "button", class: "qx-button", "data-testid": "pair-run", text: "Score the pair" });
  lab.pairStatus = el("p", { class: "qx-own-status", "data-testid": "pair-status" });
  lab.prefs = el("dl", { class: "qx-readouts qx-prefs" });
  lab.pairNote = el("p", { id: id("pair-note"), class: "qx-note" });
  lab.pairMap = headGrid(h, {
    label: "How far each head's weights move between the two texts, at the query shown: 30 layers by 9 heads",
    testid: "pair-grid", cellTestid: "pair-cell", nLayers: index.n_layers, nHeads: index.n_heads,
    describedBy: id("pair-note"),
    onAct: (L, H) => actions.selectHead(L, H),
    onFocus: (L, H) => { lab.pairFocus = [L, H]; drawPairReadout(); },
  });
  lab.pairReadout = el("p", { class: "qx-map-readout", "data-testid": "pair-readout" });
  lab.pairLegend = el("div", { class: "qx-legend", "aria-hidden": "true" });
  // direct logit attribution of text 1's question
  lab.dlaNote = el("p", { class: "qx-note", "data-testid": "dla-note" });
  lab.dlaTotal = el("p", { class: "qx-map-readout", "data-testid": "dla-total" });
  lab.dlaTable = el("table", { class: "qx-map-table qx-dla-table", "data-testid": "dla-table" });
  lab.patching = buildPatching(h, index, lab, ctx); // patching the pair: patching.js
  lab.dlaPart = el("section", { class: "qx-lab-part", "aria-labelledby": id("dla-title"), hidden: "" }, [
    el("h3", { id: id("dla-title"), text: "Who writes the answer: direct logit attribution" }),
    el("p", { class: "qx-note", text: "At your text's last position, each head's and each layer's MLP's direct " +
      "contribution to logit(first token of continuation 1) − logit(first token of continuation 2), in logit " +
      "units: what it adds to the stream, read through the final norm with its scale at that position frozen, and " +
      "the unembedding, as qkv.lab.attribution.direct_logit_attribution computes it (Elhage et al. 2021). With the " +
      "embeddings' share they add up to the logit difference. Direct only: a head that works through later " +
      "layers scores little here. The model's own run: heads switched off do not apply to this table." }),
    lab.dlaNote, lab.dlaTotal,
    el("div", { class: "qx-table-wrap", tabindex: "0", role: "region",
                "aria-label": "Direct logit attribution, layer by head" }, [lab.dlaTable]),
  ]);

  lab.pairPart = el("section", { class: "qx-lab-part", "aria-labelledby": id("pair-title") }, [
    el("h2", { id: id("pair-title"), text: "A minimal pair" }),
    el("p", { class: "qx-note", text: "Two texts that differ where you choose, and two continuations. For each " +
      "text, the preference is log P(continuation 1 | text) \u2212 log P(continuation 2 | text), in nats: each " +
      "continuation's log-probability summed over its tokens (the text's tokens, then the continuation's, each " +
      "tokenized on its own). Positive: the model prefers continuation 1. Heads switched off above apply here too." }),
    el("div", { class: "qx-controls qx-lab-controls" }, [lab.fText2.box, lab.fCont1.box, lab.fCont2.box]),
    el("div", { class: "qx-own-actions" }, [lab.pairRun]), lab.pairStatus, lab.prefs,
    lab.pairNote, lab.pairLegend, lab.pairMap.grid, lab.pairReadout, lab.dlaPart, lab.patching.part,
  ]);
  lab.pairRun.addEventListener("click", () => {
    lab.text2 = lab.fText2.input.value;
    lab.cont1 = lab.fCont1.input.value;
    lab.cont2 = lab.fCont2.input.value;
    actions.pairChanged();
  });

  // export and the method
  const exportButton = (kind, text) => el("button", { type: "button", class: "qx-button qx-button--quiet",
                                                      "data-testid": "export-" + kind, text: text });
  lab.exportCsv = exportButton("csv", "Numbers as CSV");
  lab.exportJson = exportButton("json", "Numbers as JSON");
  lab.exportSvg = exportButton("svg", "Bars and grids as SVG");
  lab.exportCsv.addEventListener("click", () => download("qkv-explorer.csv", "text/csv", toCsv(actions.snapshot())));
  lab.exportJson.addEventListener("click", () => download("qkv-explorer.json", "application/json",
                                                          JSON.stringify(actions.snapshot(), null, 1)));
  lab.exportSvg.addEventListener("click", () => download("qkv-explorer.svg", "image/svg+xml", toSvg(actions.snapshot())));
  lab.openPython = el("button", { type: "button", class: "qx-button qx-button--quiet", "data-testid": "open-python",
                                  text: "Open in Python (a script)" });
  lab.openPython.addEventListener("click", () => download("qkv_explorer.py", "text/x-python", pythonScript({
    text: ctx.own().text, maxTokens: index.max_tokens, off: lab.off, lens: lab.lens,
    text2: lab.text2, cont1: lab.cont1, cont2: lab.cont2, patched: lab.patching.done(),
  })));
  lab.exportPart = el("section", { class: "qx-lab-part", "aria-labelledby": id("export-title") }, [
    el("h2", { id: id("export-title"), text: "Take the numbers with you" }),
    el("p", { class: "qx-note", text: "What is on screen, made in this page (nothing is sent anywhere): the model, " +
      "your text and its token ids, the layer, head and query shown, the heads switched off, the bars, the " +
      "predictions and the map." }),
    el("div", { class: "qx-own-actions" }, [lab.exportCsv, lab.exportJson, lab.exportSvg, lab.openPython]),
    el("p", { class: "qx-note", text: "Open in Python saves a script that recomputes these numbers with qkv's " +
      "public functions, from your text and settings, and prints them: the predictions, the heads switched off, " +
      "the logit lens, the pair's preferences and the attribution, and the patching grid once it is complete." }),
  ]);
  lab.method = el("p", { class: "qx-method", "data-testid": "method", text:
    "One text proves nothing. A weight says where a head reads, not what the model uses: compare a minimal " +
    "pair of texts that differ in one word, against a baseline, on several texts chosen before you look, and " +
    "switch heads off to see whether the prediction needs them. The chapters do exactly that." });
  lab.live = el("p", { class: "qx-sr-only", "aria-live": "polite", "data-testid": "lab-announce" });
  lab.root = el("div", { class: "qx-lab", "data-testid": "lab" },
                [lab.method, lab.predictions, lab.lensPart, lab.offPart, lab.mapPart, lab.pairPart, lab.exportPart, lab.live]);

  /* -- drawing -- */

  function predRows(list, testid, pred) {
    const top = pred ? Math.max(...pred.probs) : 1;
    h.replaceChildren(list, pred ? pred.ids.map((tid, i) => {
      const p = pred.probs[i], text = p.toFixed(PROB_DECIMALS), fill = el("span", { class: "qx-fill" });
      fill.style.width = (100 * Math.min(1, p / Math.max(top, 1e-9))) + "%";
      return el("li", { class: "qx-pred", "data-testid": testid, "data-rank": String(i + 1),
                        "data-token": pred.pieces[i], "data-id": String(tid), "data-value": text }, [
        el("span", { class: "qx-pos", text: String(i + 1) }),
        el("span", { class: "qx-key", text: pred.labels[i] }),
        el("span", { class: "qx-track", "aria-hidden": "true" }, [fill]),
        el("span", { class: "qx-num", text: text }),
      ]);
    }) : []);
  }
  function drawOff() {
    lab.offGrid.cells.forEach((line, l) => line.forEach((cell, k) => {
      const off = lab.off.some(([L, H]) => L === l + 1 && H === k + 1);
      cell.setAttribute("aria-selected", String(off));
      cell.textContent = off ? "\u00D7" : "";
      cell.setAttribute("aria-label", "Layer " + (l + 1) + ", head " + (k + 1) + (off ? ", off" : ", on"));
    }));
    lab.offSummary.textContent = lab.off.length
      ? "Switched off: " + lab.off.map(([L, H]) => "layer " + L + " head " + H).join(", ") + "."
      : "Every head is on.";
    lab.clear.disabled = !lab.off.length;
  }
  lab.drawOff = drawOff;

  function drawReadout() {
    if (!lab.summary || !lab.focus) { lab.readout.textContent = ""; return; }
    const [L, H] = lab.focus, x = lab.summary.values[(L - 1) * index.n_heads + H - 1];
    lab.readout.textContent = "Layer " + L + ", head " + H + ": " + h.fmt(x, GRID_DECIMALS) +
      " (an even spread: " + h.fmt(lab.summary.baseline, GRID_DECIMALS) + ")";
  }
  function drawMap() {
    lab.gridSelect.value = lab.grid;
    lab.keyControl.hidden = lab.grid !== "key";
    const r = lab.run;
    if (!r) return;
    lab.key = Math.min(lab.key, r.ids.length);
    lab.keySelect.value = String(lab.key);
    const sum = headSummary(r, lab.grid, lab.key);
    lab.summary = sum;
    const entropy = lab.grid === "entropy";
    const top = entropy ? Math.log(r.ids.length) : 1; // the scale: 0 to the largest possible
    const fmt = (x) => Number.isFinite(x) ? h.fmt(x, GRID_DECIMALS) : "none";
    lab.map.cells.forEach((line, l) => line.forEach((cell, k) => {
      const x = sum.values[l * index.n_heads + k];
      cell.style.backgroundColor = ramp(x / top);
      cell.classList.toggle("qx-above", x > sum.baseline);
      cell.setAttribute("data-value", Number.isFinite(x) ? fmt(x).replace("\u2212", "-") : "");
      cell.setAttribute("aria-label", "Layer " + (l + 1) + ", head " + (k + 1) + ": " + fmt(x));
      cell.setAttribute("aria-selected", String(actions.selected()[0] === l + 1 && actions.selected()[1] === k + 1));
    }));
    const what = SUMMARIES[lab.grid];
    lab.mapNote.textContent = !sum.count ? "No query comes after this key: choose an earlier one."
      : what.name + ", averaged over the " + sum.count + " queries " +
        (lab.grid === "key" ? "after key " + lab.key + " (\u201C" + r.labels[lab.key - 1] + "\u201D)" : "from position 2 on") +
        ". An even spread over the keys each query sees would give " + fmt(sum.baseline) +
        "; a dot marks the heads above it. Colour runs from 0 (dark) to " + fmt(top) + " (light).";
    lab.legend.textContent = "";
    h.replaceChildren(lab.legend, [
      el("span", { text: "0" }),
      el("span", { class: "qx-legend-ramp" }, [el("span", { class: "qx-legend-mark" })]),
      el("span", { text: fmt(top) }),
    ]);
    lab.legend.querySelector(".qx-legend-mark").style.left = (100 * Math.min(1, sum.baseline / top)) + "%";
    // the table
    const headRow = el("tr", {}, [el("th", { scope: "col", text: "Layer" })]);
    for (let H = 1; H <= index.n_heads; H++) headRow.appendChild(el("th", { scope: "col", text: "Head " + H }));
    const rows = [];
    for (let L = 1; L <= index.n_layers; L++) {
      const tr = el("tr", {}, [el("th", { scope: "row", text: String(L) })]);
      for (let H = 1; H <= index.n_heads; H++) tr.appendChild(el("td", { text: fmt(sum.values[(L - 1) * index.n_heads + H - 1]) }));
      rows.push(tr);
    }
    h.replaceChildren(lab.table, [el("caption", { text: what.name + " per layer and head; an even spread gives " + fmt(sum.baseline) + "." }),
                                  el("thead", {}, [headRow]), el("tbody", {}, rows)]);
    drawReadout();
  }
  lab.drawMap = drawMap;

  /* A new run: its predictions, its map; the edited side waits for the worker. */
  lab.setRun = (r) => {
    lab.run = r;
    lab.edited = null;
    h.replaceChildren(lab.keySelect, r.labels.map((t, i) => el("option", { value: String(i + 1), text: (i + 1) + " \u00B7 " + t })));
    h.replaceChildren(lab.lensSelect, r.labels.map((t, i) => el("option", { value: String(i + 1), text: (i + 1) + " \u00B7 " + t })));
    if (lab.lens > r.ids.length) lab.lens = 0;
    lab.lensSelect.value = String(lab.lens || r.ids.length);
    predRows(lab.before, "prediction", r.predictions);
    predRows(lab.after, "prediction-edited", null);
    lab.kl.textContent = "\u2014";
    lab.kl.removeAttribute("data-value");
    drawMap();
  };
  lab.setEdited = (msg) => {
    lab.edited = msg;
    if (!msg) {
      predRows(lab.after, "prediction-edited", null);
      lab.kl.textContent = "\u2014";
      lab.kl.removeAttribute("data-value");
      lab.klNote.textContent = "(switch heads off below to compare)";
      lab.afterTitle.textContent = "With heads switched off (none are)";
      return;
    }
    predRows(lab.after, "prediction-edited", msg.predictions);
    const kl = msg.kl.toFixed(PROB_DECIMALS);
    lab.kl.textContent = kl;
    lab.kl.setAttribute("data-value", kl);
    lab.klNote.textContent = msg.off.length ? "(0 would mean the switched-off heads change nothing here; " +
      "rerun from layer " + msg.from_layer + ")" : "(no head is switched off: the prediction is the model's own)";
    lab.afterTitle.textContent = msg.off.length ? "With " + msg.off.length + " head" + (msg.off.length > 1 ? "s" : "") +
      " switched off" : "With the heads switched off (none are)";
  };
  lab.say = (text) => { lab.live.textContent = text; };

  /* -- the pair -- */
  lab.fillPair = () => {
    lab.fText2.input.value = lab.text2;
    lab.fCont1.input.value = lab.cont1;
    lab.fCont2.input.value = lab.cont2;
  };
  lab.pairReady = () => Boolean(lab.text2 && lab.cont1 && lab.cont2);
  const nats = (x) => h.fmt(x, 3);
  function prefLine(dt, testid, text, x) {
    return el("div", {}, [el("dt", { text: dt }), el("dd", {}, [
      el("span", { class: "qx-number", "data-testid": testid, "data-text": text, "data-value": nats(x).replace("\u2212", "-"),
                   text: nats(x) }), " nats"])]);
  }
  lab.setPaired = (msg) => {
    lab.paired = msg;
    const t = msg.texts, rows = [];
    const c1 = "\u201C" + lab.cont1 + "\u201D", c2 = "\u201C" + lab.cont2 + "\u201D";
    [0, 1].forEach((i) => rows.push(prefLine("Text " + (i + 1) + ": log P(" + c1 + ") \u2212 log P(" + c2 + ")",
                                             "preference", String(i + 1), t[i].preference)));
    rows.push(prefLine("Difference, text 1 \u2212 text 2", "preference-difference", "", t[0].preference - t[1].preference));
    if (msg.off.length) {
      [0, 1].forEach((i) => rows.push(prefLine("Text " + (i + 1) + " with the heads switched off", "preference-edited",
                                               String(i + 1), t[i].preference_edited)));
      rows.push(prefLine("Difference with the heads switched off", "preference-difference-edited", "",
                         t[0].preference_edited - t[1].preference_edited));
    }
    h.replaceChildren(lab.prefs, rows);
    drawPairMap();
  };
  lab.clearPaired = (text) => {
    lab.paired = null;
    h.replaceChildren(lab.prefs, []);
    lab.pairStatus.textContent = text;
    lab.pairMap.grid.hidden = true;
    lab.pairLegend.textContent = "";
    lab.pairNote.textContent = "";
    lab.pairReadout.textContent = "";
  };
  function pairQuery() {
    return Math.min(actions.selected()[2] || 1, lab.paired.T);
  }
  function drawPairReadout() {
    if (!lab.paired || !lab.pairFocus) { lab.pairReadout.textContent = ""; return; }
    const [L, H] = lab.pairFocus, m = lab.paired, P = pairQuery();
    lab.pairReadout.textContent = "Layer " + L + ", head " + H + ": " +
      h.fmt(m.moved[((L - 1) * m.n_heads + H - 1) * m.T + P - 1], GRID_DECIMALS);
  }
  function drawPairMap() {
    const m = lab.paired;
    if (!m) return;
    lab.pairMap.grid.hidden = false;
    const P = pairQuery(), t = m.texts, at = (l, k) => m.moved[(l * m.n_heads + k) * m.T + P - 1];
    // Colour up to the largest move at this query, not to 1: moves are mostly under 0.1, and
    // on a 0-to-1 scale every head would look the same.
    let top = 0;
    for (let l = 0; l < m.n_layers; l++) for (let k = 0; k < m.n_heads; k++) top = Math.max(top, at(l, k));
    top = top > 0 ? top : 1;
    lab.pairMap.cells.forEach((line, l) => line.forEach((cell, k) => {
      const x = at(l, k), text = h.fmt(x, GRID_DECIMALS);
      cell.style.backgroundColor = ramp(x / top);
      cell.setAttribute("data-value", text);
      cell.setAttribute("aria-label", "Layer " + (l + 1) + ", head " + (k + 1) + ": " + text);
      cell.setAttribute("aria-selected", String(actions.selected()[0] === l + 1 && actions.selected()[1] === k + 1));
    }));
    lab.pairNote.textContent = "How far each head's weights move between the two texts at query position " + P +
      " (\u201C" + t[0].labels[P - 1] + "\u201D in text 1, \u201C" + t[1].labels[P - 1] + "\u201D in text 2; " +
      "the Query token control above picks it, up to position " + m.T + "): half the sum of the differences " +
      "of the two rows of weights: 0 is the same weights, 1 no key shared. Colour runs from 0 (dark) to the " +
      "largest move at this query, " + h.fmt(top, GRID_DECIMALS) + " (light).";
    h.replaceChildren(lab.pairLegend, [el("span", { text: "0" }), el("span", { class: "qx-legend-ramp" }),
                                       el("span", { text: h.fmt(top, GRID_DECIMALS) })]);
    drawPairReadout();
  }
  lab.drawPairMap = drawPairMap;
  /* The heads switched off, rerun in the worker from the first edited layer; nothing to run
     while every head is on (the edited side is then empty). */
  lab.sendEdit = function (fromReader) {
    if (!ctx.own().result) return;
    ctx.panel.removeAttribute("data-edited");
    lab.editId = -1;
    if (!lab.off.length) {
      lab.setEdited(null);
      ctx.panel.setAttribute("data-edited", "");
      if (fromReader) lab.say("Every head is on again: the prediction is the model's own.");
      return;
    }
    lab.editId = ctx.send({ type: "edit", off: lab.off.map(([L, H]) => [L - 1, H - 1]) });
  }
  /* The logit lens at the chosen position, heads off as above. */
  lab.sendLens = function () {
    ctx.panel.removeAttribute("data-lensed");
    lab.lensId = -1;
    if (!ctx.own().result) return;
    const P = lab.lens || ctx.own().result.ids.length;
    lab.lensNote.textContent = "Reading the layers at position " + P + "\u2026";
    lab.lensId = ctx.send({ type: "lens", position: P - 1, off: lab.off.map(([L, H]) => [L - 1, H - 1]) });
  };
  function onLensed(msg) {
    lab.lensed = msg;
    const r = ctx.own().result, P = msg.position + 1, fin = msg.final;
    const probText = (p) => p.toFixed(PROB_DECIMALS);
    const head = el("tr", {}, ["Layer", "Top token", "Its probability", "\u201C" + fin.label + "\u201D: probability",
                              "Rank"].map((t) => el("th", { scope: "col", text: t })));
    const rows = msg.layers.map((row) => {
      const meter = el("meter", { min: "0", max: "1", value: String(row.final_prob),
                                  "aria-label": "Layer " + row.layer + ": probability of \u201C" + fin.label + "\u201D" });
      return el("tr", { "data-testid": "lens-row", "data-layer": String(row.layer), "data-token": row.piece,
                        "data-id": String(row.id), "data-prob": probText(row.prob),
                        "data-final-prob": probText(row.final_prob), "data-final-rank": String(row.final_rank),
                        class: row.id === fin.id ? "qx-lens-final" : "" }, [
        el("th", { scope: "row", text: row.layer === 0 ? "0 (embeddings)" : String(row.layer) }),
        el("td", { class: "qx-key", text: row.label }),
        el("td", { text: probText(row.prob) }),
        el("td", {}, [meter, " ", probText(row.final_prob)]),
        el("td", { text: String(row.final_rank) }),
      ]);
    });
    h.replaceChildren(lab.lensTable, [
      el("caption", { text: "At position " + P + " (\u201C" + r.labels[P - 1] + "\u201D): each layer's likeliest next " +
        "token, and the probability and rank of \u201C" + fin.label + "\u201D, the model's own top token there." }),
      el("thead", {}, [head]), el("tbody", {}, rows)]);
    const from = msg.layers.findIndex((row, l) => msg.layers.slice(l).every((x) => x.final_rank === 1));
    lab.lensNote.textContent = "\u201C" + fin.label + "\u201D is the top token from " +
      (from === 0 ? "the embeddings" : "layer " + from) + " on" +
      (msg.off.length ? ", with " + msg.off.length + " head" + (msg.off.length > 1 ? "s" : "") + " switched off." : ".");
    ctx.panel.setAttribute("data-lensed", P + ":" + offText(msg.off.map(([L, H]) => [L + 1, H + 1])));
  }

  /* Direct logit attribution: needs a run and the pair's two continuations. */
  lab.sendDla = function () {
    ctx.panel.removeAttribute("data-attributed");
    lab.dlaId = -1;
    lab.dlaPart.hidden = true;
    if (!ctx.own().result || !lab.cont1 || !lab.cont2) return;
    lab.dlaId = ctx.send({ type: "dla", conts: [lab.cont1, lab.cont2] });
  };
  const logit = (x) => h.fmt(x, PROB_DECIMALS);
  function onAttributed(msg) {
    lab.attributed = msg;
    lab.dlaPart.hidden = false;
    const [a, b] = msg.tokens, H = msg.n_heads;
    let top = 1e-9;
    msg.heads.forEach((x) => { top = Math.max(top, Math.abs(x)); });
    msg.mlps.forEach((x) => { top = Math.max(top, Math.abs(x)); });
    const cell = (L, head, x) => {
      const td = el("td", { "data-testid": "dla-cell", "data-layer": String(L), "data-head": head,
                            "data-value": logit(x).replace("\u2212", "-"), text: logit(x) });
      const alpha = (0.45 * Math.min(1, Math.abs(x) / top)).toFixed(3);
      td.style.backgroundColor = x >= 0 ? "rgba(30, 136, 229, " + alpha + ")" : "rgba(229, 57, 53, " + alpha + ")";
      return td;
    };
    const headRow = el("tr", {}, [el("th", { scope: "col", text: "Layer" })]);
    for (let k = 1; k <= H; k++) headRow.appendChild(el("th", { scope: "col", text: "Head " + k }));
    headRow.appendChild(el("th", { scope: "col", text: "MLP" }));
    const rows = [];
    for (let L = 1; L <= msg.n_layers; L++) {
      const tr = el("tr", {}, [el("th", { scope: "row", text: String(L) })]);
      for (let k = 1; k <= H; k++) tr.appendChild(cell(L, String(k), msg.heads[(L - 1) * H + k - 1]));
      tr.appendChild(cell(L, "mlp", msg.mlps[L - 1]));
      rows.push(tr);
    }
    h.replaceChildren(lab.dlaTable, [
      el("caption", { text: "Each part's direct share of logit(\u201C" + a.label + "\u201D) \u2212 logit(\u201C" +
        b.label + "\u201D); blue favours \u201C" + a.label + "\u201D, red \u201C" + b.label + "\u201D." }),
      el("thead", {}, [headRow]), el("tbody", {}, rows)]);
    let best = 0;
    msg.heads.forEach((x, i) => { if (Math.abs(x) > Math.abs(msg.heads[best])) best = i; });
    lab.dlaNote.textContent = "The largest head: layer " + (Math.floor(best / H) + 1) + " head " + (best % H + 1) +
      ", " + logit(msg.heads[best]) + ". The embeddings add " + logit(msg.embedding) + ".";
    lab.dlaTotal.textContent = "Logit difference: " + logit(msg.total) + " (the parts and the embeddings add up to it).";
    lab.dlaTotal.setAttribute("data-value", logit(msg.total).replace("\u2212", "-"));
    lab.dlaTotal.setAttribute("data-embedding", logit(msg.embedding).replace("\u2212", "-"));
    ctx.panel.setAttribute("data-attributed", a.id + "," + b.id);
  }

  /* The minimal pair: the page's text and the second text, each with both continuations. */
  lab.sendPair = function () {
    lab.sendDla();
    ctx.panel.removeAttribute("data-paired");
    lab.pairId = -1;
    if (!ctx.own().result || !lab.pairReady()) {
      lab.patching.setPair(null);
      lab.clearPaired(ctx.own().result ? "Give a second text and two continuations, then score the pair." : "");
      return;
    }
    lab.pairStatus.textContent = "Scoring the pair\u2026";
    lab.pairId = ctx.send({ type: "pair", texts: [ctx.own().text, lab.text2], conts: [lab.cont1, lab.cont2],
                off: lab.off.map(([L, H]) => [L - 1, H - 1]), maxTokens: index.max_tokens });
  }
  function onPaired(msg) {
    msg.off = msg.off.map(([L, H]) => [L + 1, H + 1]);
    lab.setPaired(msg);
    lab.patching.setPair(msg);
    const t = msg.texts, d = t[0].preference - t[1].preference;
    lab.pairStatus.textContent = "Scored in " + msg.seconds.toFixed(1) + " s.";
    ctx.panel.setAttribute("data-paired", offText(msg.off));
    lab.say("Preference for continuation 1: text 1 " + t[0].preference.toFixed(2) + " nats, text 2 " +
            t[1].preference.toFixed(2) + ", difference " + d.toFixed(2) +
            (msg.off.length ? "; with the heads switched off, difference " +
              (t[0].preference_edited - t[1].preference_edited).toFixed(2) : "") + ".");
  }
  function onEdited(msg) {
    msg.off = msg.off.map(([L, H]) => [L + 1, H + 1]); // as the page counts
    lab.setEdited(msg);
    ctx.panel.setAttribute("data-edited", offText(msg.off));
    const p = msg.predictions, b = ctx.own().result.predictions;
    lab.say("With " + offText(msg.off).replace(/,/g, ", ") + " switched off, the likeliest next token is \u201C" +
            p.labels[0] + "\u201D at " + p.probs[0].toFixed(2) + " (the model's own: \u201C" + b.labels[0] + "\u201D at " +
            b.probs[0].toFixed(2) + "); KL divergence " + msg.kl.toFixed(4) + " nats.");
  }
  /* What is on screen, for the export. */
  function snapshot() {
    const r = ctx.own().result, screen = ctx.screen(), s = screen.s, shown = screen.values, digits = screen.digits;
    const preds = (p) => p ? p.ids.map((tid, i) => ({ rank: i + 1, token_id: tid, token: p.pieces[i], label: p.labels[i],
                                                     probability: Number(p.probs[i].toFixed(4)) })) : [];
    const sum = lab.summary, values = [];
    for (let L = 0; L < index.n_layers; L++) {
      values.push(Array.from(sum.values.subarray(L * index.n_heads, (L + 1) * index.n_heads), (x) => Number(x.toFixed(3))));
    }
    return {
      model: index.model, text: ctx.own().text, token_ids: r.ids, tokens: r.pieces,
      layer: s.layer, head: s.head, query: s.query, stage: s.stage, stage_name: screen.stageName.replace(/ /g, "_"),
      scale: s.scale, caption: screen.caption,
      bars: shown.map((x, j) => ({ position: j + 1, token: r.pieces[j], label: r.labels[j], value: Number(x.toFixed(digits)) })),
      predictions: preds(r.predictions),
      heads_off: lab.off.map((x) => x.slice()),
      edit: lab.off.length ? "qkv.lab.interventions.HeadsOff: the output of each head switched off is zero before W_O" : null,
      predictions_edited: lab.edited ? preds(lab.edited.predictions) : [],
      kl: lab.edited ? Number(lab.edited.kl.toFixed(4)) : null,
      pair: lab.paired ? { texts: [ctx.own().text, lab.text2], continuations: [lab.cont1, lab.cont2],
                           token_ids: lab.paired.texts.map((x) => x.ids), continuation_ids: lab.paired.conts,
                           preference: lab.paired.texts.map((x) => Number(x.preference.toFixed(3))),
                           preference_edited: lab.paired.off.length
                             ? lab.paired.texts.map((x) => Number(x.preference_edited.toFixed(3))) : null } : null,
      grid: { summary: lab.grid, key: lab.grid === "key" ? lab.key : null, baseline: Number(sum.baseline.toFixed(3)),
              values: values },
    };
  }
  /* The worker's replies to the experiment's messages; true when the reply was ours. */
  lab.onMessage = (msg) => {
    if (lab.patching.onMessage(msg)) return true;
    if (msg.type === "edited" && msg.id === lab.editId) onEdited(msg);
    else if (msg.type === "paired" && msg.id === lab.pairId) onPaired(msg);
    else if (msg.type === "lensed" && msg.id === lab.lensId) onLensed(msg);
    else if (msg.type === "attributed" && msg.id === lab.dlaId) onAttributed(msg);
    else if (msg.type === "error" && msg.id !== undefined &&
             (msg.id === lab.pairId || msg.id === lab.editId || msg.id === lab.lensId || msg.id === lab.dlaId)) {
      if (msg.id === lab.pairId) lab.clearPaired(msg.message);
      else if (msg.id === lab.dlaId) lab.dlaNote.textContent = msg.message;
      else if (msg.id === lab.lensId) lab.lensNote.textContent = msg.message;
      else lab.pairStatus.textContent = msg.message;
      lab.say(msg.message);
    } else return false;
    return true;
  };
  drawOff();
  lab.fillPair();
  if (new URLSearchParams(lab.query).has("mission")) { // a guided experiment: missions.js, only then
    import("./missions.js").then((m) => m.startMission(h, lab, ctx));
  }
  return lab;
}

/* ---- export ------------------------------------------------------------------------------------ */

/* A Python script that recomputes the lab's numbers with qkv's public API and prints them,
   one labelled line each (tests/browser/test_explorer_lens_browser.py runs it and compares
   its lines with the page). Strings go in as JSON literals, which Python reads as they are. */
export function pythonScript(state) {
  const q = (x) => JSON.stringify(String(x));
  const off = state.off.map(([L, H]) => "(" + L + ", " + H + ")").join(", ");
  const pair = Boolean(state.text2 && state.cont1 && state.cont2);
  const lines = [
    '"""The explorer\'s numbers for one text, recomputed with qkv (pip install "qkv[smollm2]").',
    "",
    "Written by the explorer's lab: run it with `python qkv_explorer.py`. Layers and heads",
    'are counted from 1, as on the page; probabilities are rounded as the page rounds them."""',
    "",
    "import numpy as np",
    "",
    "from qkv import smollm2",
    "from qkv.lab import attribution, interventions, lens",
    "from qkv.lab.effects import MinimalPair, preference",
    "",
    "TEXT = " + q(state.text),
    "HEADS_OFF = [" + off + "]  # (layer, head), from 1",
    "LENS_POSITION = " + (state.lens || 0) + "  # from 1; 0: the text's last token",
    "MAX_TOKENS = " + state.maxTokens + "  # the explorer runs at most this many tokens",
    "",
    "model = smollm2.load()",
    "ids = model.encode(TEXT)[:MAX_TOKENS]",
    "",
    "",
    "def probabilities(logits):",
    "    z = np.asarray(logits, dtype=np.float64)",
    "    p = np.exp(z - z.max())",
    "    return p / p.sum()",
    "",
    "",
    "def show(label, p):",
    "    for rank, i in enumerate(np.argsort(-p, kind=\"stable\")[:10], start=1):",
    "        print(f\"{label} {rank} {model.pieces([i])[0]!r} {p[i]:.4f}\")",
    "",
    "",
    "p = probabilities(smollm2.forward(model, ids).logits[-1])",
    'show("prediction", p)',
    "if HEADS_OFF:",
    "    off = {(layer - 1, head - 1) for layer, head in HEADS_OFF}",
    "    edits = interventions.heads_off(model.config, [off])",
    "    q = probabilities(interventions.run_edited(model, ids, edits, rows=[-1]).logits[0, -1])",
    '    show("prediction with heads off", q)',
    '    print(f"kl {(p * (np.log(p) - np.log(q))).sum():.4f}")',
    "",
    "# the logit lens of the model's own run (the page applies heads off to it too)",
    "position = (LENS_POSITION or len(ids)) - 1",
    "seen = lens.logit_lens(model, ids, position=position, top=1)",
    "for layer, (top, prob) in enumerate(zip(seen.top_ids[:, 0], seen.top_probs[:, 0])):",
    "    print(f\"lens {layer} {model.pieces([top])[0]!r} {prob:.4f} rank {seen.final_ranks[layer]}\")",
  ];
  if (pair) {
    lines.push(
      "",
      "TEXT_2 = " + q(state.text2),
      "CONTINUATIONS = (" + q(state.cont1) + ", " + q(state.cont2) + ")",
      "for n, text in enumerate((TEXT, TEXT_2), start=1):",
      '    print(f"preference text {n} {preference(model, text, *CONTINUATIONS):.3f}")',
      "a, b = (int(model.encode(c)[0]) for c in CONTINUATIONS)",
      "dla = attribution.direct_logit_attribution(model, ids, a, b)",
      "for layer, row in enumerate(dla.heads, start=1):",
      '    print(f"dla layer {layer} heads " + " ".join(f"{x:.4f}" for x in row) + f" mlp {dla.mlps[layer - 1]:.4f}")',
      'print(f"dla embedding {dla.embedding:.4f} total {dla.logit_difference:.4f}")',
    );
  }
  if (pair && state.patched) { // the grid of patching effects shown: every cell, rows from layer 1
    const heads = state.patched === "heads";
    lines.push(
      "",
      "# patching: text 2's run copied into text 1's; (preference with the patch - text 1's)",
      "# / (text 2's - text 1's). qkv counts layers from 0; these lines from 1, as the page",
      "pair = MinimalPair.of(model, TEXT, TEXT_2, *CONTINUATIONS)",
      heads ? "grid = pair.head_effects()  # (layers, heads): each head's output at every text position"
        : "grid = pair.stream_effects()  # (layers, positions): the stream entering each layer",
      "for layer, row in enumerate(grid, start=1):",
      '    print(f"patch ' + state.patched + ' layer {layer} " + " ".join(f"{x:.4f}" for x in row))',
    );
  }
  return lines.join("\n") + "\n";
}

function download(name, type, text) {
  // a data: address, not a Blob's object URL: the site's code creates no URLs it did not ship
  // (tests/fast/test_model_vendor.py), and a data: link only starts a download
  const a = document.createElement("a");
  a.href = "data:" + type + ";charset=utf-8," + encodeURIComponent(text);
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
}

const csvField = (x) => {
  const s = String(x);
  return /[",\n\r]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
};

/* One table: what, rank or position, layer, head, token, value; the state in the first rows. */
export function toCsv(snap) {
  const rows = [["what", "index", "layer", "head", "token", "value"]];
  rows.push(["model", "", "", "", snap.model, ""]);
  rows.push(["text", "", "", "", snap.text, ""]);
  snap.token_ids.forEach((tid, i) => rows.push(["token_id", i + 1, "", "", snap.tokens[i], tid]));
  snap.heads_off.forEach(([L, H]) => rows.push(["head_off", "", L, H, "", ""]));
  snap.bars.forEach((b) => rows.push([snap.stage_name, b.position, snap.layer, snap.head, b.token, b.value]));
  snap.predictions.forEach((p) => rows.push(["prediction", p.rank, "", "", p.token, p.probability]));
  snap.predictions_edited.forEach((p) => rows.push(["prediction_edited", p.rank, "", "", p.token, p.probability]));
  if (snap.kl !== null) rows.push(["kl", "", "", "", "", snap.kl]);
  if (snap.pair) {
    snap.pair.preference.forEach((x, i) => rows.push(["preference", i + 1, "", "", snap.pair.texts[i], x]));
    (snap.pair.preference_edited || []).forEach((x, i) => rows.push(["preference_edited", i + 1, "", "", snap.pair.texts[i], x]));
  }
  snap.grid.values.forEach((line, l) => line.forEach((x, k) => rows.push(["grid_" + snap.grid.summary, "", l + 1, k + 1, "", x])));
  return rows.map((r) => r.map(csvField).join(",")).join("\n") + "\n";
}

const esc = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

/* The bars, the predictions and the map as one SVG image (its own colours: it leaves the page). */
export function toSvg(snap) {
  const parts = [], W = 640, rowH = 18;
  let y = 24;
  parts.push('<text x="10" y="' + y + '" font-weight="bold">' + esc(snap.model + ": " + snap.caption) + "</text>");
  y += 10;
  const max = Math.max(1e-9, ...snap.bars.map((b) => Math.abs(b.value)));
  snap.bars.forEach((b) => {
    y += rowH;
    const w = 300 * Math.abs(b.value) / max;
    parts.push('<text x="10" y="' + y + '">' + esc(b.position + " " + b.label) + "</text>");
    parts.push('<rect x="180" y="' + (y - 12) + '" width="' + w.toFixed(1) + '" height="12" fill="' + (b.value < 0 ? "#b5006a" : "#3b518b") + '"/>');
    parts.push('<text x="' + (190 + 300) + '" y="' + y + '">' + esc(b.value) + "</text>");
  });
  const preds = (title, list) => {
    if (!list.length) return;
    y += rowH + 10;
    parts.push('<text x="10" y="' + y + '" font-weight="bold">' + esc(title) + "</text>");
    list.forEach((p) => {
      y += rowH;
      parts.push('<text x="10" y="' + y + '">' + esc(p.rank + " " + p.label) + "</text>");
      parts.push('<rect x="180" y="' + (y - 12) + '" width="' + (300 * p.probability).toFixed(1) + '" height="12" fill="#21908d"/>');
      parts.push('<text x="490" y="' + y + '">' + esc(p.probability) + "</text>");
    });
  };
  preds("Next token", snap.predictions);
  preds("Next token, heads " + snap.heads_off.map(([L, H]) => L + "." + H).join(", ") + " off (KL " + snap.kl + " nats)",
        snap.predictions_edited);
  y += rowH + 10;
  parts.push('<text x="10" y="' + y + '" font-weight="bold">' + esc(SUMMARIES[snap.grid.summary].name +
    " (even spread " + snap.grid.baseline + "); rows: layers 1-30, columns: heads 1-9") + "</text>");
  const top = snap.grid.summary === "entropy" ? Math.log(snap.token_ids.length) : 1;
  snap.grid.values.forEach((line, l) => line.forEach((x, k) => {
    parts.push('<rect x="' + (40 + 22 * k) + '" y="' + (y + 8 + 12 * l) + '" width="21" height="11" fill="' + ramp(x / top) + '"><title>' +
               "layer " + (l + 1) + " head " + (k + 1) + ": " + x + "</title></rect>");
  }));
  y += 8 + 12 * snap.grid.values.length + 10;
  return '<svg xmlns="http://www.w3.org/2000/svg" width="' + W + '" height="' + y + '" viewBox="0 0 ' + W + " " + y +
    '" font-family="sans-serif" font-size="12"><rect width="100%" height="100%" fill="#fff"/>' + parts.join("") + "</svg>\n";
}
