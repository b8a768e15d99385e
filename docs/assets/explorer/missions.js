/* Guided experiments in the explorer's lab (docs/explorer.md, "Guided experiments").
 *
 * A mission is an address that opens the lab in a stated state and adds mission=ID. lab.js
 * imports this module only for such an address (startMission), so no other visit loads it.
 * The box it adds asks the reader to predict first (the choice is kept in sessionStorage, per
 * mission), then, once the lab has run the mission's state, reads the measurement off the
 * lab's own output on screen (its data-value attributes, the numbers it shows) and shows it
 * beside the prediction, with the site's sentences on what it means (the mission's
 * .qx-mission-meaning in docs/things-to-try-in-depth.md, fetched from this site and copied as text).
 *
 * The lab tells when a run's part is on screen by the attributes it sets on the panel
 * (data-edited, data-lensed, data-paired, data-attributed); a MutationObserver watches them.
 */

const STORE = "qkv-mission:"; // + the mission's id: the reader's prediction, per tab

const REPEATED = "apple river seven cloud lamp tiger glass moon paper stone " +
                 "apple river seven cloud lamp tiger glass moon paper";
const PAIR_1 = "The trophy did not fit in the suitcase because the trophy was too";
const PAIR_2 = "The trophy did not fit in the suitcase because the suitcase was too";

/* What the lab shows: a prediction row's probability, a number's data-value. */
const value = (node) => (node ? Number(node.getAttribute("data-value")) : NaN);
const predicted = (root, list, token) =>
  root.querySelector("[data-testid='" + list + "'][data-token='" + CSS.escape(token) + "']");

function headsOffReading(root, panel, off) {
  if (panel.getAttribute("data-edited") !== off) return null;
  const before = predicted(root, "prediction", " stone"), after = predicted(root, "prediction-edited", " stone");
  const top = root.querySelector("[data-testid='prediction-edited'][data-rank='1']");
  if (!before || !top) return null;
  return {
    before: value(before), after: after ? value(after) : NaN, kl: value(root.querySelector("[data-testid='kl']")),
    top: top.getAttribute("data-token"), topLabel: top.querySelector(".qx-key").textContent,
  };
}
const quoted = (s) => "\u201C" + s + "\u201D";
const probText = (x) => (Number.isFinite(x) ? x.toFixed(4) : "below the ten shown");

export const MISSIONS = {
  induction: {
    title: "Switch off the induction head",
    state: { text: REPEATED, off: "19.7" },
    setup: "Ten words written twice, the second time without the last word, stone. " +
           "Layer 19 head 7, the strongest induction head the trained-model page finds, is switched off.",
    question: "With every head on, the model expects \u201Cstone\u201D next. With layer 19 head 7 off, " +
              "what happens to the probability of \u201Cstone\u201D?",
    options: { same: "It hardly moves (it keeps more than nine tenths)",
               some: "It falls, but keeps more than half", most: "It falls to less than half" },
    read(root, panel) {
      const r = headsOffReading(root, panel, "19.7");
      if (!r) return null;
      const ratio = r.after / r.before;
      return {
        // not among the ten shown: below the tenth token's probability, so it fell far
        value: r.after, answer: !Number.isFinite(ratio) ? "most" : ratio >= 0.9 ? "same" : ratio > 0.5 ? "some" : "most",
        text: "P(\u201C stone\u201D) " + probText(r.before) + " with every head on, " + probText(r.after) +
              " with layer 19 head 7 off; KL divergence " + r.kl.toFixed(4) + " nats.",
      };
    },
  },
  lens: {
    title: "Where does the capital appear?",
    state: { text: "The capital of France is" },
    setup: "The logit lens reads the stream after each of the 30 layers at the last token, is.",
    question: "From which layer on is \u201C Paris\u201D the lens's top guess?",
    options: { early: "Layers 1 to 10", middle: "Layers 11 to 20", late: "Layers 21 to 29",
               last: "Only at the last layer, 30" },
    read(root, panel, lab) { // the lens at the text's last position, every head on
      if (!lab.run || panel.getAttribute("data-lensed") !== lab.run.ids.length + ":") return null;
      const rows = Array.from(root.querySelectorAll("[data-testid='lens-row']"));
      if (!rows.length) return null;
      let from = rows.length - 1; // the first layer from which the final token stays on top
      while (from > 0 && rows[from - 1].getAttribute("data-final-rank") === "1") from--;
      const final = rows[rows.length - 1], at = rows[from];
      const layer = Number(at.getAttribute("data-layer"));
      const token = final.getAttribute("data-token"), label = final.querySelector(".qx-key").textContent;
      const before = from > 0 ? rows[from - 1] : null;
      return {
        value: layer, token: token,
        answer: layer <= 10 ? "early" : layer <= 20 ? "middle" : layer <= 29 ? "late" : "last",
        text: quoted(label) + " is the top guess from layer " + layer + " on, with probability " +
              at.getAttribute("data-final-prob") + " there" + (before ? "; after layer " + (layer - 1) +
              " it ranks " + before.getAttribute("data-final-rank") + " and the top guess is " +
              quoted(before.querySelector(".qx-key").textContent) : "") + ".",
      };
    },
  },
  sink: {
    title: "The attention sink",
    state: { text: "The cat sat on the mat because it was warm", grid: "first" },
    setup: "The map of every head shows each head's weight on the first token, The, averaged over the queries " +
           "from the second token on.",
    question: "How many of the 270 heads put more than half their weight on the first token?",
    options: { few: "Fewer than 30", some: "30 to 135 (up to half of them)", most: "More than 135 (most of them)" },
    read(root, panel, lab) {
      if (panel.getAttribute("data-edited") !== "" || lab.grid !== "first") return null;
      const cells = Array.from(root.querySelectorAll("[data-testid='head-cell'][data-value]"));
      if (cells.length !== 270) return null;
      const n = cells.filter((c) => value(c) > 0.5).length;
      return {
        value: n, answer: n < 30 ? "few" : n <= 135 ? "some" : "most",
        text: n + " of the 270 heads put more than half of their weight on \u201CThe\u201D. An even spread " +
              "over the keys each query sees would give it " + lab.summary.baseline.toFixed(3) + ".",
      };
    },
  },
  previous: {
    title: "Switch off the previous-token heads",
    state: { text: REPEATED, off: "2.3,3.2,12.2,17.1" },
    setup: "The same repeated words as the first mission. The four previous-token heads the trained-model page " +
           "names (layer 2 head 3, layer 3 head 2, layer 12 head 2, layer 17 head 1) are switched off.",
    question: "What happens to \u201Cstone\u201D, the model's top guess with every head on?",
    options: { same: "It hardly moves", falls: "It falls, but stays the top guess",
               lost: "Another token becomes the top guess" },
    read(root, panel) {
      const r = headsOffReading(root, panel, "2.3,3.2,12.2,17.1");
      if (!r) return null;
      const ratio = r.after / r.before;
      return {
        value: r.after, answer: r.top !== " stone" ? "lost" : ratio >= 0.9 ? "same" : "falls",
        text: "P(\u201C stone\u201D) " + probText(r.before) + " with every head on, " + probText(r.after) +
              " with the four heads off, and the top guess is " + quoted(r.topLabel) + "; KL divergence " +
              r.kl.toFixed(4) + " nats.",
      };
    },
  },
  pair: {
    title: "The trophy and the suitcase",
    state: { text: PAIR_1, text2: PAIR_2, cont1: " big", cont2: " small" },
    setup: "A minimal pair: the trophy did not fit in the suitcase because the trophy (text 1) or the suitcase " +
           "(text 2) was too \u2026 big or small?",
    question: "Which text makes the model prefer \u201C big\u201D over \u201C small\u201D more?",
    options: { first: "Text 1 (the trophy was too)", same: "About the same (within 0.1 nats)",
               second: "Text 2 (the suitcase was too)" },
    read(root, panel) {
      if (panel.getAttribute("data-paired") !== "" || !panel.getAttribute("data-attributed")) return null;
      const pref = (i) => value(root.querySelector("[data-testid='preference'][data-text='" + i + "']"));
      const d = value(root.querySelector("[data-testid='preference-difference']"));
      let best = null;
      root.querySelectorAll("[data-testid='dla-cell']").forEach((c) => {
        if (c.getAttribute("data-head") !== "mlp" && (!best || Math.abs(value(c)) > Math.abs(value(best)))) best = c;
      });
      if (!Number.isFinite(d) || !best) return null;
      const sign = (x) => x.toFixed(3).replace("-", "\u2212");
      return {
        value: d, head: [Number(best.getAttribute("data-layer")), Number(best.getAttribute("data-head"))],
        answer: d > 0.1 ? "first" : d < -0.1 ? "second" : "same",
        text: "log P(\u201C big\u201D) \u2212 log P(\u201C small\u201D): text 1 " + sign(pref(1)) + " nats, text 2 " +
              sign(pref(2)) + ", difference " + sign(d) + ". In text 1 the head with the largest direct share is " +
              "layer " + best.getAttribute("data-layer") + " head " + best.getAttribute("data-head") + " (" +
              best.getAttribute("data-value").replace("-", "\u2212") + " logit units).",
      };
    },
  },
};

/* Does the lab hold the mission's state (an address edited by hand may not)? */
function holds(m, lab, ctx) {
  const s = m.state, off = lab.off.map(([L, H]) => L + "." + H).join(",");
  return ctx.own().text === s.text && off === (s.off || "") && (lab.lens || 0) === (s.lens || 0) &&
         lab.text2 === (s.text2 || "") && lab.cont1 === (s.cont1 || "") && lab.cont2 === (s.cont2 || "") &&
         (!s.grid || lab.grid === s.grid);
}

function remember(id, choice) {
  try { if (choice) window.sessionStorage.setItem(STORE + id, choice); } catch (e) { /* storage off: kept in the page */ }
}
function recall(id) {
  try { return window.sessionStorage.getItem(STORE + id); } catch (e) { return null; }
}

export function startMission(h, lab, ctx) {
  const { el } = h;
  const id = new URLSearchParams(lab.query).get("mission");
  const m = Object.prototype.hasOwnProperty.call(MISSIONS, id) ? MISSIONS[id] : null;
  if (!m || !ctx.panel.isConnected) return null;
  if (!document.querySelector("link[data-qx-missions]")) {
    document.head.appendChild(el("link", { rel: "stylesheet", href: new URL("missions.css", import.meta.url).href,
                                            "data-qx-missions": "" }));
  }
  const keys = lab.keys; // the address keeps mission=ID beside the lab's keys
  lab.keys = () => [...keys(), ["mission", id]];
  ctx.writeUrlSoon();

  const name = (k) => h.ROOT_ID + "-mission-" + k;
  let choice = recall(id), measured = null;
  const radios = Object.keys(m.options).map((k) => {
    const input = el("input", { type: "radio", name: name("choice"), id: name(k), value: k,
                                "data-testid": "mission-option" });
    if (choice === k) input.checked = true;
    return el("div", { class: "qx-mission-option" }, [input, el("label", { for: name(k), text: m.options[k] })]);
  });
  const status = el("p", { class: "qx-note", "data-testid": "mission-status" });
  const yours = el("p", { "data-testid": "mission-prediction" });
  const reading = el("p", { class: "qx-mission-reading", "data-testid": "mission-measurement" });
  const verdict = el("p", { "data-testid": "mission-verdict" });
  const meaning = el("div", { class: "qx-mission-meaning", "data-testid": "mission-meaning" });
  const result = el("div", { class: "qx-mission-result", "data-testid": "mission-result", hidden: "" },
                    [yours, reading, verdict, meaning]);
  const live = el("p", { class: "qx-sr-only", "aria-live": "polite" });
  const form = el("fieldset", { class: "qx-mission-choices", "data-testid": "mission-predict" },
                  [el("legend", { text: "Predict first: " + m.question })].concat(radios));
  const box = el("section", { class: "qx-mission", "data-testid": "mission-box", "data-mission": id,
                              "aria-labelledby": name("title") }, [
    el("h2", { id: name("title"), text: "Guided experiment: " + m.title }),
    el("p", { text: m.setup }), form, status, result, live,
  ]);
  ctx.panel.insertBefore(box, ctx.panel.firstChild);

  // what the measurement means: the sentences of the page the explorer's list links to
  // ([data-qx-meanings], docs/things-to-try-in-depth.md), fetched from this site once measured,
  // copied as text (their claims' ticks stay on that page, linked below them)
  const link = document.querySelector("a[data-qx-meanings]");
  let meaningAsked = false;
  function showMeaning() {
    if (meaningAsked || !link) return;
    meaningAsked = true;
    const more = el("a", { href: link.href.split("#")[0] + "#mission-" + id,
                           text: "How this was checked, with its control" });
    fetch(link.href.split("#")[0]).then((r) => (r.ok ? r.text() : Promise.reject(new Error(r.status))))
      .then((html) => {
        const doc = new DOMParser().parseFromString(html, "text/html");
        const found = doc.querySelectorAll(".qx-mission-meaning[data-mission='" + CSS.escape(id) + "'] p");
        h.replaceChildren(meaning, [el("h3", { text: "What it means" })]);
        found.forEach((p) => meaning.appendChild(el("p", { text: p.textContent.replace(/\s*\u2713\s*$/, "").trim() })));
        meaning.appendChild(el("p", {}, [more]));
        box.setAttribute("data-meaning", "");
      })
      .catch(() => h.replaceChildren(meaning, [el("p", {}, ["What it means: ", more])]));
  }

  function draw() {
    const label = choice && m.options[choice];
    if (!measured) {
      status.textContent = !holds(m, lab, ctx)
        ? "The lab is no longer in this mission's state: open the mission again from the list below the explorer."
        : label ? "Your prediction is kept. Load the model below if it is not loaded: the measurement appears here " +
                  "once the lab has run." : "Choose one answer, then load the model below.";
      return;
    }
    if (!label) {
      status.textContent = "The lab has run. Choose your prediction to see what it measured.";
      result.hidden = true;
      return;
    }
    status.textContent = "";
    yours.textContent = "You predicted: " + label + ".";
    reading.textContent = "The lab measured: " + measured.text;
    reading.setAttribute("data-value", String(measured.value));
    verdict.textContent = choice === measured.answer ? "Your prediction matches the measurement."
      : "The measurement matches another answer: " + m.options[measured.answer] + ".";
    verdict.setAttribute("data-answer", measured.answer);
    box.setAttribute("data-measured", "");
    showMeaning();
    const wasHidden = result.hidden;
    result.hidden = false;
    if (wasHidden) live.textContent = yours.textContent + " " + reading.textContent + " " + verdict.textContent;
  }
  form.addEventListener("change", (event) => {
    choice = event.target.value;
    remember(id, choice);
    draw();
  });
  function check() {
    if (!measured && lab.root && holds(m, lab, ctx)) measured = m.read(lab.root, ctx.panel, lab);
    draw();
  }
  new MutationObserver(check).observe(ctx.panel, {
    attributes: true, attributeFilter: ["data-edited", "data-lensed", "data-paired", "data-attributed"],
  });
  check();
  return box;
}
