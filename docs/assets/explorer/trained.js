/* The explorer's trained mode: SmolLM2-135M-Instruct (?model=smollm2).
 *
 * An ES module that explorer.js imports only when a reader opens this mode, so the toy's
 * first load does not carry it. It gets explorer.js's small DOM and number helpers as an
 * argument (startTrained(root, panel, helpers)).
 *
 * Two sources of numbers, drawn by the same controls and bars:
 * - the built sentences: qkv.smollm2 ran on them while the site was built
 *   (sitebuild/qkv_site/smollm2_data.py): a small index, then per sentence one
 *   gzip-compressed JSON file per block of layers, fetched only when shown. Numbers are
 *   stored as integers, each rounded once (from the unrounded value) to the decimals shown.
 * - the reader's own text: the model runs in this page, in a Web Worker (model/worker.js,
 *   a JavaScript mirror of qkv/smollm2.py), on the model file this site serves, fetched
 *   when the reader asks. Its numbers arrive unrounded and are rounded once, here.
 *
 * State lives in the URL query: ?model=smollm2&sentence=S (or &text=T)&layer=L&head=H
 * &query=P&stage=1..3&scale=1|0, all counted from 1 as on the page; the reader's own text
 * adds lab.js's keys (off=L.H,L.H, grid=, key=) when they differ from the defaults. Attention is causal, so
 * the query at position P sees keys 1..P; each layer's and head's numbers are one flat
 * triangle, the keys of query P starting at P(P-1)/2. Values read from the URL are clamped
 * and only ever written as text, never HTML.
 */

const STAGES = ["raw scores", "scaled scores", "softmax weights"];
const OWN = "own"; // the sentence select's value for the reader's own text
// A text longer than this is cut before it is tokenized (an address can carry megabytes);
// 64 tokens never need as much: the vocabulary's longest token has 81 characters.
const MAX_CHARS = 8000;
// Screen readers hear one summary once the controls have been still this long, not each
// of the ~30 states a second that holding an arrow key on a slider goes through.
const ANNOUNCE_MS = 700;
const URL_DELAY_MS = 100; // the address bar follows the controls this long after they settle

let h; // explorer.js's helpers: el, maths, replaceChildren, fmt, maxAbs, niceCeiling, intIn, ...

/* ---- the address bar -------------------------------------------------------------------- */

/* The first MAX_CHARS characters of a text, never half of a surrogate pair. */
export function cutText(text) {
  if (text.length <= MAX_CHARS) return text;
  const code = text.charCodeAt(MAX_CHARS - 1);
  return text.slice(0, code >= 0xd800 && code <= 0xdbff ? MAX_CHARS - 1 : MAX_CHARS);
}

function readUrl(index) {
  const p = new URLSearchParams(window.location.search), d = index.defaults;
  const text = p.get("text"), own = text !== null, scale = p.get("scale");
  const sentence = own ? OWN : h.intIn(p.get("sentence"), 1, index.sentences.length, d.sentence);
  const T = own ? index.max_tokens : index.sentences[sentence - 1].labels.length;
  return {
    sentence: sentence,
    text: own ? cutText(text) : null,
    layer: h.intIn(p.get("layer"), 1, index.n_layers, d.layer),
    head: h.intIn(p.get("head"), 1, index.n_heads, d.head),
    // own text: 0 means its last token, once the text has run and its length is known
    query: h.intIn(p.get("query"), 1, T, own ? 0 : Math.min(d.query, T)),
    stage: h.intIn(p.get("stage"), 1, STAGES.length, d.stage),
    scale: scale === "1" ? 1 : scale === "0" ? 0 : d.scale,
    lab: { query: window.location.search }, // lab.js reads its keys (off=, grid=, ...) from it
  };
}

function writeUrl(s, text, lab) {
  const pairs = [["model", "smollm2"], s.sentence === OWN ? ["text", text || ""] : ["sentence", s.sentence]];
  for (const key of ["layer", "head", "query", "stage", "scale"]) {
    if (!(key === "query" && !s.query)) pairs.push([key, s[key]]);
  }
  if (s.sentence === OWN && lab && lab.keys) pairs.push(...lab.keys()); // the experiment's, once loaded
  // commas stay commas in off=L.H,L.H (they need no escape in a query)
  const query = pairs.map(([k, v]) => k + "=" + encodeURIComponent(String(v)).replace(k === "off" ? /%2C/g : /$^/, ",")).join("&");
  window.history.replaceState(window.history.state, "", window.location.pathname + "?" + query);
}

/* ---- the numbers of one state, from either source -------------------------------------- */

/* One block of layers of a built sentence: integers, counts of 10^-decimals. */
function builtSource(chunk, labels, index) {
  const sd = 10 ** index.score_decimals, wd = 10 ** index.weight_decimals;
  const first = chunk.first_layer - 1; // tables start at this layer (from 0)
  const keys = (table, P, unit) => table.slice(P * (P - 1) / 2, P * (P + 1) / 2).map((x) => x / unit);
  return {
    labels: labels, dHead: index.d_head,
    raw: (L, H, P) => keys(chunk.raw[L - first][H], P, sd),
    scaled: (L, H, P) => keys(chunk.scaled[L - first][H], P, sd),
    weights: (s, L, H, P) => keys(chunk.weights[s][L - first][H], P, wd),
    entropy: (s, L, H, P) => chunk.entropy[s][L - first][H][P - 1] / wd,
    rawMax: (L, H) => h.maxAbs(chunk.raw[L - first][H]) / sd,
  };
}

/* A run in this page: unrounded numbers in flat typed arrays, [layer][head] then the triangle. */
function ownSource(r) {
  const T = r.ids.length, tri = T * (T + 1) / 2;
  const table = (L, H) => (L * r.n_heads + H) * tri;
  const keys = (flat, L, H, P) => Array.from(flat.subarray(table(L, H) + P * (P - 1) / 2, table(L, H) + P * (P + 1) / 2));
  return {
    labels: r.labels, dHead: r.d_head,
    raw: (L, H, P) => keys(r.raw, L, H, P),
    scaled: (L, H, P) => keys(r.scaled, L, H, P),
    weights: (s, L, H, P) => keys(r.weights[s], L, H, P),
    entropy: (s, L, H, P) => r.entropy[s][(L * r.n_heads + H) * T + P - 1],
    rawMax: (L, H) => h.maxAbs(Array.from(r.raw.subarray(table(L, H), table(L, H) + tri))),
  };
}

function numbers(src, s) {
  const L = s.layer - 1, H = s.head - 1, P = s.query;
  const raw = src.raw(L, H, P), weights = src.weights(s.scale, L, H, P);
  const maxWeight = Math.max(...weights);
  return {
    raw: raw,
    scaled: s.scale ? src.scaled(L, H, P) : raw, // scaling off: divided by 1
    weights: weights,
    entropy: src.entropy(s.scale, L, H, P),
    maxWeight: maxWeight,
    top: weights.indexOf(maxWeight),
    root: Math.sqrt(src.dHead), // 8: the scale of stage 2
    // one axis per head: the largest raw score of any query, so moving the query keeps it
    rawMax: h.niceCeiling(Math.max(1e-9, src.rawMax(L, H))),
  };
}

/* Which key/value head a query head reads, and which query heads share it (from 1). */
function kvGroup(index, head) {
  const size = index.n_heads / index.n_kv_heads, kv = Math.floor((head - 1) / size);
  const heads = [];
  for (let q = kv * size + 1; q <= (kv + 1) * size; q++) heads.push(q);
  return { kv: kv + 1, heads: heads };
}

const listText = (xs) => xs.slice(0, -1).join(", ") + " and " + xs[xs.length - 1];
const megabytes = (bytes) => Math.round(bytes / 1e6) + " MB";

/* ---- the model in this page: one worker per visit, shared by every trained panel --------- */

const model = { worker: null, status: "idle", listener: null, nextRun: 1 };

function modelSend(message) {
  if (!model.worker) {
    const worker = new Worker(new URL("model/worker.js", import.meta.url), { type: "module" });
    worker.onmessage = (event) => {
      const msg = event.data;
      if (msg.type === "progress") model.status = "loading";
      if (msg.type === "loaded") { model.status = "loaded"; model.product = msg.product; }
      if (msg.type === "error" && msg.id === undefined) model.status = "idle";
      if (model.listener) model.listener(msg);
    };
    worker.onerror = (event) => { // the worker died: its script did not load, or memory ran out
      event.preventDefault();
      worker.terminate();
      if (model.worker === worker) model.worker = null;
      model.status = "idle";
      if (model.listener) {
        model.listener({ type: "error", kind: "crashed", message: "The model stopped (" +
          (event.message || "its script failed, or the browser ran out of memory") +
          "). Load it again, or use the built sentences." });
      }
    };
    model.worker = worker;
  }
  model.worker.postMessage(message);
}

/* ---- building the panel ------------------------------------------------------------------- */

function buildControls(index) {
  const { el, maths } = h;
  const id = (name) => h.ROOT_ID + "-t-" + name;
  const slider = (name, max) => el("input", { id: id(name), type: "range", min: "1", max: String(max),
                                              step: "1", "data-testid": name });
  const c = {};
  c.sentence = el("select", { id: id("sentence"), "data-testid": "sentence" },
                  index.sentences.map((item, i) => el("option", { value: String(i + 1), text: (i + 1) + ". " + item.text }))
                    .concat([el("option", { value: OWN, text: "Your own text: the model runs in this page" })]));
  c.layer = slider("layer", index.n_layers);
  c.layerOut = el("output", { for: id("layer"), class: "qx-value" });
  c.head = slider("head", index.n_heads);
  c.headOut = el("output", { for: id("head"), class: "qx-value" });
  c.query = el("select", { id: id("query"), "data-testid": "query" });
  c.stage = slider("stage", STAGES.length);
  c.stageOut = el("output", { for: id("stage"), class: "qx-value" });
  c.ticks = el("ol", { class: "qx-ticks", "aria-hidden": "true" },
               STAGES.map((name, i) => el("li", { text: (i + 1) + " " + name })));
  c.scale = el("input", { id: id("scale"), type: "checkbox", "data-testid": "scale" });
  const scaleLabel = el("label", { for: id("scale") }, [
    "Scale by 1/", maths(["\u221A", ["var", "d"], ["sub", "k"]]), " = 1/" + Math.sqrt(index.d_head)]);

  // the reader's own text: a text box, the buttons that load and run the model, progress
  const size = megabytes(index.weights.bytes);
  c.text = el("textarea", { id: id("text"), "data-testid": "text", rows: "3", maxlength: String(MAX_CHARS),
                            spellcheck: "false", "aria-describedby": id("own-note") });
  c.load = el("button", { type: "button", class: "qx-button", "data-testid": "load-model",
                          text: "Load the model (" + size + ")" });
  c.run = el("button", { type: "button", class: "qx-button", "data-testid": "run",
                         text: "Run the model" });
  c.cancel = el("button", { type: "button", class: "qx-button qx-button--quiet", "data-testid": "cancel-load", text: "Cancel" });
  c.progress = el("progress", { "data-testid": "progress", max: String(index.weights.bytes), value: "0",
                                "aria-label": "Model download" });
  c.ownStatus = el("p", { class: "qx-own-status", "data-testid": "model-status" });
  c.cut = el("p", { class: "qx-note", "data-testid": "cut" });
  // polite: the download's milestones and errors, each said once (a result is announced by
  // the panel's summary, as any other state is)
  c.ownLive = el("p", { class: "qx-sr-only", "aria-live": "polite", "data-testid": "model-announce" });
  const note = el("p", { id: id("own-note"), class: "qx-note", text:
    "Up to " + index.max_tokens + " tokens; a longer text is cut. The model file (" + size + ") comes " +
    "from this site when you load it, once per visit, and the model runs in this page, not on a " +
    "server. A device that cannot spare the memory it needs gets a message here, and the built " +
    "sentences still work. Ctrl+Enter in the box runs the model." });
  c.own = el("div", { class: "qx-control qx-wide qx-own", "data-testid": "own" }, [
    el("div", { class: "qx-head" }, [el("label", { for: id("text"), text: "Your own text" })]),
    c.text,
    el("div", { class: "qx-own-actions" }, [c.load, c.run, c.progress, c.cancel]),
    c.ownStatus, c.cut, note, c.ownLive,
  ]);

  c.form = el("form", { class: "qx-controls qx-trained-controls", "aria-label": "Trained model controls" }, [
    el("div", { class: "qx-control qx-wide" }, [el("div", { class: "qx-head" }, [
      el("label", { for: id("sentence"), text: "Sentence" })]), c.sentence]),
    c.own,
    h.control(["Layer"], c.layer, c.layerOut),
    h.control(["Query head"], c.head, c.headOut),
    h.control(["Query token"], c.query),
    h.control(["Stage"], c.stage, c.stageOut, [c.ticks]),
    el("div", { class: "qx-control qx-check" }, [c.scale, scaleLabel]),
  ]);
  c.form.addEventListener("submit", (event) => event.preventDefault());
  return c;
}

function buildView(index) {
  const { el, maths } = h;
  const v = {};
  v.kvText = el("span", { "data-testid": "kv-head" });
  v.kvCells = [];
  for (let q = 1; q <= index.n_heads; q++) v.kvCells.push(el("span", { class: "qx-kvcell", text: String(q) }));
  const size = index.n_heads / index.n_kv_heads, groups = [];
  for (let g = 0; g < index.n_kv_heads; g++) {
    groups.push(el("span", { class: "qx-kvgroup" }, v.kvCells.slice(g * size, (g + 1) * size)));
  }
  v.facts = el("div", { class: "qx-facts" }, [
    el("p", { "data-testid": "model-name", text: index.model }),
    el("p", { "data-testid": "dk-fixed" }, [maths([["var", "d"], ["sub", "k"]]),
      " = " + index.d_head + ", fixed by the trained model (the head-dimension slider belongs to the toy)."]),
    el("p", { class: "qx-kv" }, [el("span", { class: "qx-kvgroups", "aria-hidden": "true" }, groups), v.kvText]),
  ]);
  v.entropy = el("span", { class: "qx-number", "data-testid": "entropy" });
  v.evenNote = el("span", { class: "qx-note" });
  v.maxWeight = el("span", { class: "qx-number", "data-testid": "max-weight" });
  v.maxKey = el("span", { class: "qx-note" });
  v.readouts = el("dl", { class: "qx-readouts" }, [
    el("div", {}, [el("dt", { text: "Entropy of the weights" }), el("dd", {}, [v.entropy, " nats ", v.evenNote])]),
    el("div", {}, [el("dt", { text: "Largest weight" }), el("dd", {}, [v.maxWeight, " ", v.maxKey])]),
  ]);
  v.status = el("p", { class: "qx-t-status", role: "status" }); // the settled summary, spoken
  v.formula = el("p", { class: "qx-formula" });
  v.caption = el("figcaption", { class: "qx-caption" });
  v.axisLow = el("span");
  v.axisHigh = el("span");
  v.axis = el("div", { class: "qx-axis", "aria-hidden": "true" }, [
    el("span", { class: "qx-axis-track" }, [v.axisLow, el("span", { class: "qx-axis-zero", text: "0" }), v.axisHigh])]);
  v.list = el("ul", { class: "qx-bars" });
  v.message = el("p", { class: "qx-note", "data-testid": "loading" });
  v.figure = el("figure", { class: "qx-figure" }, [v.caption, v.axis, v.list]);
  return v;
}

/* ---- drawing a state ----------------------------------------------------------------------- */

/* The parts that do not need the numbers: labels, outputs, the group of heads. */
function drawControls(c, v, index, s) {
  c.layerOut.textContent = s.layer + " of " + index.n_layers;
  c.headOut.textContent = s.head + " of " + index.n_heads;
  c.stage.setAttribute("aria-valuetext", s.stage + ": " + STAGES[s.stage - 1]);
  c.stageOut.textContent = s.stage + " \u00B7 " + STAGES[s.stage - 1];
  Array.from(c.ticks.children).forEach((li, i) => li.classList.toggle("qx-on", i === s.stage - 1));
  const group = kvGroup(index, s.head);
  v.kvText.textContent = "Query head " + s.head + " reads key/value head " + group.kv + " of " +
    index.n_kv_heads + ", shared by query heads " + listText(group.heads) + ".";
  v.kvCells.forEach((cell, i) => {
    cell.classList.toggle("qx-kvsame", group.heads.includes(i + 1));
    cell.classList.toggle("qx-on", i + 1 === s.head);
  });
}

function formula(s, root) {
  const sj = [["var", "s"], ["sub", "j"]], sjp = [["var", "s\u2032"], ["sub", "j"]];
  if (s.stage === 1) return [...sj, " = ", ["var", "q"], " \u00B7 ", ["var", "k"], ["sub", "j"],
                             "   (64 numbers each; keys 1 to " + s.query + " only: causal)"];
  if (s.stage === 2) {
    if (!s.scale) return [...sjp, " = ", ...sj, "   (scaling off: divided by 1)"];
    return [...sjp, " = ", ...sj, " / \u221A64 = ", ...sj, " / " + root];
  }
  return [["var", "w"], ["sub", "j"], " = exp(", ...sjp, ") / \u03A3", ["sub", "i\u2264" + s.query],
          " exp(", sjp[0], ["sub", "i"], ")"];
}

/* No numbers to show (the reader's text has not run yet): say why instead of stale bars. */
function drawNothing(v, text) {
  v.entropy.textContent = v.maxWeight.textContent = "\u2014";
  v.maxKey.textContent = v.evenNote.textContent = "";
  h.replaceChildren(v.formula, []);
  v.caption.textContent = text;
  v.axis.hidden = true;
  h.replaceChildren(v.list, []);
  v.summary = "";
}

/* Every number is rounded once, here (h.fmt), from the source's value: unrounded for the
   reader's text, or stored already rounded to exactly these decimals for a built sentence. */
function drawNumbers(panel, v, index, s, src) {
  const { el, fmt } = h;
  const st = numbers(src, s), labels = src.labels;
  const shown = [st.raw, st.scaled, st.weights][s.stage - 1];
  const isScore = s.stage <= 2;
  const digits = isScore ? index.score_decimals : index.weight_decimals;
  const axisMax = !isScore ? 1 : s.stage === 2 && s.scale ? h.niceCeiling(st.rawMax / st.root) : st.rawMax;
  const topLabel = labels[st.top];

  v.entropy.textContent = fmt(st.entropy, index.weight_decimals);
  v.evenNote.textContent = s.query === 1 ? "(the first token has one key only: its weight is 1)"
    : "(0 is all weight on one key; an even spread over " + s.query + " keys is ln " + s.query + ")";
  v.maxWeight.textContent = fmt(st.maxWeight, index.weight_decimals);
  v.maxKey.textContent = "on \u201C" + topLabel + "\u201D (position " + (st.top + 1) + ")";
  h.replaceChildren(v.formula, [h.maths(formula(s, st.root))]);

  const what = ["raw scores q \u00B7 k", "scores after scaling", "softmax weights"][s.stage - 1];
  v.caption.textContent = "Keys 1 to " + s.query + " for the query \u201C" + labels[s.query - 1] +
    "\u201D (position " + s.query + "), layer " + s.layer + ", head " + s.head + ": " + what +
    " (scaling " + (s.scale ? "on" : "off") + ")";
  v.axis.hidden = false;
  v.axisLow.textContent = isScore ? fmt(-axisMax, 0) : "";
  v.axisHigh.textContent = String(axisMax);
  panel.classList.toggle("qx-signed", isScore);

  h.replaceChildren(v.list, shown.map((x, j) => {
    const text = fmt(x, digits), frac = Math.min(1, Math.abs(x) / axisMax);
    const fill = el("span", { class: "qx-fill" });
    fill.style.left = (isScore ? (x < 0 ? 50 - 50 * frac : 50) : 0) + "%";
    fill.style.width = (isScore ? 50 : 100) * frac + "%";
    return el("li", {
      class: "qx-row" + (x < 0 ? " qx-neg" : "") + (j === st.top && !isScore ? " qx-top" : ""),
      "data-testid": "bar", "data-pos": String(j + 1), "data-key": labels[j],
      "data-value": text.replace("\u2212", "-"),
    }, [
      el("span", { class: "qx-key" }, [el("span", { class: "qx-pos", text: String(j + 1) }), labels[j]]),
      el("span", { class: "qx-track", "aria-hidden": "true" }, [el("span", { class: "qx-zero" }), fill]),
      el("span", { class: "qx-num", text: text }),
    ]);
  }));
  v.summary = "Layer " + s.layer + ", head " + s.head + ", query \u201C" + labels[s.query - 1] +
    "\u201D: largest weight " + v.maxWeight.textContent + " on \u201C" + topLabel +
    "\u201D, entropy " + v.entropy.textContent + " nats.";
}

/* ---- the panel: controls, state, the built sentences and the reader's text ---------------- */

export function startTrained(root, panel, helpers) {
  h = helpers;
  const indexUrl = new URL(root.getAttribute("data-trained-src") || "smollm2/index.json",
                           window.location.href).href;
  return h.fetchJson(indexUrl).then((index) => {
    if (panel.isConnected) buildTrained(panel, index, indexUrl);
  });
}

function buildTrained(panel, index, indexUrl) {
  const c = buildControls(index), v = buildView(index);
  h.replaceChildren(panel, [c.form, v.facts, v.readouts, v.status, v.formula, v.message, v.figure]);
  panel.classList.add("qx-trained");
  const initial = readUrl(index);
  // the reader's experiment (lab.js, imported when the reader's own text is first shown):
  // its state from the address, its controls and methods once loaded
  const lab = initial.lab;
  let labLoading = null;
  function needLab() {
    labLoading = labLoading || import("./lab.js").then((m) => {
      if (!panel.isConnected) return;
      m.buildLab(h, index, lab, {
        panel: panel, writeUrlSoon: () => writeUrlSoon(), own: () => own,
        send: (message) => { message.id = model.nextRun++; modelSend(message); return message.id; },
        post: (message) => modelSend(message), // a message that keeps its own id (a cancel)
        worker: () => model.worker, product: () => model.product, // for the patching pool (model/pool.js)
        selectHead: (L, H) => {
          c.layer.value = L;
          c.head.value = H;
          onChange();
        },
        selected: () => [Number(c.layer.value), Number(c.head.value), Number(c.query.value)],
        screen: () => { // what the bars show, for the export
          const s = fromControls(), st = numbers(own.source, s);
          return { s: s, values: [st.raw, st.scaled, st.weights][s.stage - 1], stageName: STAGES[s.stage - 1],
                   digits: s.stage <= 2 ? index.score_decimals : index.weight_decimals, caption: v.caption.textContent };
        },
      });
      panel.appendChild(lab.root);
      // head cards: one head's probe scores and effects, wherever a head is chosen in the lab
      import("./headcards.js").then((cards) => cards.installHeadCards(h, lab, new URL("probes.json", indexUrl).href));
      showLab(fromControls());
      writeUrlSoon();
    });
    return labLoading;
  }

  // the reader's text: the run on screen, the text it ran on, and the query asked for
  const own = { result: null, source: null, text: null, query: 0, runId: 0, announce: "" };
  let urlTimer = null, statusTimer = null, shown = "", filled = null, milestone = 0;

  const labelsOf = (n) => n !== OWN ? index.sentences[n - 1].labels : own.result ? own.result.labels : [];
  function fillQueries(labels, chosen) {
    h.replaceChildren(c.query, labels.map((text, i) => h.el("option", { value: String(i + 1), text: (i + 1) + " \u00B7 " + text })));
    if (!labels.length) c.query.appendChild(h.el("option", { value: "0", text: "(run the model first)" }));
    c.query.value = String(labels.length ? Math.min(chosen || labels.length, labels.length) : 0);
  }
  function fromControls() {
    return { sentence: c.sentence.value === OWN ? OWN : Number(c.sentence.value), layer: Number(c.layer.value),
             head: Number(c.head.value), query: Number(c.query.value), stage: Number(c.stage.value),
             scale: c.scale.checked ? 1 : 0 };
  }
  function draw(s, key, src) {
    drawNumbers(panel, v, index, s, src);
    panel.setAttribute("data-drawn", key); // the state on screen, for tests and styles
    if (s.sentence === OWN && own.announce) { // a new run: said once, with its first summary
      v.summary = own.announce + " " + v.summary;
      own.announce = "";
    }
  }
  function showLab(s) { // the experiment, under the bars of the reader's own text
    if (!lab.root) return;
    lab.root.hidden = !(s.sentence === OWN && own.result && lab.run);
    if (!lab.root.hidden) {
      lab.drawMap();
      lab.drawPairMap();
    }
  }
  function show() {
    const s = fromControls(), key = [s.sentence, s.layer, s.head, s.query, s.stage, s.scale].join();
    if (key === shown) return;
    shown = key;
    c.own.hidden = s.sentence !== OWN;
    if (s.sentence === OWN) needLab();
    showLab(s);
    drawControls(c, v, index, s);
    v.message.textContent = "";
    if (s.sentence === OWN) {
      panel.removeAttribute("data-drawn");
      if (own.source && s.query) draw(s, key, own.source);
      else drawNothing(v, model.status === "loaded" ? "Type a text and run the model to see its attention."
                                                    : "Load the model to run it on your text.");
    } else {
      const item = index.sentences[s.sentence - 1];
      const file = new URL(item.files[Math.floor((s.layer - 1) / index.layers_per_file)], indexUrl).href;
      h.fetchJson(file).then((chunk) => {
        // draw only if this is still the state on screen (a slower fetch may finish late)
        if (panel.isConnected && shown === key) draw(s, key, builtSource(chunk, item.labels, index));
      }).catch((error) => {
        if (panel.isConnected && shown === key) {
          v.message.textContent = "This sentence's numbers could not be loaded (" + error.message +
                                  "). Choose it again to retry.";
          shown = "";
        }
      });
    }
    clearTimeout(statusTimer);
    statusTimer = setTimeout(() => {
      if (panel.isConnected && v.summary && v.status.textContent !== v.summary) v.status.textContent = v.summary;
    }, ANNOUNCE_MS);
  }
  function writeUrlSoon() {
    clearTimeout(urlTimer);
    urlTimer = setTimeout(() => { if (panel.isConnected) writeUrl(fromControls(), own.text, lab); }, URL_DELAY_MS);
  }
  function onChange(event) {
    if (event && c.own.contains(event.target)) return; // typing in the box is not a state change
    const n = c.sentence.value === OWN ? OWN : Number(c.sentence.value);
    if (n !== filled) { // another sentence has other tokens
      filled = n;
      fillQueries(labelsOf(n), Number(c.query.value) || (n === OWN ? own.query : 0));
    }
    show();
    writeUrlSoon();
  }
  c.form.addEventListener("input", onChange);
  c.form.addEventListener("change", onChange);

  /* -- the reader's own text -- */

  function refreshButtons() {
    c.load.hidden = model.status !== "idle";
    c.cancel.hidden = c.progress.hidden = model.status !== "loading";
    c.run.hidden = model.status !== "loaded";
  }
  const say = (text) => { c.ownLive.textContent = text; };
  function runText() {
    own.text = cutText(c.text.value);
    own.runId = model.nextRun++;
    c.ownStatus.textContent = "Running the model\u2026";
    say("Running the model on your text.");
    modelSend({ type: "run", id: own.runId, text: own.text, maxTokens: index.max_tokens });
    writeUrlSoon();
  }
  function onResult(msg) {
    own.result = msg;
    own.source = ownSource(msg);
    const cut = msg.total > msg.ids.length;
    c.cut.textContent = cut ? "Your text has " + msg.total + " tokens; the model ran on the first " +
      msg.ids.length + ", up to \u201C" + msg.labels[msg.labels.length - 1] + "\u201D." : "";
    c.ownStatus.textContent = "Ran on " + msg.ids.length + " tokens in " + msg.seconds.toFixed(1) + " s.";
    own.announce = "The model ran on your text, " + msg.ids.length + " tokens" + (cut ? " (cut)" : "") + ".";
    if (c.sentence.value === OWN) { // (the reader may have gone back to a built sentence)
      filled = OWN;
      fillQueries(msg.labels, own.query);
      shown = "";
      show();
      writeUrlSoon();
    }
    own.query = 0; // a later run starts at its last token
    needLab().then(() => {
      if (!panel.isConnected || own.result !== msg) return;
      lab.setRun(msg);
      lab.sendEdit();
      lab.sendPair();
      lab.sendLens();
      showLab(fromControls());
    });
  }
  model.listener = (msg) => {
    if (!panel.isConnected) return;
    if (msg.type === "progress") {
      c.progress.value = msg.received;
      c.ownStatus.textContent = "Downloading the model: " + (msg.received / 1e6).toFixed(1) + " of " +
        (index.weights.bytes / 1e6).toFixed(1) + " MB";
      const quarter = Math.floor(4 * msg.received / index.weights.bytes);
      if (quarter > milestone && quarter < 4) { milestone = quarter; say(25 * quarter + " percent downloaded."); }
    } else if (msg.type === "loaded") {
      refreshButtons();
      c.ownStatus.textContent = "Model loaded.";
      say("Model loaded.");
      if ([c.load, c.cancel, document.body].includes(document.activeElement)) c.run.focus();
      if (own.text && !own.result) runText(); // an address with text= runs as soon as it can
      else { shown = ""; show(); }
    } else if (msg.type === "layer" && msg.id === own.runId) {
      c.ownStatus.textContent = "Running the model: layer " + msg.layer + " of " + msg.of;
    } else if (msg.type === "result" && msg.id === own.runId) {
      onResult(msg);
    } else if (lab.onMessage && lab.onMessage(msg)) { // the experiment's replies
      return;
    } else if (msg.type === "error" && (msg.id === undefined || msg.id === own.runId)) {
      refreshButtons();
      c.ownStatus.textContent = msg.message;
      say(msg.message);
      milestone = 0;
      if (msg.id === undefined && [c.cancel, document.body].includes(document.activeElement)) c.load.focus();
    }
  };
  c.load.addEventListener("click", () => {
    model.status = "loading";
    milestone = 0;
    c.progress.value = 0;
    refreshButtons();
    c.cancel.focus();
    c.ownStatus.textContent = "Downloading the model\u2026";
    say("Downloading the model, " + megabytes(index.weights.bytes) + ".");
    if (c.text.value) own.text = cutText(c.text.value);
    modelSend({ type: "load", url: new URL(index.weights.file, indexUrl).href, bytes: index.weights.bytes });
  });
  c.cancel.addEventListener("click", () => modelSend({ type: "cancel" }));
  c.run.addEventListener("click", runText);
  c.text.addEventListener("keydown", (event) => {
    if (event.key !== "Enter" || !(event.ctrlKey || event.metaKey)) return;
    event.preventDefault();
    if (model.status === "loaded") runText();
    else if (model.status === "idle") c.load.click();
  });

  c.sentence.value = String(initial.sentence);
  filled = initial.sentence;
  c.text.value = initial.sentence === OWN ? initial.text : index.sentences[0].text;
  if (initial.sentence === OWN) {
    own.text = initial.text;
    own.query = initial.query;
  }
  fillQueries(labelsOf(initial.sentence), initial.query);
  c.layer.value = initial.layer;
  c.head.value = initial.head;
  c.stage.value = initial.stage;
  c.scale.checked = initial.scale === 1;
  refreshButtons();
  show();
  writeUrl(fromControls(), own.text, lab); // the canonical state: clamped or defaulted values are visible
  if (initial.sentence === OWN && model.status === "loaded" && initial.text) runText();
}
