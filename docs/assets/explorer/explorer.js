/* qkv attention explorer.
 *
 * Renders numbers that qkv computed while the site was built (explorer/data.json.gz, made by
 * qkv_site.explorer_data from qkv.explorer; the trained mode's files from qkv.smollm2) and,
 * for a text the reader types, numbers that the trained model computes in this page: a Web
 * Worker (model/worker.js) runs model/smollm2.js, a JavaScript mirror of qkv/smollm2.py,
 * on the model file this site serves. This script itself does no attention maths: it
 * looks a state up, rounds it once to the decimals shown, and draws bars. It starts on
 * every page Material shows, including pages reached by instant navigation (document$),
 * and does nothing where there is no #qkv-explorer element.
 *
 * State lives in the URL query: ?stage=1..4&query=WORD&dk=1..64&scale=1|0 for the toy, and
 * ?model=smollm2&sentence=..(or text=..)&layer=..&head=..&query=..&stage=..&scale=.. for
 * the trained model (see "trained mode" below). Values read from the URL are validated
 * against the data and only ever written as text, never HTML.
 */
(function () {
  "use strict";

  var ROOT_ID = "qkv-explorer";
  var URL_DELAY_MS = 100; // the address bar follows the controls this long after they settle
  // Screen readers hear a one-sentence summary once the controls have been still this long:
  // holding an arrow key on a slider changes the state ~30 times a second, and a live
  // region that spoke each of them would drown the reader in numbers.
  var ANNOUNCE_DELAY_MS = 700;
  var cache = {}; // data URL -> Promise of the parsed data, fetched once per visit

  /* ---- small DOM helpers: every text goes in as textContent ------------------------ */

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (name) {
      if (name === "text") node.textContent = attrs.text;
      else node.setAttribute(name, attrs[name]);
    });
    (children || []).forEach(function (child) {
      node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    });
    return node;
  }

  /* Maths as nested arrays: "text", ["sub", ...], ["sup", ...], ["var", ...]. */
  function maths(parts) {
    var span = el("span", { class: "qx-math" });
    parts.forEach(function (part) {
      if (typeof part === "string") span.appendChild(document.createTextNode(part));
      else span.appendChild(el(part[0], {}, [maths(part.slice(1))]));
    });
    return span;
  }

  function replaceChildren(node, children) {
    while (node.firstChild) node.removeChild(node.firstChild);
    children.forEach(function (child) { node.appendChild(child); });
  }

  /* ---- numbers ------------------------------------------------------------------- */

  function reader(data) {
    var unit = Math.pow(10, data.decimals); // the JSON holds integer millionths
    function num(x) { return x / unit; }
    return function state(s) {
      var q = data.words.indexOf(s.query), d = s.dk - 1, sc = s.scale;
      var raw = data.raw[q][d].map(num);
      var weights = data.weights[sc][q][d].map(num);
      return {
        raw: raw,
        scaled: sc ? data.scaled[q][d].map(num) : raw, // scaling off: divided by 1
        weights: weights,
        entropy: num(data.entropy[sc][q][d]),
        maxWeight: num(data.max_weight[sc][q][d]),
        output: data.output[sc][q][d].map(num),
        values: data.values.map(function (row) { return row.map(num); }),
      };
    };
  }

  function fmt(x, digits) {
    var text = Math.abs(x).toFixed(digits);
    var zero = Number(text) === 0;
    return (x < 0 && !zero ? "\u2212" : "") + text; // a true minus sign, never "-0.0000"
  }

  function maxAbs(nested) {
    return Array.isArray(nested) ? nested.reduce(function (m, x) { return Math.max(m, maxAbs(x)); }, 0)
                                 : Math.abs(nested);
  }

  /* The smallest of 1, 2, 2.5, 5 times a power of ten that is at least x: an axis end. */
  function niceCeiling(x) {
    var power = Math.pow(10, Math.floor(Math.log10(x)));
    var steps = [1, 2, 2.5, 5, 10];
    for (var i = 0; i < steps.length; i++) if (steps[i] * power >= x) return steps[i] * power;
    return 10 * power;
  }

  /* ---- URL state ----------------------------------------------------------------- */

  function intIn(text, lo, hi, fallback) {
    if (text === null || !/^\s*[+-]?\d+(\.\d*)?\s*$/.test(text)) return fallback;
    return Math.min(hi, Math.max(lo, Math.round(Number(text))));
  }

  function readUrl(data) {
    var p = new URLSearchParams(window.location.search), d = data.defaults;
    var query = (p.get("query") || "").trim().toLowerCase();
    var scale = p.get("scale");
    return {
      stage: intIn(p.get("stage"), 1, 4, d.stage),
      query: data.words.indexOf(query) >= 0 ? query : d.query,
      dk: intIn(p.get("dk"), 1, data.d_k_max, d.dk),
      scale: scale === "1" ? 1 : scale === "0" ? 0 : d.scale,
    };
  }

  function writeUrl(s) {
    var p = new URLSearchParams(window.location.search);
    p.set("stage", s.stage);
    p.set("query", s.query);
    p.set("dk", s.dk);
    p.set("scale", s.scale);
    // Keep a hash only if it names something on this page: after instant navigation,
    // Material's scroll tracking can leave the previous page's section in the URL.
    var hash = window.location.hash, target = null;
    try { target = hash && document.getElementById(decodeURIComponent(hash.slice(1))); } catch (e) { /* bad escape */ }
    var url = window.location.pathname + "?" + p.toString() + (target ? hash : "");
    // Keep Material's history state: instant navigation stores scroll positions there.
    window.history.replaceState(window.history.state, "", url);
  }

  /* ---- building the widget (once per page view) ----------------------------------- */

  var STAGE_NAMES = ["raw scores", "scaled scores", "softmax weights", "output"];

  /* A labelled control: the label and its current value on one line, the input below. */
  function control(labelParts, input, valueOut, below) {
    var label = el("label", { for: input.id }, labelParts);
    var head = el("div", { class: "qx-head" }, valueOut ? [label, valueOut] : [label]);
    return el("div", { class: "qx-control" }, [head, input].concat(below || []));
  }

  function build(root, data) {
    var ids = function (name) { return ROOT_ID + "-" + name; };

    var stage = el("input", { id: ids("stage"), type: "range", min: "1", max: "4", step: "1",
                              "data-testid": "stage" });
    var stageOut = el("output", { for: ids("stage"), class: "qx-value" });
    var ticks = el("ol", { class: "qx-ticks", "aria-hidden": "true" },
                   STAGE_NAMES.map(function (name, i) { return el("li", { text: (i + 1) + " " + name }); }));

    var query = el("select", { id: ids("query"), "data-testid": "query" },
                   data.words.map(function (w) { return el("option", { value: w, text: w }); }));

    var dk = el("input", { id: ids("dk"), type: "range", min: "1", max: String(data.d_k_max),
                           step: "1", "data-testid": "dk" });
    var dkOut = el("output", { for: ids("dk"), class: "qx-value" });

    var scale = el("input", { id: ids("scale"), type: "checkbox", "data-testid": "scale" });
    var scaleLabel = el("label", { for: ids("scale") }, [
      "Scale by 1/", maths(["\u221A", ["var", "d"], ["sub", "k"]])]);

    var form = el("form", { class: "qx-controls", "aria-label": "Explorer controls" }, [
      control(["Stage"], stage, stageOut, [ticks]),
      control(["Query word"], query),
      control(["Head dimension ", maths([["var", "d"], ["sub", "k"]])], dk, dkOut),
      el("div", { class: "qx-control qx-check" }, [scale, scaleLabel]),
    ]);
    form.addEventListener("submit", function (event) { event.preventDefault(); });

    var entropy = el("span", { class: "qx-number", "data-testid": "entropy" });
    var maxWeight = el("span", { class: "qx-number", "data-testid": "max-weight" });
    var maxKey = el("span", { class: "qx-note" });
    var evenText = "of at most " + fmt(data.entropy_even / Math.pow(10, data.decimals), 4) +
                   " (an even spread over " + data.words.length + " keys)";
    var readouts = el("dl", { class: "qx-readouts" }, [
      el("div", {}, [el("dt", { text: "Entropy of the weights" }),
                     el("dd", {}, [entropy, " nats ", el("span", { class: "qx-note", text: evenText })])]),
      el("div", {}, [el("dt", { text: "Largest weight" }), el("dd", {}, [maxWeight, " ", maxKey])]),
    ]);

    var formula = el("p", { class: "qx-formula" });
    var shapes = el("p", { class: "qx-shapes" });
    var explain = el("div", { class: "qx-explain" }, [formula, shapes]);

    var caption = el("figcaption", { class: "qx-caption" });
    var axisLow = el("span"), axisHigh = el("span");
    var axis = el("div", { class: "qx-axis", "aria-hidden": "true" }, [
      el("span", { class: "qx-axis-track" }, [axisLow, el("span", { class: "qx-axis-zero", text: "0" }), axisHigh])]);
    var rows = data.words.map(function (word) {
      var fill = el("span", { class: "qx-fill" });
      var track = el("span", { class: "qx-track", "aria-hidden": "true" },
                     [el("span", { class: "qx-zero" }), fill]);
      var number = el("span", { class: "qx-num" });
      var vector = el("span", { class: "qx-vec" });
      var li = el("li", { class: "qx-row", "data-testid": "bar", "data-key": word }, [
        el("span", { class: "qx-key", text: word }), track, number, vector]);
      return { li: li, fill: fill, number: number, vector: vector };
    });
    var list = el("ul", { class: "qx-bars" }, rows.map(function (r) { return r.li; }));
    var figure = el("figure", { class: "qx-figure" }, [caption, axis, list]);

    var outCells = el("span", { class: "qx-outcells" });
    var output = el("div", { class: "qx-output", "data-testid": "output" }, [
      el("span", { class: "qx-outlabel" }, [maths(["output = \u03A3", ["sub", "j"], " ", ["var", "w"],
                                                   ["sub", "j"], " ", ["var", "v"], ["sub", "j"]]), " = "]),
      outCells,
    ]);

    // The only live region: a summary sentence, written after the controls settle.
    var status = el("p", { class: "qx-sr-only", role: "status", "data-testid": "announce" });

    replaceChildren(root, [form, readouts, explain, figure, output, status]);
    root.classList.add("qx-ready");

    var state = reader(data);
    // Raw scores share one axis over every query and d_k, so they visibly grow with d_k.
    // Scaled scores get their own (their range is about 8 times smaller); the axis ends
    // are labelled, so the switch is visible.
    var rawMax = niceCeiling(maxAbs(data.raw) / Math.pow(10, data.decimals));
    var scaledMax = niceCeiling(maxAbs(data.scaled) / Math.pow(10, data.decimals));
    // An output is a weighted average of the values, so it never leaves their range.
    var valueMax = maxAbs(data.values) / Math.pow(10, data.decimals);

    var ui = { root: root, stage: stage, stageOut: stageOut, ticks: ticks, query: query, dk: dk,
               dkOut: dkOut, scale: scale, entropy: entropy, maxWeight: maxWeight, maxKey: maxKey,
               formula: formula, shapes: shapes, caption: caption, axisLow: axisLow,
               axisHigh: axisHigh, rows: rows,
               output: output, outCells: outCells, words: data.words, dv: data.d_v,
               rawMax: rawMax, scaledMax: scaledMax, valueMax: valueMax, state: state };

    function fromControls() {
      return { stage: Number(stage.value), query: query.value, dk: Number(dk.value),
               scale: scale.checked ? 1 : 0 };
    }
    // Render at once; write the URL a moment after the last change. history.replaceState
    // is a synchronous call into the browser that costs more than the whole render (and
    // Chromium ignores it after a few hundred calls in ten seconds, which a slider drag
    // reaches), so it runs after the frame that shows the change.
    var urlTimer = null, announceTimer = null, shown = "";
    function show() {
      var s = fromControls(), key = [s.stage, s.query, s.dk, s.scale].join();
      if (key !== shown) render(ui, s); // a select fires input and change: draw once
      shown = key;
    }
    function flushUrl() {
      urlTimer = null;
      // instant navigation may have replaced this page meanwhile: then the URL is not ours
      if (root.isConnected) writeUrl(fromControls());
    }
    function announce() {
      announceTimer = null;
      if (root.isConnected) status.textContent = summary(ui, fromControls());
    }
    function onChange() {
      show();
      clearTimeout(urlTimer);
      urlTimer = setTimeout(flushUrl, URL_DELAY_MS);
      clearTimeout(announceTimer);
      announceTimer = setTimeout(announce, ANNOUNCE_DELAY_MS);
    }
    form.addEventListener("input", onChange);
    form.addEventListener("change", onChange);

    var initial = readUrl(data);
    stage.value = initial.stage;
    query.value = initial.query;
    dk.value = initial.dk;
    scale.checked = initial.scale === 1;
    show();
    writeUrl(initial); // show the canonical state: clamped or defaulted values are visible
  }

  /* ---- what a screen reader hears once the controls settle -------------------------- */

  function summary(ui, s) {
    var st = ui.state(s);
    var top = st.weights.indexOf(Math.max.apply(null, st.weights));
    return "Stage " + s.stage + ", " + STAGE_NAMES[s.stage - 1] + ", for the query \u201C" +
           s.query + "\u201D at d_k " + s.dk + ", scaling " + (s.scale ? "on" : "off") +
           ". Largest weight " + st.maxWeight.toFixed(2) + " on \u201C" + ui.words[top] +
           "\u201D; entropy " + st.entropy.toFixed(2) + " nats.";
  }

  /* ---- rendering a state (every control change) ----------------------------------- */

  function formulaParts(s) {
    var sj = [["var", "s"], ["sub", "j"]], sjp = [["var", "s\u2032"], ["sub", "j"]];
    var root = Math.sqrt(s.dk);
    var rootText = Number.isInteger(root) ? String(root) : root.toFixed(3);
    if (s.stage === 1) return [sj[0], sj[1], " = ", ["var", "q"], " \u00B7 ", ["var", "k"], ["sub", "j"]];
    if (s.stage === 2) {
      if (!s.scale) return [sjp[0], sjp[1], " = ", sj[0], sj[1], "   (scaling off: divided by 1)"];
      return [sjp[0], sjp[1], " = ", sj[0], sj[1], " / \u221A", ["var", "d"], ["sub", "k"],
              " = ", sj[0], sj[1], " / \u221A" + s.dk + " = ", sj[0], sj[1], " / " + rootText];
    }
    if (s.stage === 3) {
      return [["var", "w"], ["sub", "j"], " = exp(", sjp[0], sjp[1], ") / \u03A3", ["sub", "i"],
              " exp(", sjp[0], ["sub", "i"], ")"];
    }
    return ["output = \u03A3", ["sub", "j"], " ", ["var", "w"], ["sub", "j"], " ",
            ["var", "v"], ["sub", "j"]];
  }

  function shapeText(s, T, dv) {
    var d = s.dk;
    if (s.stage === 1) {
      return "q (1 \u00D7 " + d + ") \u00B7 K\u1D40 (" + d + " \u00D7 " + T + ") \u2192 scores (1 \u00D7 " + T +
             "). All six queries at once: Q (" + T + " \u00D7 " + d + ") \u00B7 K\u1D40 \u2192 " + T + " \u00D7 " + T + ".";
    }
    if (s.stage === 2) {
      return "scores (1 \u00D7 " + T + ") \u00D7 " + (s.scale ? "1/\u221A" + d : "1") +
             " \u2192 scaled scores (1 \u00D7 " + T + "); the order of the keys does not change.";
    }
    if (s.stage === 3) {
      return "softmax over the " + T + " keys: (1 \u00D7 " + T + ") \u2192 weights (1 \u00D7 " + T +
             "), each between 0 and 1, summing to 1.";
    }
    return "weights (1 \u00D7 " + T + ") \u00B7 V (" + T + " \u00D7 " + dv + ") \u2192 output (1 \u00D7 " + dv +
           "). d_k only shapes the weights; the values have d_v = " + dv + ".";
  }

  function render(ui, s) {
    var st = ui.state(s), T = ui.words.length;
    var shown = [st.raw, st.scaled, st.weights, st.weights][s.stage - 1];
    var isScore = s.stage <= 2;
    var axisMax = !isScore ? 1 : s.stage === 2 && s.scale ? ui.scaledMax : ui.rawMax;

    ui.stage.setAttribute("aria-valuetext", s.stage + ": " + STAGE_NAMES[s.stage - 1]);
    ui.stageOut.textContent = s.stage + " \u00B7 " + STAGE_NAMES[s.stage - 1];
    Array.prototype.forEach.call(ui.ticks.children, function (li, i) {
      li.classList.toggle("qx-on", i === s.stage - 1);
    });
    ui.dkOut.textContent = String(s.dk);

    ui.entropy.textContent = st.entropy.toFixed(4);
    ui.maxWeight.textContent = st.maxWeight.toFixed(4);
    var top = st.weights.indexOf(Math.max.apply(null, st.weights));
    ui.maxKey.textContent = "on \u201C" + ui.words[top] + "\u201D";

    replaceChildren(ui.formula, [maths(formulaParts(s))]);
    ui.shapes.textContent = "Shapes: " + shapeText(s, T, ui.dv);

    var what = ["raw scores q \u00B7 k", "scores after scaling", "softmax weights",
                "weights that blend the values"][s.stage - 1];
    ui.caption.textContent = "Keys for the query \u201C" + s.query + "\u201D: " + what +
                             " (d_k = " + s.dk + ", scaling " + (s.scale ? "on" : "off") + ")";
    ui.axisLow.textContent = isScore ? fmt(-axisMax, 0) : "";
    ui.axisHigh.textContent = String(axisMax);
    ui.root.classList.toggle("qx-signed", isScore);
    ui.root.setAttribute("data-stage", String(s.stage));

    ui.rows.forEach(function (row, j) {
      var x = shown[j];
      row.li.setAttribute("data-value", String(x));
      row.li.classList.toggle("qx-neg", x < 0);
      row.li.classList.toggle("qx-top", j === top && !isScore);
      var frac = Math.min(1, Math.abs(x) / axisMax);
      if (isScore) { // zero in the middle: positive bars grow right, negative left
        row.fill.style.left = (x < 0 ? 50 - 50 * frac : 50) + "%";
        row.fill.style.width = 50 * frac + "%";
      } else {
        row.fill.style.left = "0%";
        row.fill.style.width = 100 * frac + "%";
      }
      row.number.textContent = fmt(x, 4);
      row.vector.textContent = s.stage === 4 ? "v = [" + st.values[j].map(function (v) {
        return fmt(v, 2);
      }).join(", ") + "]" : "";
    });

    ui.output.hidden = s.stage !== 4;
    ui.output.setAttribute("data-value", st.output.join(","));
    replaceChildren(ui.outCells, st.output.map(function (v) {
      var size = Math.min(1, Math.abs(v) / ui.valueMax);
      var bar = el("span", { class: "qx-cellbar" + (v < 0 ? " qx-neg" : ""), "aria-hidden": "true" });
      bar.style.height = (50 * size) + "%"; // zero is the middle line of the box
      bar.style[v < 0 ? "top" : "bottom"] = "50%";
      return el("span", { class: "qx-cell" + (v < 0 ? " qx-neg" : "") }, [
        el("span", { class: "qx-cellbox", "aria-hidden": "true" }, [bar]),
        el("span", { class: "qx-celltext", text: fmt(v, 4) })]);
    }));
  }

  /* ==== data files ===================================================================== */

  /* Fetch JSON, inflating it first when the file is gzip (its first two bytes 1f 8b). A
     server that already decoded it (Content-Encoding: gzip) hands over plain JSON. */
  function fetchJson(url) {
    if (!cache[url]) {
      cache[url] = fetch(url).then(function (response) {
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.arrayBuffer();
      }).then(function (buffer) {
        var head = new Uint8Array(buffer, 0, Math.min(2, buffer.byteLength));
        if (head[0] === 0x1f && head[1] === 0x8b) {
          var stream = new Blob([buffer]).stream().pipeThrough(new DecompressionStream("gzip"));
          return new Response(stream).text();
        }
        return new TextDecoder().decode(buffer);
      }).then(JSON.parse);
      cache[url].catch(function () { delete cache[url]; });
    }
    return cache[url];
  }

  /* ==== trained mode: its own module (trained.js), imported when a reader opens it ====== */

  // This script's address: trained.js and the model's files sit beside it, wherever the site is.
  var SCRIPT_URL = document.currentScript ? document.currentScript.src : window.location.href;
  var HELPERS = { ROOT_ID: ROOT_ID, el: el, maths: maths, replaceChildren: replaceChildren, fmt: fmt,
                  maxAbs: maxAbs, niceCeiling: niceCeiling, intIn: intIn, control: control,
                  fetchJson: fetchJson };

  function startTrained(root, panel) {
    return import(new URL("trained.js", SCRIPT_URL).href).then(function (trained) {
      return trained.startTrained(root, panel, HELPERS);
    });
  }

  /* ==== modes: the toy and the trained model share one page ============================ */

  var MODES = [["toy", "Toy: six words, seeded random weights"],
               ["smollm2", "SmolLM2-135M-Instruct: a trained model"]];

  function modeFromUrl() {
    var model = (new URLSearchParams(window.location.search).get("model") || "").trim().toLowerCase();
    return model === "smollm2" ? "smollm2" : "toy";
  }

  /* The page's words marked data-qx-mode show with their mode only. */
  function showWords(mode) {
    Array.prototype.forEach.call(document.querySelectorAll("[data-qx-mode]"), function (node) {
      node.hidden = node.getAttribute("data-qx-mode") !== mode;
    });
  }

  function showMode(root, mode) {
    showWords(mode);
    var panel = el("div", { class: "qx-panel" });
    var old = root.querySelector(".qx-panel");
    if (old) root.replaceChild(panel, old); else root.appendChild(panel);
    root.classList.remove("qx-ready");
    var started = mode === "smollm2" ? startTrained(root, panel) : startToy(root, panel);
    started.then(function () {
      if (panel.isConnected) root.classList.add("qx-ready");
    }).catch(function (error) {
      if (panel.isConnected) {
        fail(panel, "The explorer could not load its numbers (" + error.message + "). " +
                    "Reload the page to try again.");
      }
    });
  }

  function modeSwitch(root, mode) {
    var select = el("select", { id: ROOT_ID + "-model", "data-testid": "model" },
                    MODES.map(function (m) { return el("option", { value: m[0], text: m[1] }); }));
    select.value = mode;
    select.addEventListener("change", function () {
      // each mode has its own URL keys: start the new one from its defaults
      var url = window.location.pathname + (select.value === "toy" ? "" : "?model=" + select.value);
      window.history.replaceState(window.history.state, "", url);
      showMode(root, select.value);
    });
    return el("div", { class: "qx-control qx-model" }, [
      el("label", { for: select.id, text: "Model" }), select]);
  }

  /* ---- start ------------------------------------------------------------------------- */

  function fail(root, message) {
    replaceChildren(root, [el("p", { class: "qx-error", role: "alert", text: message })]);
  }

  /* The toy: every state of the six-word example, one data file (explorer/data.json.gz). */
  function startToy(root, panel) {
    var url = new URL(root.getAttribute("data-src") || "data.json.gz", window.location.href).href;
    return fetchJson(url).then(function (data) {
      if (panel.isConnected) build(panel, data);
    });
  }

  function start() {
    var root = document.getElementById(ROOT_ID);
    if (!root || root.getAttribute("data-started")) return;
    root.setAttribute("data-started", "1");
    var mode = modeFromUrl();
    replaceChildren(root, [modeSwitch(root, mode)]);
    showMode(root, mode);
  }

  // Material publishes every page it shows, including instant navigation, on document$.
  if (window.document$ && typeof window.document$.subscribe === "function") {
    window.document$.subscribe(start);
  } else if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
