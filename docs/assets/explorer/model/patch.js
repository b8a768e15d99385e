/* Activation patching in the browser: qkv.lab.effects.MinimalPair, batch by batch.
 *
 * Python (qkv.lab.effects, qkv.lab.patching)     JavaScript (this file)
 *   MinimalPair.of (record the runs)               recordPair
 *   MinimalPair.patched_heads                      a plan of kind "heads"
 *   MinimalPair.patched_stream                     a plan of kind "stream"
 *   patching._run_staggered (rerun a batch)        runBatch
 *   patching_effect                                effect
 *
 * A minimal pair is two texts of one token count n and two continuations. Text 1 is run
 * with part of text 2's run copied in, and the layers after the patch run again:
 *   heads:  the output (before W_O) of one head of layer l, at every text position from
 *           the first where the texts differ, taken from text 2's run;
 *   stream: the residual stream entering layer l at one text position p, taken from text 2's.
 * A variant's preference is log P(cont 1 | text) − log P(cont 2 | text) with the patch,
 * each continuation's tokens summed, and its effect (preference − text 1's) ÷ (text 2's −
 * text 1's): 0 nothing moved, 1 text 2's preference restored.
 *
 * What is rerun: a variant's *rows* are the text's positions from `since` on (for the
 * heads, the first position where the texts differ; for the stream, the patched position:
 * the positions before it see nothing patched, so they are text 1's run as recorded) and,
 * for each continuation, its tokens but the last, which attend to the text and to their own
 * continuation only. The rows of every variant of one layer run through the layers as one
 * batch (one matrix product per weight matrix for all of them), each variant attending to
 * text 1's recorded keys and values before its `since` and to its own rows. Layers before
 * the patched one are text 1's run as recorded and are not run again.
 */

import { decoderLayer, forward, logProbs } from "./smollm2.js";

/* ---- the recorded runs ------------------------------------------------------------------ */

/**
 * Run the pair's four texts (text 1 and text 2, each with each continuation but its last
 * token) and keep them, with both preferences.
 * @param model what assemble returned
 * @param {number[]} t1 text 1's token ids; @param {number[]} t2 text 2's, as many
 * @param {number[][]} conts the two continuations' ids, each at least one token
 * @returns {{n, since, conts, one, two, p1, p2}} one[c], two[c]: forward traces of text 1
 *   and text 2 joined with continuation c (no last token), holding every layer's input
 *   stream, keys, values and weights; p1, p2: the two texts' preferences in nats
 */
export function recordPair(model, t1, t2, conts) {
  const n = t1.length;
  const runs = new Map();
  let previous = null; // a run whose ids the next may start with (forward's prefix)
  const runOf = (ids) => {
    const key = ids.join(",");
    if (!runs.has(key)) {
      const rows = [];
      for (let t = n - 1; t < ids.length; t++) rows.push(t);
      previous = forward(model, ids, null, { rows: rows, prefix: previous });
      runs.set(key, previous);
    }
    return runs.get(key);
  };
  const one = conts.map((c) => runOf(t1.concat(c.slice(0, -1))));
  const two = conts.map((c) => runOf(t2.concat(c.slice(0, -1))));
  const logP = (run, c) => c.reduce((s, token, j) => s + run.logProbs[j][token], 0);
  let since = 0;
  while (since < n && t1[since] === t2[since]) since++;
  return { n: n, since: since, conts: conts, one: one, two: two,
           p1: logP(one[0], conts[0]) - logP(one[1], conts[1]),
           p2: logP(two[0], conts[0]) - logP(two[1], conts[1]) };
}

/* (preference with the patch − p1) ÷ (p2 − p1): 0 nothing moved, 1 text 2's restored. */
export function effect(preference, rec) {
  return (preference - rec.p1) / (rec.p2 - rec.p1);
}

/* Each head's output (before W_O) of layer l at positions from..to−1 of a run, (heads,
   to − from, d_head): the weights times the values, summed key by key as groupedAttention
   sums them, so the numbers are the ones the run passed to W_O. */
function headOutputs(model, run, l, from, to) {
  const c = model.config, d = c.dHead, T = run.T, w = run.weights[l], v = run.v[l], m = to - from;
  const out = new Float32Array(c.nHeads * m * d), acc = new Float64Array(d);
  for (let h = 0; h < c.nHeads; h++) {
    const g = Math.floor(h / c.group);
    for (let t = from; t < to; t++) {
      acc.fill(0);
      for (let j = 0; j <= t; j++) {
        const a = w[(h * T + t) * T + j], vj = (g * T + j) * d;
        for (let e = 0; e < d; e++) acc[e] += a * v[vj + e];
      }
      out.set(acc, (h * m + t - from) * d);
    }
  }
  return out;
}

/* ---- the plan: which variants, batched by layer -------------------------------------------- */

/* The stream entering layer l at a variant's rows, text 1's as recorded: the text's
   positions since..n−1, then each continuation's positions. */
function entering(rec, l, since, d) {
  const n = rec.n, tails = rec.conts.map((c) => c.length - 1);
  const x = new Float32Array((n - since + tails[0] + tails[1]) * d);
  x.set(rec.one[0].inputs[l].subarray(since * d, n * d));
  let at = (n - since) * d;
  rec.conts.forEach((_, c) => {
    x.set(rec.one[c].inputs[l].subarray(n * d, (n + tails[c]) * d), at);
    at += tails[c] * d;
  });
  return x;
}

/**
 * The batches of a kind of patching, the cheapest first (the last layer's: it reruns one
 * layer), one per layer. Each batch: { layer (from 0), variants: [{ head or position (from 0),
 * since, x (its rows' stream entering the layer), edit (heads: [head, outputs]) }] }.
 * Stream positions before the first difference are left out: both texts hold the same
 * tokens there, so copying changes nothing (effect 0).
 */
export function plan(model, rec, kind) {
  const c = model.config, d = c.dModel, n = rec.n, batches = [];
  for (let l = c.nLayers - 1; l >= 0; l--) {
    const variants = [];
    if (kind === "heads") {
      const outputs = headOutputs(model, rec.two[0], l, rec.since, n), m = (n - rec.since) * c.dHead;
      for (let h = 0; h < c.nHeads; h++) {
        variants.push({ head: h, since: rec.since, x: entering(rec, l, rec.since, d),
                        edit: [h, outputs.subarray(h * m, (h + 1) * m)] });
      }
    } else {
      for (let p = rec.since; p < n; p++) {
        const x = entering(rec, l, p, d);
        x.set(rec.two[0].inputs[l].subarray(p * d, (p + 1) * d)); // text 2's stream at p
        variants.push({ position: p, since: p, x: x, edit: null });
      }
    }
    batches.push({ layer: l, variants: variants });
  }
  return batches;
}

/* How many layer-rows a batch runs: for the progress. */
export function work(model, rec, batch) {
  const tails = rec.conts[0].length + rec.conts[1].length - 2;
  return batch.variants.reduce((s, v) => s + (rec.n - v.since + tails), 0) * (model.config.nLayers - batch.layer);
}

/* ---- running a batch -------------------------------------------------------------------- */

/* Where each row of the batch sits: its variant's first row, its position, and the rows of
   the batch it may read (its own earlier text rows, and for a continuation's row the whole
   text and its own continuation's earlier rows). */
function layout(rec, variants) {
  const n = rec.n, tails = rec.conts.map((c) => c.length - 1);
  const pos = [], reads = [], starts = [], lasts = [];
  variants.forEach((v) => {
    const first = pos.length, nt = n - v.since;
    starts.push(first);
    for (let a = 0; a < nt; a++) {
      pos.push(v.since + a);
      reads.push(Int32Array.from({ length: a + 1 }, (_, j) => first + j));
    }
    const ends = [first + nt - 1]; // each continuation's rows to score: the text's last, then its own
    let at = first + nt;
    tails.forEach((m) => {
      const rows = [first + nt - 1];
      for (let j = 0; j < m; j++) {
        pos.push(n + j);
        const r = new Int32Array(nt + j + 1);
        for (let a = 0; a < nt; a++) r[a] = first + a;
        for (let i = 0; i <= j; i++) r[nt + i] = at + i;
        reads.push(r);
        rows.push(at + j);
      }
      at += m;
      ends.push(rows);
    });
    lasts.push(ends.slice(1));
  });
  return { pos: pos, reads: reads, starts: starts, scored: lasts };
}

/* Attention for the batch: each row's query reads text 1's recorded keys and values at the
   positions before its variant's `since` (past: the layer's k, v and their run's T), then
   the rows `reads` names; softmax of q · k / √d_head, as groupedAttention computes it.
   Heads patched in this layer take their given outputs at the variant's text rows. */
function attendBatch(c, lay, variants, past, layer, q, k, v) {
  const d = c.dHead, scale = 1 / Math.sqrt(d), R = lay.pos.length, H = c.nHeads;
  const heads = new Float32Array(H * R * d), out = new Float64Array(d);
  variants.forEach((variant, b) => {
    const first = lay.starts[b], last = b + 1 < variants.length ? lay.starts[b + 1] : R;
    const P = variant.since, s = new Float64Array(P + R);
    for (let h = 0; h < H; h++) {
      const g = Math.floor(h / c.group);
      for (let r = first; r < last; r++) {
        const qi = (h * R + r) * d, own = lay.reads[r], m = P + own.length;
        let peak = -Infinity;
        for (let j = 0; j < m; j++) {
          const kj = j < P ? (g * past.T + j) * d : (g * R + own[j - P]) * d, keys = j < P ? past.k : k;
          let dot = 0;
          for (let e = 0; e < d; e++) dot += q[qi + e] * keys[kj + e];
          s[j] = dot;
          if (dot * scale > peak) peak = dot * scale;
        }
        let sum = 0;
        for (let j = 0; j < m; j++) { s[j] = Math.exp(s[j] * scale - peak); sum += s[j]; }
        out.fill(0);
        for (let j = 0; j < m; j++) {
          const w = s[j] / sum, vj = j < P ? (g * past.T + j) * d : (g * R + own[j - P]) * d;
          const values = j < P ? past.v : v;
          for (let e = 0; e < d; e++) out[e] += w * values[vj + e];
        }
        heads.set(out, qi);
      }
    }
    if (variant.edit && layer === variant.editLayer) { // text 2's head output at the text rows
      const [h, outputs] = variant.edit;
      heads.set(outputs, (h * R + first) * d);
    }
  });
  return { heads: heads, k: k, v: v, weights: null, raw: null };
}

/**
 * Run one batch from its layer to the last, one layer per step (a generator: the worker
 * lets other messages in between steps), and give each variant's preference and effect.
 * @yields {number} the layer just run (from 0)
 * @returns {Float64Array[]} [preferences, effects], one per variant
 */
export function* runBatch(model, rec, batch) {
  const c = model.config, d = c.dModel, variants = batch.variants;
  variants.forEach((v) => { v.editLayer = batch.layer; });
  const lay = layout(rec, variants), R = lay.pos.length;
  const x0 = new Float32Array(R * d);
  variants.forEach((v, b) => x0.set(v.x, lay.starts[b] * d));
  let x = x0;
  for (let l = batch.layer; l < c.nLayers; l++) {
    const past = { k: rec.one[0].k[l], v: rec.one[0].v[l], T: rec.one[0].T };
    const attend = (q, k, v) => attendBatch(c, lay, variants, past, l, q, k, v);
    x = decoderLayer(x, model.layers[l], c, R, lay.pos, [], null, attend).x;
    yield l;
  }
  const rows = [];
  lay.scored.forEach((perCont) => perCont.forEach((list) => list.forEach((r) => rows.push(r))));
  const unique = Array.from(new Set(rows)), logp = logProbs(model, x, unique);
  const at = new Map(unique.map((r, i) => [r, logp[i]]));
  const prefs = new Float64Array(variants.length), effects = new Float64Array(variants.length);
  lay.scored.forEach((perCont, b) => {
    const logP = perCont.map((list, k) => list.reduce((s, r, j) => s + at.get(r)[rec.conts[k][j]], 0));
    prefs[b] = logP[0] - logP[1];
    effects[b] = effect(prefs[b], rec);
  });
  return [prefs, effects];
}
