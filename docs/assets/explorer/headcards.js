/* Head cards, in the explorer's lab: choosing a head in any of the lab's grids or tables (a
 * click, or moving the keyboard focus onto it) shows one card for that head, next to where it
 * was chosen. The card gives the head's scores on a fixed probe set, computed with qkv while
 * the site was built (explorer/smollm2/probes.json, sitebuild/qkv_site/smollm2_probes.py),
 * each beside what chance gives and with its rank among all heads; then its effect in the
 * reader's own experiment as the lab shows it (direct attribution, patching, switched off);
 * and a list that ranks every head by any of these, whose entries choose a head in turn.
 *
 * The card reads the experiment's numbers from the lab's own cells (data-value), so it shows
 * exactly what the lab shows and nothing the lab has not computed. */

const TOP = 10; // heads in the ranking list

export function installHeadCards(h, lab, probesUrl) {
  const { el } = h;
  const id = (name) => h.ROOT_ID + "-card-" + name;
  let probes = null; // the file, once fetched
  let chosen = null; // [L, H]

  const title = el("h3", { id: id("title") });
  const scores = el("table", { class: "qx-map-table qx-card-table", "data-testid": "head-card-scores" });
  const effects = el("ul", { class: "qx-card-effects", "data-testid": "head-card-effects" });
  const rankBy = el("select", { id: id("rank-by"), "data-testid": "head-rank-by" });
  const rankList = el("ol", { class: "qx-card-rank", "data-testid": "head-rank", "aria-labelledby": id("rank-title") });
  const rankTitle = el("span", { id: id("rank-title") });
  const card = el("section", { class: "qx-lab-part qx-head-card", "data-testid": "head-card",
                               "aria-labelledby": id("title"), hidden: "" }, [
    title,
    el("p", { class: "qx-note", text: "Scores on a fixed probe set, computed with qkv while this site was " +
              "built. First and previous token: the head's mean weight on them over the trained-model page's ten texts; " +
              "earlier copy and after a copy: its mean weight on an earlier copy of the query's token and on " +
              "the token after it, over four texts of 12 random tokens written twice; copying: how much what " +
              "it writes raises the logit of what it reads, directly. Chance is an even spread's weight (the " +
              "median head's, for copying); rank 1 is the highest of all heads." }),
    el("div", { class: "qx-table-wrap", role: "region", tabindex: "0", "aria-label": "The chosen head's scores" },
       [scores]),
    el("h4", { text: "In your experiment" }),
    effects,
    el("div", { class: "qx-controls qx-lab-controls" }, [
      el("label", { for: id("rank-by"), text: "Rank all heads by " }), rankBy]),
    el("p", { class: "qx-note" }, [rankTitle]),
    rankList,
  ]);
  lab.root.appendChild(card);

  // what a head can be ranked by: the probes, then the experiment's numbers the lab shows
  const EFFECTS = [
    { id: "attribution", cell: "dla-cell", label: "direct attribution", unit: " logits" },
    { id: "patching", cell: "patch-head-cell", label: "patching effect", unit: "" },
  ];
  const cellOf = (testid, L, H) =>
    lab.root.querySelector(`[data-testid="${testid}"][data-layer="${L}"][data-head="${H}"][data-value]`);
  const shownValues = (testid) => { // {"L.H": value} of the lab's cells that are on screen
    const values = {};
    for (const cell of lab.root.querySelectorAll(`[data-testid="${testid}"][data-value]`)) {
      if (cell.closest("[hidden]")) continue;
      const H = Number(cell.dataset.head);
      if (Number.isInteger(H)) values[cell.dataset.layer + "." + H] = Number(cell.dataset.value);
    }
    return values;
  };

  function fetchProbes() {
    if (!probes) {
      probes = h.fetchJson(probesUrl).then((data) => (probes = data), (error) => {
        probes = null; // a later choice tries again
        throw error;
      });
    }
    return Promise.resolve(probes);
  }

  function rankOf(matrix, L, H) { // 1 = the highest of all heads
    const mine = matrix[L - 1][H - 1];
    let above = 0;
    for (const row of matrix) for (const v of row) if (v > mine) above++;
    return above + 1;
  }

  function drawScores(L, H) {
    const rows = probes.probes.map((p) => {
      const value = p.scores[L - 1][H - 1];
      return el("tr", { "data-testid": "head-card-score", "data-probe": p.id, "data-value": String(value),
                        "data-baseline": String(p.baseline) }, [
        el("th", { scope: "row", text: p.label }),
        el("td", { text: value.toFixed(probes.decimals) }),
        el("td", { text: p.baseline.toFixed(probes.decimals) }),
        el("td", { text: String(rankOf(p.scores, L, H)) }),
      ]);
    });
    h.replaceChildren(scores, [
      el("caption", { text: "Layer " + L + ", head " + H + " on the probe set" }),
      el("thead", {}, [el("tr", {}, ["probe", "this head", "chance", "rank"].map((t) =>
        el("th", { scope: "col", text: t })))]),
      el("tbody", {}, rows),
    ]);
  }

  function drawEffects(L, H) {
    const items = [];
    for (const effect of EFFECTS) {
      const cell = cellOf(effect.cell, L, H);
      if (cell && !cell.closest("[hidden]")) {
        items.push(el("li", { "data-testid": "head-card-" + effect.id, "data-value": cell.dataset.value,
                              text: effect.label + ": " + cell.dataset.value + effect.unit }));
      }
    }
    const off = lab.off.some(([l, hh]) => l === L && hh === H);
    const kl = lab.root.querySelector('[data-testid="kl"][data-value]');
    if (off && lab.off.length === 1 && kl) {
      items.push(el("li", { "data-testid": "head-card-off", "data-value": kl.dataset.value,
                            text: "switched off alone, it moves the prediction by " + kl.dataset.value + " nats (KL)" }));
    } else {
      items.push(el("li", { "data-testid": "head-card-off", text: off
        ? "switched off, with " + (lab.off.length - 1) + " other heads: the KL above counts them all"
        : "not switched off: Space in the heads grid switches it off and shows how far the prediction moves" }));
    }
    if (items.length === 1) {
      items.unshift(el("li", { text: "a minimal pair adds its direct attribution; patching adds its effect" }));
    }
    h.replaceChildren(effects, items);
  }

  function drawRankChoices() {
    const keep = rankBy.value;
    const options = probes.probes.map((p) => el("option", { value: p.id, text: p.label }));
    for (const effect of EFFECTS) {
      if (Object.keys(shownValues(effect.cell)).length) {
        options.push(el("option", { value: effect.id, text: effect.label + " (by size)" }));
      }
    }
    h.replaceChildren(rankBy, options);
    rankBy.value = options.some((o) => o.value === keep) ? keep : options[0].value;
  }

  function drawRanking() {
    const by = rankBy.value;
    const probe = probes.probes.find((p) => p.id === by);
    let entries = [];
    if (probe) {
      probe.scores.forEach((row, l) => row.forEach((v, hh) => entries.push([l + 1, hh + 1, v])));
      entries.sort((a, b) => b[2] - a[2] || a[0] - b[0] || a[1] - b[1]);
      rankTitle.textContent = "Highest score, " + probe.label + ", of all heads:";
    } else {
      const effect = EFFECTS.find((e) => e.id === by);
      entries = Object.entries(shownValues(effect.cell)).map(([k, v]) => [...k.split(".").map(Number), v]);
      entries.sort((a, b) => Math.abs(b[2]) - Math.abs(a[2]) || a[0] - b[0] || a[1] - b[1]);
      rankTitle.textContent = "Largest " + effect.label + " in your experiment, either sign:";
    }
    h.replaceChildren(rankList, entries.slice(0, TOP).map(([L, H, v]) => el("li", {}, [
      el("button", { type: "button", class: "md-button qx-card-pick", "data-testid": "head-rank-item",
                     "data-layer": String(L), "data-head": String(H), "data-value": String(v),
                     "aria-current": chosen && chosen[0] === L && chosen[1] === H ? "true" : "false",
                     text: "layer " + L + ", head " + H + ": " + v }),
    ])));
  }

  function draw() {
    if (!chosen || !probes || probes instanceof Promise) return;
    const [L, H] = chosen;
    title.textContent = "Layer " + L + ", head " + H;
    card.setAttribute("data-layer", String(L));
    card.setAttribute("data-head", String(H));
    drawScores(L, H);
    drawEffects(L, H);
    drawRankChoices();
    drawRanking();
  }

  function choose(L, H, near) {
    chosen = [L, H];
    const part = near && near.closest(".qx-lab-part");
    if (part && part !== card && part.nextElementSibling !== card) part.after(card); // shown where chosen
    card.hidden = false;
    fetchProbes().then(draw, () => {
      h.replaceChildren(effects, [el("li", { class: "qx-error", role: "alert",
                                             text: "The probe scores could not be loaded; choose the head again to retry." })]);
    });
  }

  function onChoose(event) {
    const cell = event.target.closest("[data-layer][data-head]");
    if (!cell || card.contains(cell)) return;
    const L = Number(cell.dataset.layer), H = Number(cell.dataset.head);
    if (Number.isInteger(L) && Number.isInteger(H) && L >= 1 && H >= 1) choose(L, H, cell); // not an MLP cell
  }
  lab.root.addEventListener("click", onChoose);
  lab.root.addEventListener("focusin", onChoose);
  card.addEventListener("click", (event) => {
    const pick = event.target.closest('[data-testid="head-rank-item"]');
    if (pick) choose(Number(pick.dataset.layer), Number(pick.dataset.head), null);
  });
  rankBy.addEventListener("change", () => { if (probes && !(probes instanceof Promise)) drawRanking(); });

  // the experiment's numbers arrive after a run: redraw the card when the lab's cells change
  let pending = false;
  new MutationObserver((changes) => {
    if (pending || card.hidden || changes.every((c) => card.contains(c.target))) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; draw(); });
  }).observe(lab.root, { subtree: true, childList: true, attributes: true, attributeFilter: ["data-value", "hidden"] });

  return { choose: choose, card: card };
}
