/* The explorer's model worker: downloads SmolLM2's GGUF file from this site, reads it, and
 * runs the model on the reader's text, off the page's thread so the page stays responsive.
 * Started by explorer.js as `new Worker(URL of this file, { type: "module" })`.
 *
 * Messages in:
 *   { type: "load", url, bytes, wasm }   fetch the file (`bytes`: its size, from the site's
 *                                      index; null to go by the server's Content-Length);
 *                                      wasm: false keeps the JavaScript matrix product
 *                                      (for the tests; by default matmul.wasm, with
 *                                      WebAssembly SIMD, when the browser has it)
 *                                      buffer (instead of url): the file's bytes, an
 *                                      ArrayBuffer another worker gave (model/pool.js)
 *   { type: "file", id }               a copy of the loaded file's bytes (for pool.js: the
 *                                      file is downloaded once, each pool worker gets a copy)
 *   { type: "cancel" }                 stop a download
 *   { type: "run", id, text, maxTokens }    tokenize, cut to maxTokens, run, tabulate, and
 *                                      predict the next token (maxTokens: the site's index
 *                                      gives it, from qkv_site.smollm2_data.MAX_TOKENS; required)
 *   { type: "edit", id, off }          rerun the last text with heads switched off (off:
 *                                      [layer, head] pairs from 0), from the first edited
 *                                      layer on; predict again, and the KL divergence
 *   { type: "pair", id, texts, conts, maxTokens, off }   a minimal pair: each text's
 *                                      log-probability of each continuation, the preference,
 *                                      and how far each head's weights move between the texts
 *   { type: "lens", id, position, off }   the logit lens at `position` (from 0) of the last text,
 *                                      heads `off` switched off: the stream leaving each layer
 *                                      (row 0: the embeddings) through the final RMSNorm, its
 *                                      scale recomputed from that row, and the tied unembedding,
 *                                      as qkv.lab.lens.logit_lens reads it
 *   { type: "dla", id, conts }         direct logit attribution at the last text's last position of
 *                                      logit(first token of conts[0]) − logit(first of conts[1]),
 *                                      the model's own run (no head switched off)
 *   { type: "tokenize", id, text }     only the ids, pieces and labels (for the tests)
 *   { type: "patch", id, kind, texts, conts, maxTokens }   activation patching of a minimal
 *                                      pair whose texts have as many tokens (patch.js): kind
 *                                      "heads" or "stream"; one job at a time (a new one
 *                                      stops the last), run a layer at a time so that other
 *                                      messages, and a cancel, get in between
 *   { type: "patch-record", id, kind, texts, conts, maxTokens }   the same checks and
 *                                      recorded runs as "patch", without running a batch:
 *                                      the pair's batches and their cost (pool.js)
 *   { type: "patch-batches", id, kind, texts, conts, maxTokens, layers }   run only the
 *                                      batches of these layers (from 0), as "patch" runs them,
 *                                      posting "patched" for each; then "patch-ran"
 *   { type: "patch-cancel", id }       stop that job
 * Messages out:
 *   { type: "progress", received, total }   while downloading, a few times a second
 *   { type: "loaded", bytes, seconds, product }   product: "wasm-simd" or "javascript"
 *   { type: "layer", id, layer, of }         while running
 *   { type: "result", id, ... }              see `run` below
 *   { type: "edited", id, ... }              see `edit` below
 *   { type: "paired", id, ... }              see `pair` below
 *   { type: "lensed", id, position, off, final, layers }   final: the whole model's top token
 *                                      ({ id, piece, label }); layers: one row per stream, each
 *                                      { layer, id, piece, label, prob, final_prob, final_rank }
 *   { type: "attributed", id, tokens, heads, mlps, embedding, total, scale }   tokens: the two
 *                                      first tokens ({ id, piece, label }); heads (n_layers x n_heads,
 *                                      row by row) and mlps in logit units
 *   { type: "tokens", id, ids, pieces, labels }
 *   { type: "patch-start", id, kind, n, since, preferences, total }   the recorded runs:
 *                                      n tokens per text, the first position (from 0)
 *                                      where they differ, both preferences, the work to do
 *   { type: "patch-progress", id, done, total }   a few times a second
 *   { type: "patched", id, kind, layer, heads | positions, preferences, effects, done, total,
 *                                      last }   one layer's variants (layer, head and
 *                                      position from 0), as they are computed
 *   { type: "patch-cancelled", id }
 *   { type: "patch-recorded", id, kind, n, since, preferences, batches: [{ layer, cost }], total }
 *   { type: "patch-ran", id }                every batch of a "patch-batches" is posted
 *   { type: "file", id, buffer }             the file's bytes, transferred
 *   { type: "error", id, kind, message }     kind: "memory", "file", "network", "cancelled",
 *                                            "not-loaded", "input" (the message or the text
 *                                            cannot be run), "internal" (a bug in this code)
 */

import { FileError, readGGUF } from "./gguf.js";
import { compileKernel, makeKernel } from "./kernel.js";
import {
  assemble, attentionTables, directLogitAttribution, F16, forward, klDivergence, logProbs, topTokens, useKernel,
} from "./smollm2.js";
import { buildTokenizer, encode, label, pieces } from "./tokenizer.js";
import { plan, recordPair, runBatch, work } from "./patch.js";

let model = null; // what assemble returned, once loaded
let tokenizer = null;
let download = null; // the AbortController of the download under way
let product = null; // which matrix product runs: "wasm-simd" or "javascript"
let fileBytes = null; // the loaded file (the model's weights are views into it)

const PROGRESS_EVERY_MS = 150;
const TOP = 10; // next tokens shown

let last = null; // the last text run: its ids, its unedited trace and next-token log-probabilities

/* What the reader (or the page) asked for cannot be run: said as it is. Any other exception
   during a run is a bug in this code, reported as one. */
class InputError extends Error {}

function isMemoryError(err) {
  return err instanceof RangeError && /alloc|memory|invalid (typed )?array length|array buffer/i.test(err.message);
}

function memoryMessage(bytes) {
  return "This browser could not set aside the memory the model needs (" +
    (bytes ? Math.round(bytes / 1e6) + " MB for the file, more while it runs" : "more than it had free") +
    "). Close other tabs or use a device with more memory; the built sentences still work.";
}

/* Read the response's body into one buffer, reporting progress; the size is known ahead.
   allocate(n): the buffer for a body of n bytes (inside the WebAssembly memory when there is
   a kernel). */
async function readBody(response, expected, signal, allocate) {
  const total = expected || Number(response.headers.get("Content-Length")) || 0;
  let buffer, received = 0, lastReport = 0;
  try {
    buffer = total ? allocate(total) : new Uint8Array(1 << 24);
  } catch (err) {
    if (isMemoryError(err)) throw Object.assign(new Error(memoryMessage(total)), { kind: "memory" });
    throw err;
  }
  const reader = response.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (received + value.length > buffer.length) {
      if (expected) {
        reader.cancel();
        throw new FileError("The server sent more than the " + expected + " bytes of the model file this " +
                            "site was built with: it is not the same file.");
      }
      let bigger; // the size was not known: grow
      try {
        bigger = new Uint8Array(Math.max(buffer.length * 2, received + value.length));
      } catch (err) {
        if (isMemoryError(err)) throw Object.assign(new Error(memoryMessage(received)), { kind: "memory" });
        throw err;
      }
      bigger.set(buffer.subarray(0, received));
      buffer = bigger;
    }
    buffer.set(value, received);
    received += value.length;
    const now = performance.now();
    if (now - lastReport > PROGRESS_EVERY_MS) {
      lastReport = now;
      postMessage({ type: "progress", received: received, total: total });
    }
    if (signal.aborted) break;
  }
  postMessage({ type: "progress", received: received, total: total });
  return buffer.subarray(0, received);
}

async function load(url, expected, wasm, given) {
  if (model) { postMessage({ type: "loaded", bytes: 0, seconds: 0, product: product }); return; }
  if (download) return; // already under way; its messages will come
  const controller = new AbortController();
  download = controller;
  const started = performance.now();
  const compiling = wasm === false ? Promise.resolve(null) : compileKernel(new URL("matmul.wasm", import.meta.url));
  try {
    let response;
    try {
      response = given ? new Response(given) : await fetch(url, { signal: controller.signal });
    } catch (err) {
      if (controller.signal.aborted) throw err;
      throw Object.assign(new Error("The model file could not be fetched (" + err.message + ")."), { kind: "network" });
    }
    if (!response.ok) {
      throw Object.assign(new Error("The server answered HTTP " + response.status + " for the model file."),
                          { kind: "network" });
    }
    const module = await compiling; // the product's code: a few kilobytes, same origin
    let kernel = null;
    const withKernel = function (n) { // the kernel's memory for a file of n bytes, if it can be made
      try {
        kernel = makeKernel(module, n, F16);
      } catch (err) {
        if (isMemoryError(err)) throw err;
        kernel = null; // the JavaScript product, then
      }
      return kernel;
    };
    let bytes = await readBody(response, expected, controller.signal, function (n) {
      return module && withKernel(n) ? kernel.fileBuffer : new Uint8Array(n);
    });
    if (controller.signal.aborted) throw new DOMException("cancelled", "AbortError");
    if (module && !(kernel && bytes.buffer === kernel.fileBuffer.buffer) && withKernel(bytes.byteLength)) {
      kernel.fileBuffer.set(bytes); // the size was not known ahead: the file is copied in once
      bytes = kernel.fileBuffer;
    }
    const file = readGGUF(bytes);
    const assembled = assemble(file);
    const tok = buildTokenizer(file.metadata);
    if (expected && bytes.byteLength !== expected) {
      throw new FileError("The model file has " + bytes.byteLength + " bytes; this site was built with one of " +
                          expected + " bytes.");
    }
    model = assembled;
    tokenizer = tok;
    fileBytes = bytes;
    useKernel(kernel);
    product = kernel ? "wasm-simd" : "javascript";
    postMessage({ type: "loaded", bytes: bytes.byteLength, seconds: (performance.now() - started) / 1000,
                  product: product });
  } catch (err) {
    let kind = err.kind || (err instanceof FileError ? "file" : isMemoryError(err) ? "memory" : "file");
    let message = err.message;
    if (controller.signal.aborted || err.name === "AbortError") {
      kind = "cancelled";
      message = "Download cancelled.";
    } else if (kind === "memory" && !err.kind) {
      message = memoryMessage(expected);
    } else if (!(err instanceof FileError) && !err.kind) {
      message = "The model file could not be read: " + err.message;
    }
    postMessage({ type: "error", kind: kind, message: message });
  } finally {
    download = null;
  }
}

function tokenize(text, maxTokens) {
  const all = encode(tokenizer, text);
  const ids = maxTokens ? all.slice(0, maxTokens) : all;
  const ps = ids.length ? pieces(tokenizer, ids) : [];
  return { ids: ids, total: all.length, pieces: ps, labels: ps.map(label) };
}

/* The likeliest next tokens of a row of log-probabilities, with their text. */
function predictions(logp) {
  const top = topTokens(logp, TOP), ps = pieces(tokenizer, top.ids);
  return { ids: top.ids, probs: top.probs, pieces: ps, labels: ps.map(label) };
}

/* Tokenize the text, keep its first maxTokens tokens, run the model, tabulate its attention,
   predict the token after the last. */
function run(id, text, maxTokens) {
  if (!(Number.isInteger(maxTokens) && maxTokens > 0)) {
    throw new InputError("maxTokens must be a positive whole number (the site's index gives it); got " +
                         JSON.stringify(maxTokens) + ".");
  }
  const t = tokenize(text, maxTokens);
  if (!t.ids.length) throw new InputError("The text is empty: type at least one character.");
  const started = performance.now(), c = model.config;
  const trace = forward(model, t.ids, function (layer) {
    postMessage({ type: "layer", id: id, layer: layer, of: c.nLayers });
  }, { rows: [t.ids.length - 1], prefix: last && last.trace }); // a text that starts as the last did: from there on
  const logp = trace.logProbs[0];
  last = { ids: t.ids, trace: trace, logp: logp };
  const next = predictions(logp);
  const tables = attentionTables(trace, c);
  const seconds = (performance.now() - started) / 1000;
  postMessage({
    type: "result", id: id, text: text, ids: t.ids, total: t.total, pieces: t.pieces, labels: t.labels,
    n_layers: c.nLayers, n_heads: c.nHeads, n_kv_heads: c.nKvHeads, d_head: c.dHead,
    raw: tables.raw, scaled: tables.scaled, weights: tables.weights, entropy: tables.entropy,
    predictions: next, seconds: seconds,
  }, [tables.raw.buffer, tables.scaled.buffer, tables.weights[0].buffer, tables.weights[1].buffer,
      tables.entropy[0].buffer, tables.entropy[1].buffer]);
}

/* Rerun the last text with the heads `off` switched off ([layer, head] pairs from 0), from
   the first edited layer on (the stream entering it is kept from the unedited run). */
function edit(id, off) {
  if (!last) throw new InputError("Run the model on a text first.");
  const c = model.config;
  checkOff(off);
  const started = performance.now();
  let logq = last.logp, start = c.nLayers;
  if (off.length) {
    const edited = forward(model, last.ids, null, { off: off, reuse: last.trace, rows: [last.ids.length - 1] });
    logq = edited.logProbs[0];
    start = edited.start;
  }
  postMessage({ type: "edited", id: id, off: off, predictions: predictions(logq),
                kl: klDivergence(last.logp, logq), from_layer: start + 1,
                seconds: (performance.now() - started) / 1000 });
}

/* The logit lens of the last text at `position` (from 0), with the heads `off` switched off
   ([layer, head] pairs from 0): each stream, the embeddings and what every layer leaves,
   read as next-token probabilities; the whole model's top token's probability and rank
   (1 + how many tokens are likelier, as qkv.lab.lens counts it) at each. */
function lens(id, position, off) {
  if (!last) throw new InputError("Run the model on a text first.");
  const c = model.config, T = last.ids.length, d = c.dModel;
  if (!(Number.isInteger(position) && position >= 0 && position < T)) {
    throw new InputError("position must be a whole number from 0 to " + (T - 1) + " (the text has " + T +
                         " tokens); got " + JSON.stringify(position) + ".");
  }
  checkOff(off);
  const started = performance.now();
  const trace = off.length ? forward(model, last.ids, null, { off: off, reuse: last.trace }) : last.trace;
  const streams = trace.inputs.concat([trace.x]); // n_layers + 1 arrays of (T, d_model)
  const rows = new Float32Array(streams.length * d); // the position's row of each
  streams.forEach(function (x, l) { rows.set(x.subarray(position * d, (position + 1) * d), l * d); });
  const logp = logProbs(model, rows, streams.map(function (_, l) { return l; }));
  const finalId = topTokens(logp[logp.length - 1], 1).ids[0];
  const tops = logp.map(function (row) { return topTokens(row, 1); });
  const names = pieces(tokenizer, tops.map(function (t) { return t.ids[0]; }).concat([finalId]));
  const layers = logp.map(function (row, l) {
    const x = row[finalId];
    let rank = 1;
    for (let i = 0; i < row.length; i++) if (row[i] > x) rank++;
    return { layer: l, id: tops[l].ids[0], piece: names[l], label: label(names[l]), prob: tops[l].probs[0],
             final_prob: Math.exp(x), final_rank: rank };
  });
  const piece = names[names.length - 1];
  postMessage({ type: "lensed", id: id, position: position, off: off, layers: layers,
                final: { id: finalId, piece: piece, label: label(piece) },
                seconds: (performance.now() - started) / 1000 });
}

/* Direct logit attribution of the last text's last position: which head and which MLP
   write, by themselves, towards the first token of one continuation over the other's. */
function dla(id, conts) {
  if (!last) throw new InputError("Run the model on a text first.");
  if (!Array.isArray(conts) || conts.length !== 2) throw new InputError("Give two continuations.");
  const first = conts.map(function (t) { return encode(tokenizer, String(t))[0]; });
  if (first.some(function (t) { return t === undefined; })) throw new InputError("Each continuation needs at least one token.");
  const started = performance.now();
  const found = directLogitAttribution(model, last.trace, last.ids.length - 1, first[0], first[1]);
  const names = pieces(tokenizer, first);
  postMessage({ type: "attributed", id: id, tokens: first.map(function (t, i) {
    return { id: t, piece: names[i], label: label(names[i]) };
  }), heads: found.heads, mlps: found.mlps, embedding: found.embedding, total: found.total, scale: found.scale,
  n_layers: model.config.nLayers, n_heads: model.config.nHeads, seconds: (performance.now() - started) / 1000 });
}

/* The heads named by a message's `off`, checked: [layer, head] pairs from 0. */
function checkOff(off) {
  const c = model.config;
  if (!Array.isArray(off) || !off.every(function (p) {
    return Array.isArray(p) && p.length === 2 && Number.isInteger(p[0]) && Number.isInteger(p[1]) &&
      p[0] >= 0 && p[0] < c.nLayers && p[1] >= 0 && p[1] < c.nHeads;
  })) {
    throw new InputError("off must be a list of [layer, head] pairs, layers 0.." + (c.nLayers - 1) +
                         ", heads 0.." + (c.nHeads - 1) + "; got " + JSON.stringify(off).slice(0, 200) + ".");
  }
  return off;
}

/* log P(cont1 | text) and log P(cont2 | text), unedited and with the heads `off` switched
   off: for each continuation, the sum over its tokens of the log-probability the model gives
   each one at the position before it. One run per continuation holds the text and the
   continuation but its last token (a continuation of one token needs only the text); the
   longer continuation runs first, and the other takes the text's positions from it
   (prefix). `before`: the runs of an earlier text, whose leading tokens this text may share.
   With heads off, each edited run takes the layers before the first edited one from the
   unedited run of the same ids (reuse). Returns the log-probabilities and the first runs,
   which hold every position of the text. */
function scoreText(text, conts, off, before) {
  const order = conts[0].length >= conts[1].length ? [0, 1] : [1, 0];
  const logp = [0, 0], logpEdited = [0, 0];
  let first = null;
  order.forEach(function (k) {
    const cont = conts[k], from = first || before;
    let runs = first;
    if (!(first && cont.length === 1)) { // else: the text's last position, in the first runs
      const ids = text.concat(cont.slice(0, -1)), rows = cont.map(function (_, j) { return text.length - 1 + j; });
      const plain = forward(model, ids, null, { rows: rows, prefix: from && from.plain });
      runs = { plain: plain, edited: off.length
        ? forward(model, ids, null, { rows: rows, off: off, reuse: plain, prefix: from && from.edited }) : plain };
    }
    cont.forEach(function (tokenId, j) {
      logp[k] += runs.plain.logProbs[j][tokenId];
      logpEdited[k] += runs.edited.logProbs[j][tokenId];
    });
    if (!first) first = runs;
  });
  return { logp: logp, edited: logpEdited, runs: first };
}

/* A minimal pair: two texts, two continuations. For each text, log P(cont1 | text) and
   log P(cont2 | text) and their difference, the preference; with heads `off`, the same
   again with those heads switched off. And for each layer, head and query position of the
   shorter text, how far the head's weights move between the two texts: half the sum of the
   absolute differences of the two rows of weights (0: the same weights, 1: no key shared).
   The second text takes the tokens it shares with the first from the first's runs. */
function pair(id, texts, conts, maxTokens, off) {
  if (!Array.isArray(texts) || texts.length !== 2 || !Array.isArray(conts) || conts.length !== 2) {
    throw new InputError("A minimal pair needs two texts and two continuations.");
  }
  checkOff(off);
  const c = model.config, started = performance.now();
  const tt = texts.map(function (t) { return encode(tokenizer, String(t)); });
  const cc = conts.map(function (t) { return encode(tokenizer, String(t)); });
  if (tt.some(function (x) { return !x.length; })) throw new InputError("Each text of the pair needs at least one token.");
  if (cc.some(function (x) { return !x.length; })) throw new InputError("Each continuation needs at least one token.");
  tt.forEach(function (t, i) {
    const longest = t.length + Math.max(cc[0].length, cc[1].length);
    if (longest > maxTokens) {
      throw new InputError("Text " + (i + 1) + " and its longer continuation have " + longest + " tokens; at most " +
                           maxTokens + " run here.");
    }
  });
  let before = null; // the first text's runs: the second shares its leading tokens
  const scored = tt.map(function (t) {
    const got = scoreText(t, cc, off, before);
    before = got.runs;
    return got;
  });
  const T = Math.min(tt[0].length, tt[1].length), n = c.nLayers * c.nHeads;
  const a = scored[0].runs.plain, b = scored[1].runs.plain, Ta = a.T, Tb = b.T; // texts first
  const moved = new Float64Array(n * T); // [layer][head][query], the texts' own queries only
  for (let l = 0; l < c.nLayers; l++) {
    for (let hd = 0; hd < c.nHeads; hd++) {
      for (let q = 0; q < T; q++) {
        let d = 0;
        for (let j = 0; j <= q; j++) {
          d += Math.abs(a.weights[l][(hd * Ta + q) * Ta + j] - b.weights[l][(hd * Tb + q) * Tb + j]);
        }
        moved[(l * c.nHeads + hd) * T + q] = d / 2;
      }
    }
  }
  const side = function (i) {
    const ps = pieces(tokenizer, tt[i]);
    const k = scored[i];
    return { ids: tt[i], pieces: ps, labels: ps.map(label), logp: k.logp, logp_edited: k.edited,
             preference: k.logp[0] - k.logp[1], preference_edited: k.edited[0] - k.edited[1] };
  };
  postMessage({ type: "paired", id: id, texts: [side(0), side(1)], conts: cc, off: off, moved: moved, T: T,
                n_layers: c.nLayers, n_heads: c.nHeads, seconds: (performance.now() - started) / 1000 },
              [moved.buffer]);
}

/* ---- patching: a job that runs a layer at a time ------------------------------------------ */

let job = null; // the patching job under way: { id, cancelled }
let recorded = null; // { key, rec }: the last pair recorded for patching

/* Let the messages that came meanwhile in (a cancel, another request): a message to
   ourselves through a channel is a task of its own, queued after them, with no timer delay. */
function letOthersIn() {
  return new Promise((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => { channel.port1.close(); resolve(); };
    channel.port2.postMessage(null);
  });
}

/* The checked pair of a patching message, recorded (the last one is kept): its token ids and
   recorded runs. */
function patchPair(kind, texts, conts, maxTokens) {
  if (kind !== "heads" && kind !== "stream") throw new InputError("kind must be \"heads\" or \"stream\".");
  if (!Array.isArray(texts) || texts.length !== 2 || !Array.isArray(conts) || conts.length !== 2) {
    throw new InputError("Patching needs two texts and two continuations.");
  }
  const tt = texts.map((t) => encode(tokenizer, String(t)));
  const cc = conts.map((t) => encode(tokenizer, String(t)));
  if (tt.some((x) => !x.length)) throw new InputError("Each text of the pair needs at least one token.");
  if (cc.some((x) => !x.length)) throw new InputError("Each continuation needs at least one token.");
  if (tt[0].length !== tt[1].length) {
    throw new InputError("Patching copies position by position, so the two texts need as many tokens: text 1 has " +
                         tt[0].length + ", text 2 has " + tt[1].length + ".");
  }
  const longest = tt[0].length + Math.max(cc[0].length, cc[1].length);
  if (longest > maxTokens) {
    throw new InputError("A text and its longer continuation have " + longest + " tokens; at most " + maxTokens +
                         " run here.");
  }
  if (tt[0].every((t, i) => t === tt[1][i])) throw new InputError("The two texts are the same tokens: there is nothing to patch.");
  const key = JSON.stringify([tt, cc]);
  if (!recorded || recorded.key !== key) recorded = { key: key, rec: recordPair(model, tt[0], tt[1], cc) };
  const rec = recorded.rec;
  if (rec.p1 === rec.p2) {
    throw new InputError("Both texts give the same preference: a patch has nothing to restore.");
  }
  return rec;
}

/* Run `batches` of a job, a layer at a time, posting each batch's results as they come;
   false when the job was cancelled. */
async function runBatches(me, kind, rec, batches, started, total, lastBatch) {
  let done = 0, told = 0;
  for (const batch of batches) {
    const perLayer = work(model, rec, batch) / (model.config.nLayers - batch.layer);
    const steps = runBatch(model, rec, batch);
    let step = steps.next();
    for (; !step.done; step = steps.next()) {
      done += perLayer;
      const now = performance.now();
      if (now - told > 100) { told = now; postMessage({ type: "patch-progress", id: me.id, done: done, total: total }); }
      await letOthersIn();
      if (me.cancelled) { postMessage({ type: "patch-cancelled", id: me.id }); return false; }
    }
    const [prefs, effects] = step.value;
    const which = batch.variants.map((v) => (kind === "heads" ? v.head : v.position));
    postMessage({ type: "patched", id: me.id, kind: kind, layer: batch.layer, [kind === "heads" ? "heads" : "positions"]: which,
                  preferences: prefs, effects: effects, done: done, total: total,
                  last: batch === lastBatch, seconds: (performance.now() - started) / 1000 });
  }
  return true;
}

function startJob(id) {
  const me = { id: id, cancelled: false };
  if (job) job.cancelled = true;
  job = me;
  return me;
}

/* Patch text 2's run into text 1's, every variant of `kind`, a layer's variants at a time,
   posting each layer's results as they come. */
async function patch(id, kind, texts, conts, maxTokens) {
  const me = startJob(id), started = performance.now();
  const rec = patchPair(kind, texts, conts, maxTokens);
  const batches = plan(model, rec, kind);
  const total = batches.reduce((s, b) => s + work(model, rec, b), 0);
  postMessage({ type: "patch-start", id: id, kind: kind, n: rec.n, since: rec.since, preferences: [rec.p1, rec.p2],
                total: total, seconds: (performance.now() - started) / 1000 });
  await runBatches(me, kind, rec, batches, started, total, batches[batches.length - 1]);
  if (job === me) job = null;
}

/* For pool.js: the pair recorded, and its batches with their cost. */
function patchRecord(id, kind, texts, conts, maxTokens) {
  const started = performance.now(), rec = patchPair(kind, texts, conts, maxTokens);
  const batches = plan(model, rec, kind).map((b) => ({ layer: b.layer, cost: work(model, rec, b) }));
  postMessage({ type: "patch-recorded", id: id, kind: kind, n: rec.n, since: rec.since, preferences: [rec.p1, rec.p2],
                batches: batches, total: batches.reduce((s, b) => s + b.cost, 0),
                seconds: (performance.now() - started) / 1000 });
}

/* For pool.js: only the batches of `layers`, in the plan's order. */
async function patchBatches(id, kind, texts, conts, maxTokens, layers) {
  const me = startJob(id), started = performance.now();
  if (!Array.isArray(layers) || !layers.every((l) => Number.isInteger(l) && l >= 0 && l < model.config.nLayers)) {
    throw new InputError("layers must be a list of layers from 0 to " + (model.config.nLayers - 1) + ".");
  }
  const rec = patchPair(kind, texts, conts, maxTokens);
  const batches = plan(model, rec, kind).filter((b) => layers.indexOf(b.layer) >= 0);
  const total = batches.reduce((s, b) => s + work(model, rec, b), 0);
  if (await runBatches(me, kind, rec, batches, started, total, null)) postMessage({ type: "patch-ran", id: id });
  if (job === me) job = null;
}

function reportError(id, err) {
  const kind = err instanceof InputError ? "input" : isMemoryError(err) ? "memory" : "internal";
  const message = kind === "input" ? err.message : kind === "memory" ? memoryMessage(0)
    : "Something went wrong inside the explorer's model code (" + (err && err.name) + ": " +
      (err && err.message) + "). This is a bug, not a problem with your text; the built sentences still work.";
  postMessage({ type: "error", id: id, kind: kind, message: message });
}

self.onmessage = function (event) {
  const msg = event.data || {};
  if (msg.type === "load") {
    const given = msg.buffer instanceof ArrayBuffer ? msg.buffer : null;
    load(String(msg.url), given ? given.byteLength : Number(msg.bytes) || 0, msg.wasm, given);
    return;
  }
  if (msg.type === "cancel") { if (download) download.abort(); return; }
  if (msg.type === "patch-cancel") { if (job && job.id === msg.id) job.cancelled = true; return; }
  if (["run", "tokenize", "edit", "pair", "lens", "dla", "patch", "patch-record", "patch-batches", "file"]
      .indexOf(msg.type) < 0) return;
  if (!model) {
    postMessage({ type: "error", id: msg.id, kind: "not-loaded", message: "The model is not loaded yet." });
    return;
  }
  try {
    if (msg.type === "patch" || msg.type === "patch-record" || msg.type === "patch-batches") {
      if (!(Number.isInteger(msg.maxTokens) && msg.maxTokens > 0)) {
        throw new InputError("maxTokens must be a positive whole number (the site's index gives it); got " +
                             JSON.stringify(msg.maxTokens) + ".");
      }
      if (msg.type === "patch-record") {
        patchRecord(msg.id, msg.kind, msg.texts, msg.conts, msg.maxTokens);
        return;
      }
      const running = msg.type === "patch" ? patch(msg.id, msg.kind, msg.texts, msg.conts, msg.maxTokens)
        : patchBatches(msg.id, msg.kind, msg.texts, msg.conts, msg.maxTokens, msg.layers);
      running.catch((err) => {
        if (job && job.id === msg.id) job = null;
        reportError(msg.id, err);
      });
    } else if (msg.type === "file") {
      const copy = fileBytes.slice().buffer;
      postMessage({ type: "file", id: msg.id, buffer: copy }, [copy]);
    } else if (msg.type === "tokenize") {
      postMessage(Object.assign({ type: "tokens", id: msg.id }, tokenize(String(msg.text), 0)));
    } else if (msg.type === "edit") {
      edit(msg.id, msg.off);
    } else if (msg.type === "dla") {
      dla(msg.id, msg.conts);
    } else if (msg.type === "lens") {
      lens(msg.id, msg.position, msg.off || []);
    } else if (msg.type === "pair") {
      if (!(Number.isInteger(msg.maxTokens) && msg.maxTokens > 0)) {
        throw new InputError("maxTokens must be a positive whole number (the site's index gives it); got " +
                             JSON.stringify(msg.maxTokens) + ".");
      }
      pair(msg.id, msg.texts, msg.conts, msg.maxTokens, msg.off || []);
    } else {
      run(msg.id, String(msg.text), msg.maxTokens);
    }
  } catch (err) {
    reportError(msg.id, err);
  }
};
