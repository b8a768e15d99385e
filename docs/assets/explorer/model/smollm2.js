/* SmolLM2-135M-Instruct's forward pass in the browser: qkv/smollm2.py, function by function.
 *
 * Python (qkv.smollm2)            JavaScript (this file)
 *   Config.from_metadata            configFromMetadata
 *   _assemble (+ shape checks)      assemble
 *   rms_norm, silu                  rmsNorm, silu
 *   qkv.rope                        rope
 *   qkv.split_heads / merge_heads   splitHeads / mergeHeads
 *   qkv.grouped_attention           groupedAttention (causal mask, softmax of q·k/√d_head)
 *   decoder_layer                   decoderLayer
 *   forward                         forward (the output matrix only at the rows asked for)
 *   output_logits, softmax          logProbs
 *   interventions.HeadsOff          decoderLayer's `off`
 *
 * The weights stay as the file stores them (4-bit Q4_1 blocks, the 8-bit Q8_0 embedding),
 * about 95 MB instead of 540 MB of float32. A matrix product dequantizes one row of a weight
 * matrix at a time (18 to 48 blocks of 32 weights) into a small buffer and uses it for every
 * token. Dequantizing gives the same float32 numbers as gguf.quants.dequantize, which qkv
 * uses: a Q4_1 weight is scale·nibble + minimum, the product exact in float32 and the sum
 * rounded to float32; a Q8_0 weight is scale·int8, exact.
 *
 * Activations are kept in float32 (Float32Array), as qkv keeps them; sums are accumulated in
 * float64 (JavaScript numbers), which is at least as accurate as NumPy's float32 products.
 *
 * Shapes follow qkv: T tokens, rows first. A (T, n) array is a Float32Array of T*n numbers,
 * row after row; per-head arrays are (heads, T, d_head).
 */

import { FileError } from "./gguf.js";

/* ---- float16, as the blocks store their scales --------------------------------------- */

export const F16 = (function () { // all 65,536 half-precision values, looked up by their bits
  const table = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const sign = h & 0x8000 ? -1 : 1, exp = (h >> 10) & 0x1f, frac = h & 0x3ff;
    if (exp === 0) table[h] = sign * frac * Math.pow(2, -24); // subnormal
    else if (exp === 31) table[h] = frac ? NaN : sign * Infinity;
    else table[h] = sign * (1 + frac / 1024) * Math.pow(2, exp - 15);
  }
  return table;
})();

/* ---- configuration: Config.from_metadata ---------------------------------------------- */

export function configFromMetadata(meta) {
  if (meta["general.architecture"] !== "llama") {
    throw new FileError("Expected a llama model; the file says " + JSON.stringify(meta["general.architecture"]) + ".");
  }
  function need(key) {
    if (meta[key] === undefined) throw new FileError("The model file has no metadata entry " + key + ".");
    return Number(meta[key]);
  }
  const dModel = need("llama.embedding_length"), nHeads = need("llama.attention.head_count");
  const config = {
    nLayers: need("llama.block_count"),
    dModel: dModel,
    nHeads: nHeads,
    nKvHeads: need("llama.attention.head_count_kv"),
    dHead: dModel / nHeads,
    dMlp: need("llama.feed_forward_length"),
    vocabSize: need("llama.vocab_size"),
    ropeBase: need("llama.rope.freq_base"),
    normEps: need("llama.attention.layer_norm_rms_epsilon"),
  };
  if (!Number.isInteger(config.dHead) || config.nHeads % config.nKvHeads) {
    throw new FileError("The model's heads do not fit: width " + dModel + ", " + nHeads + " query heads, " +
                        config.nKvHeads + " key/value heads.");
  }
  if (need("llama.rope.dimension_count") !== config.dHead) {
    throw new FileError("This forward pass rotates every dimension of a head; the file rotates " +
                        meta["llama.rope.dimension_count"] + " of " + config.dHead + ".");
  }
  config.group = config.nHeads / config.nKvHeads; // query heads per key/value head
  return config;
}

/* ---- the weights, checked and kept quantized: _assemble -------------------------------- */

/* Every tensor SmolLM2 needs, with GGUF's shape (fastest dimension first: [in, out]). */
export function expectedTensors(c) {
  const want = { "token_embd.weight": [c.dModel, c.vocabSize], "output_norm.weight": [c.dModel] };
  for (let i = 0; i < c.nLayers; i++) {
    const b = "blk." + i + ".";
    want[b + "attn_norm.weight"] = [c.dModel];
    want[b + "attn_q.weight"] = [c.dModel, c.nHeads * c.dHead];
    want[b + "attn_k.weight"] = [c.dModel, c.nKvHeads * c.dHead];
    want[b + "attn_v.weight"] = [c.dModel, c.nKvHeads * c.dHead];
    want[b + "attn_output.weight"] = [c.nHeads * c.dHead, c.dModel];
    want[b + "ffn_norm.weight"] = [c.dModel];
    want[b + "ffn_gate.weight"] = [c.dModel, c.dMlp];
    want[b + "ffn_up.weight"] = [c.dModel, c.dMlp];
    want[b + "ffn_down.weight"] = [c.dMlp, c.dModel];
  }
  return want;
}

/* A weight matrix of shape (out, in) as the file stores it, row by row. */
class Matrix {
  constructor(tensor) {
    this.name = tensor.name;
    this.type = tensor.typeName;
    this.nIn = tensor.dims[0];
    this.nOut = tensor.dims[1];
    this.bytes = tensor.bytes;
    this.view = new DataView(tensor.bytes.buffer, tensor.bytes.byteOffset, tensor.bytes.byteLength);
    this.rowBytes = tensor.size / this.nOut;
  }

  /* Dequantize row `o` (the `nIn` weights of output `o`) into `out`, a Float32Array. */
  row(o, out) {
    const b = this.bytes, p0 = o * this.rowBytes, n = this.nIn;
    if (this.type === "Q4_1") {
      for (let blk = 0, p = p0; blk < n; blk += 32, p += 20) {
        const d = F16[b[p] | (b[p + 1] << 8)], m = F16[b[p + 2] | (b[p + 3] << 8)];
        for (let j = 0; j < 16; j++) { // low nibbles are weights 0-15, high nibbles 16-31
          const q = b[p + 4 + j];
          out[blk + j] = d * (q & 15) + m;
          out[blk + j + 16] = d * (q >> 4) + m;
        }
      }
    } else if (this.type === "Q8_0") {
      for (let blk = 0, p = p0; blk < n; blk += 32, p += 34) {
        const d = F16[b[p] | (b[p + 1] << 8)];
        for (let j = 0; j < 32; j++) out[blk + j] = d * ((b[p + 2 + j] << 24) >> 24); // signed byte
      }
    } else if (this.type === "F32") {
      for (let j = 0; j < n; j++) out[j] = this.view.getFloat32(p0 + 4 * j, true);
    } else { // F16
      for (let j = 0; j < n; j++) out[j] = F16[this.view.getUint16(p0 + 2 * j, true)];
    }
    return out;
  }
}

/* A vector (a norm's gain), dequantized once: it is tiny. */
function vector(tensor) {
  const m = new Matrix({ name: tensor.name, typeName: tensor.typeName, dims: [tensor.dims[0], 1],
                         bytes: tensor.bytes, size: tensor.size });
  return m.row(0, new Float32Array(tensor.dims[0]));
}

const MATRIX_TYPES = ["Q4_1", "Q8_0", "F16", "F32"];
const VECTOR_TYPES = ["F32", "F16"];

/**
 * Check the file's tensors against what SmolLM2 needs and put them in the model's shape.
 * @param {{metadata, tensors}} file what readGGUF returned
 * @returns {{config, embedding: Matrix, layers: Array, finalNorm: Float32Array}}
 * @throws {FileError} naming the first tensor that is missing or wrong
 */
export function assemble(file) {
  const config = configFromMetadata(file.metadata);
  const want = expectedTensors(config), t = file.tensors;
  if (t["output.weight"]) {
    throw new FileError("This file has a separate output matrix; SmolLM2 ties it to the token embeddings.");
  }
  Object.keys(want).forEach(function (name) {
    const tensor = t[name];
    if (!tensor) throw new FileError("The model file has no tensor named " + name + ".");
    if (tensor.dims.join() !== want[name].join()) {
      throw new FileError("Tensor " + name + " has shape [" + tensor.dims.join(", ") + "]; SmolLM2 needs [" +
                          want[name].join(", ") + "] (GGUF lists the fastest dimension first).");
    }
    const allowed = want[name].length === 1 ? VECTOR_TYPES : MATRIX_TYPES;
    if (allowed.indexOf(tensor.typeName) < 0) {
      throw new FileError("Tensor " + name + " is stored as " + tensor.typeName + "; expected one of " +
                          allowed.join(", ") + ".");
    }
  });
  const layers = [];
  for (let i = 0; i < config.nLayers; i++) {
    const w = function (name) { return t["blk." + i + "." + name + ".weight"]; };
    layers.push({
      attnNorm: vector(w("attn_norm")),
      wQ: new Matrix(w("attn_q")), wK: new Matrix(w("attn_k")), wV: new Matrix(w("attn_v")),
      wO: new Matrix(w("attn_output")),
      mlpNorm: vector(w("ffn_norm")),
      wGate: new Matrix(w("ffn_gate")), wUp: new Matrix(w("ffn_up")), wDown: new Matrix(w("ffn_down")),
    });
  }
  return { config: config, embedding: new Matrix(t["token_embd.weight"]), layers: layers,
           finalNorm: vector(t["output_norm.weight"]) };
}

/* ---- the maths ---------------------------------------------------------------------- */

/* The WebAssembly product (kernel.js), once the worker has one: it computes the same sums
   as matmulJS below, in float32 four at a time. */
let kernel = null;
export function useKernel(k) {
  kernel = k;
}

/* x @ W.T for a (T, nIn) x and a (nOut, nIn) matrix W: (T, nOut). With WebAssembly SIMD,
   the kernel's product; otherwise (and for a matrix it does not cover) matmulJS. */
export function matmul(x, T, W) {
  return kernel && kernel.covers(W) ? kernel.matmul(x, T, W) : matmulJS(x, T, W);
}

/* x @ W.T in JavaScript. Blocked: two rows of W
   are dequantized at a time (block by block: 32 weights share a scale and a minimum) and
   serve all T tokens, four tokens at a time, so each weight and each activation read from
   memory serves several products (eight running sums in the inner loop, where one row and
   four tokens had four). Each output is still one sum over i in the same order, so the
   numbers do not change with the blocking. */
export function matmulJS(x, T, W) {
  const nIn = W.nIn, nOut = W.nOut, y = new Float32Array(T * nOut);
  const w0 = new Float32Array(nIn), w1 = new Float32Array(nIn);
  let o = 0;
  for (; o + 2 <= nOut; o += 2) {
    W.row(o, w0);
    W.row(o + 1, w1);
    let t = 0;
    for (; t + 4 <= T; t += 4) {
      const a = t * nIn, b = a + nIn, c = b + nIn, d = c + nIn;
      let s0 = 0, s1 = 0, s2 = 0, s3 = 0, r0 = 0, r1 = 0, r2 = 0, r3 = 0;
      for (let i = 0; i < nIn; i++) {
        const u = w0[i], v = w1[i], xa = x[a + i], xb = x[b + i], xc = x[c + i], xd = x[d + i];
        s0 += xa * u; s1 += xb * u; s2 += xc * u; s3 += xd * u;
        r0 += xa * v; r1 += xb * v; r2 += xc * v; r3 += xd * v;
      }
      const y0 = t * nOut + o;
      y[y0] = s0; y[y0 + nOut] = s1; y[y0 + 2 * nOut] = s2; y[y0 + 3 * nOut] = s3;
      y[y0 + 1] = r0; y[y0 + nOut + 1] = r1; y[y0 + 2 * nOut + 1] = r2; y[y0 + 3 * nOut + 1] = r3;
    }
    for (; t < T; t++) {
      const a = t * nIn;
      let s = 0, r = 0;
      for (let i = 0; i < nIn; i++) {
        const xa = x[a + i];
        s += xa * w0[i];
        r += xa * w1[i];
      }
      y[t * nOut + o] = s;
      y[t * nOut + o + 1] = r;
    }
  }
  for (; o < nOut; o++) { // an odd row left over
    W.row(o, w0);
    for (let t = 0; t < T; t++) {
      let s = 0;
      for (let i = 0; i < nIn; i++) s += x[t * nIn + i] * w0[i];
      y[t * nOut + o] = s;
    }
  }
  return y;
}

/* --8<-- [start:rms_norm] */
/* Scale each row to root-mean-square 1, then multiply by a learned gain. */
export function rmsNorm(x, T, d, gain, eps) {
  const out = new Float32Array(T * d);
  for (let t = 0; t < T; t++) {
    let ss = 0;
    for (let i = 0; i < d; i++) ss += x[t * d + i] * x[t * d + i];
    const scale = 1 / Math.sqrt(ss / d + eps);
    for (let i = 0; i < d; i++) out[t * d + i] = x[t * d + i] * scale * gain[i];
  }
  return out;
}
/* --8<-- [end:rms_norm] */

/* x · sigmoid(x), the gate of SwiGLU (sigmoid via tanh, which cannot overflow). */
export function silu(x) {
  return x * 0.5 * (1 + Math.tanh(0.5 * x));
}

/* (T, heads*dHead) -> (heads, T, dHead): cut each row into one slice per head. */
export function splitHeads(x, T, heads, dHead) {
  const out = new Float32Array(x.length);
  for (let h = 0; h < heads; h++) {
    for (let t = 0; t < T; t++) {
      for (let i = 0; i < dHead; i++) out[(h * T + t) * dHead + i] = x[t * heads * dHead + h * dHead + i];
    }
  }
  return out;
}

/* (heads, T, dHead) -> (T, heads*dHead): put the heads back side by side. */
export function mergeHeads(x, T, heads, dHead) {
  const out = new Float32Array(x.length);
  for (let h = 0; h < heads; h++) {
    for (let t = 0; t < T; t++) {
      for (let i = 0; i < dHead; i++) out[t * heads * dHead + h * dHead + i] = x[(h * T + t) * dHead + i];
    }
  }
  return out;
}

/* --8<-- [start:rope] */
/* Rotate each adjacent pair (0, 1), (2, 3), ... of every row of (heads, T, dHead) by the
   angle position · base^(-2i/dHead), as qkv.rope does (llama.cpp's order of dimensions). */
export function rope(x, heads, T, dHead, positions, base) {
  const out = new Float32Array(x.length);
  for (let t = 0; t < T; t++) {
    for (let i = 0; i < dHead / 2; i++) {
      const angle = positions[t] * Math.pow(base, -(2 * i) / dHead);
      const cos = Math.cos(angle), sin = Math.sin(angle);
      for (let h = 0; h < heads; h++) {
        const p = (h * T + t) * dHead + 2 * i, even = x[p], odd = x[p + 1];
        out[p] = even * cos - odd * sin;
        out[p + 1] = even * sin + odd * cos;
      }
    }
  }
  return out;
}
/* --8<-- [end:rope] */

/* A layer's keys or values (kv heads, n, d) at the positions a run computes, after those of
   the positions before them that `past` holds ({k, v, T, P}: the first P of its T positions,
   as a KV cache holds them): (kv heads, P + n, d). Without `past`, `fresh` itself. */
function afterPast(fresh, past, which, c) {
  if (!past || !past.P) return fresh;
  const d = c.dHead, n = fresh.length / (c.nKvHeads * d), P = past.P, T = P + n;
  const out = new Float32Array(c.nKvHeads * T * d);
  for (let h = 0; h < c.nKvHeads; h++) {
    out.set(past[which].subarray(h * past.T * d, (h * past.T + P) * d), h * T * d);
    out.set(fresh.subarray(h * n * d, (h + 1) * n * d), (h * T + P) * d);
  }
  return out;
}

/* --8<-- [start:grouped_attention] */
/* Causal attention in every query head, each reading the key/value head of its group
   (query head h reads key/value head floor(h / group)). q, k and v hold the queries, keys
   and values of n positions (heads, n, dHead); `past`, when given, the keys and values of
   the P positions before them (see afterPast), so that T = P + n keys are read. Returns
   the n queries' weights (heads, n, T; zero above the diagonal), raw scores q · k (heads,
   n, T; the causal part only), each head's output (heads, n, dHead) and the T keys and
   values (kv heads, T, dHead). */
export function groupedAttention(q, k, v, c, past = null) {
  k = afterPast(k, past, "k", c);
  v = afterPast(v, past, "v", c);
  const d = c.dHead, scale = 1 / Math.sqrt(d), n = q.length / (c.nHeads * d);
  const T = v.length / (c.nKvHeads * d), first = T - n;
  const weights = new Float64Array(c.nHeads * n * T), raw = new Float64Array(c.nHeads * n * T);
  const heads = new Float32Array(c.nHeads * n * d), out = new Float64Array(d);
  for (let h = 0; h < c.nHeads; h++) {
    const kv = Math.floor(h / c.group);
    for (let r = 0; r < n; r++) {
      const i = first + r; // the query's position
      const qi = (h * n + r) * d, row = (h * n + r) * T;
      let peak = -Infinity;
      for (let j = 0; j <= i; j++) { // the causal mask: keys 0..i only
        const kj = (kv * T + j) * d;
        let s = 0;
        for (let e = 0; e < d; e++) s += q[qi + e] * k[kj + e];
        raw[row + j] = s;
        if (s * scale > peak) peak = s * scale;
      }
      let sum = 0;
      for (let j = 0; j <= i; j++) { // softmax of the scaled scores, largest first set to 0
        const w = Math.exp(raw[row + j] * scale - peak);
        weights[row + j] = w;
        sum += w;
      }
      for (let j = 0; j <= i; j++) weights[row + j] /= sum;
      out.fill(0); // the output: the values, weighted (key by key, each value row read once)
      for (let j = 0; j <= i; j++) {
        const w = weights[row + j], vj = (kv * T + j) * d;
        for (let e = 0; e < d; e++) out[e] += w * v[vj + e];
      }
      for (let e = 0; e < d; e++) heads[qi + e] = out[e];
    }
  }
  return { weights: weights, raw: raw, heads: heads, k: k, v: v };
}
/* --8<-- [end:grouped_attention] */

/* --8<-- [start:decoder_layer] */
/* One Llama decoder layer: attention, then an MLP, each added back to the stream. `off`
   lists the query heads (from 0) switched off in this layer: their output becomes zero
   before W_O, as qkv.lab.interventions.HeadsOff does; their weights are left as they are.
   `attend`, when given, replaces groupedAttention: attend(q, k, v) returns what it does
   (at least the heads' outputs; patch.js runs a batch of patched variants through it). */
export function decoderLayer(x, layer, c, T, positions, off = [], past = null, attend = null) {
  const h = rmsNorm(x, T, c.dModel, layer.attnNorm, c.normEps); // (T, d_model)
  let q = splitHeads(matmul(h, T, layer.wQ), T, c.nHeads, c.dHead); // (9, T, 64)
  let k = splitHeads(matmul(h, T, layer.wK), T, c.nKvHeads, c.dHead); // (3, T, 64)
  const v = splitHeads(matmul(h, T, layer.wV), T, c.nKvHeads, c.dHead); // (3, T, 64)
  // position enters by rotating queries and keys; values are never rotated
  q = rope(q, c.nHeads, T, c.dHead, positions, c.ropeBase);
  k = rope(k, c.nKvHeads, T, c.dHead, positions, c.ropeBase);
  // each group of 3 query heads reads one key/value head; scores are scaled by 1/√64
  const att = attend ? attend(q, k, v) : groupedAttention(q, k, v, c, past); // past: a KV cache
  for (const head of off) att.heads.fill(0, head * T * c.dHead, (head + 1) * T * c.dHead); // HeadsOff
  const o = matmul(mergeHeads(att.heads, T, c.nHeads, c.dHead), T, layer.wO); // (T, d_model)
  const x2 = new Float32Array(x.length);
  for (let i = 0; i < x.length; i++) x2[i] = x[i] + o[i]; // back into the residual stream
  const h2 = rmsNorm(x2, T, c.dModel, layer.mlpNorm, c.normEps); // (T, d_model)
  const gate = matmul(h2, T, layer.wGate), up = matmul(h2, T, layer.wUp); // (T, d_mlp): SwiGLU
  for (let i = 0; i < gate.length; i++) gate[i] = silu(gate[i]) * up[i];
  const down = matmul(gate, T, layer.wDown); // (T, d_model)
  for (let i = 0; i < x2.length; i++) x2[i] += down[i];
  return { x: x2, k: att.k, v: att.v, weights: att.weights, raw: att.raw };
}
/* --8<-- [end:decoder_layer] */

/* Rows: the first P rows (of `width` numbers) of `earlier`, then `later`'s. */
function joinRows(earlier, P, later, width) {
  const out = new Float32Array((P * width) + later.length);
  out.set(earlier.subarray(0, P * width));
  out.set(later, P * width);
  return out;
}

/* (heads, T, T) weights or scores: the first P queries' rows from an earlier run (heads,
   pastT, pastT), the last n from this one (heads, n, T). */
function joinQueries(past, pastT, P, fresh, heads, n) {
  const T = P + n, out = new Float64Array(heads * T * T);
  for (let h = 0; h < heads; h++) {
    for (let i = 0; i < P; i++) {
      out.set(past.subarray((h * pastT + i) * pastT, (h * pastT + i) * pastT + i + 1), (h * T + i) * T);
    }
    out.set(fresh.subarray(h * n * T, (h + 1) * n * T), (h * T + P) * T);
  }
  return out;
}

/* How many leading ids two runs share. */
function sharedPrefix(a, b) {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) n++;
  return n;
}

/**
 * Run the model on token ids (all at once, causal mask); keep each layer's attention.
 * @param model what assemble returned
 * @param {number[]} ids 1 to maxTokens token ids
 * @param {function(number)} [onLayer] called after each layer with its number (from 1)
 * @param {{off?: number[][], reuse?: object, prefix?: object, rows?: number[]}} [options]
 *   off: [layer, head] pairs (from 0) switched off, as qkv.lab.interventions.HeadsOff does;
 *   reuse: an unedited run of the same ids: the layers before the first edited one are
 *   not run again, their input (the residual stream entering each layer) is taken from it;
 *   prefix: a run with the same heads off whose ids start as these do: the positions they
 *   share (all but the last, at most) are taken from it in every layer, as a KV cache
 *   would; a run with other heads off is not used;
 *   rows: the positions whose next-token log-probabilities are wanted (none by default:
 *   the output matrix, 49,152 x 576, is the largest in the model).
 * Each output is computed as without reuse or prefix: every position's arithmetic is the same.
 * @returns {{T, ids, weights: Float64Array[], raw: Float64Array[], inputs: Float32Array[],
 *            k, v, x, start, shared, logProbs: Float64Array[]}} weights and raw: one
 *   (heads, T, T) array per layer; inputs: the stream entering each layer; k and v: each
 *   layer's rotated keys and values; x: the final stream; start: the first layer run
 *   (the rest taken from `reuse`); shared: the positions taken from `prefix`
 */
export function forward(model, ids, onLayer, options = {}) {
  const c = model.config, T = ids.length, d = c.dModel;
  ids.forEach(function (id, t) {
    if (!(Number.isInteger(id) && id >= 0 && id < c.vocabSize)) {
      throw new RangeError("token id " + id + " at position " + t + " is out of range: ids must be in 0.." + (c.vocabSize - 1));
    }
  });
  const off = [];
  for (let i = 0; i < c.nLayers; i++) off.push([]);
  (options.off || []).forEach(function (pair) {
    const layer = pair[0], head = pair[1];
    if (!(Number.isInteger(layer) && Number.isInteger(head) && layer >= 0 && layer < c.nLayers &&
          head >= 0 && head < c.nHeads)) {
      throw new RangeError("head (" + layer + ", " + head + ") does not exist: layers are 0.." +
                           (c.nLayers - 1) + ", heads 0.." + (c.nHeads - 1));
    }
    if (off[layer].indexOf(head) < 0) off[layer].push(head);
  });
  const edit = off.map(function (heads) { return heads.slice().sort().join(","); }).join(";");
  const reuse = options.reuse && options.reuse.T === T && sharedPrefix(options.reuse.ids, ids) === T
    ? options.reuse : null;
  const prefix = options.prefix && options.prefix.edit === edit ? options.prefix : null;
  const P = prefix ? Math.min(sharedPrefix(prefix.ids, ids), T - 1) : 0, n = T - P;
  let start = 0; // the first layer that runs: the first edited one when a run can be reused
  if (reuse) while (start < c.nLayers - 1 && !off[start].length) start++;
  const positions = [];
  for (let t = P; t < T; t++) positions.push(t);
  const trace = { T: T, ids: ids.slice(), edit: edit, start: start, shared: P,
                  weights: [], raw: [], inputs: [], k: [], v: [] };
  for (let i = 0; i < start; i++) {
    ["weights", "raw", "inputs", "k", "v"].forEach(function (key) { trace[key].push(reuse[key][i]); });
  }
  let x; // (n, d_model): the stream at the positions this run computes
  if (start) {
    x = reuse.inputs[start].slice(P * d);
  } else {
    x = new Float32Array(n * d); // each token's row of the embedding
    positions.forEach(function (t, r) { model.embedding.row(ids[t], x.subarray(r * d, (r + 1) * d)); });
  }
  for (let i = start; i < c.nLayers; i++) {
    const past = P ? { k: prefix.k[i], v: prefix.v[i], T: prefix.T, P: P } : null;
    trace.inputs.push(P ? joinRows(prefix.inputs[i], P, x, d) : x);
    const seen = decoderLayer(x, model.layers[i], c, n, positions, off[i], past);
    x = seen.x;
    trace.k.push(seen.k);
    trace.v.push(seen.v);
    trace.weights.push(P ? joinQueries(prefix.weights[i], prefix.T, P, seen.weights, c.nHeads, n) : seen.weights);
    trace.raw.push(P ? joinQueries(prefix.raw[i], prefix.T, P, seen.raw, c.nHeads, n) : seen.raw);
    if (onLayer) onLayer(i + 1);
  }
  trace.x = P ? joinRows(prefix.x, P, x, d) : x;
  const rows = options.rows || [];
  trace.logProbs = rows.length ? logProbs(model, trace.x, rows) : [];
  return trace;
}

/* Direct logit attribution at `position` (from 0) of logit(a) − logit(b), as
   qkv.lab.attribution.direct_logit_attribution computes it: with x the final stream there,
   rms = sqrt(mean(x²) + eps) frozen and u = gain ⊙ (E[a] − E[b]) / rms, each head's share is
   (its output at the position, before W_O) @ W_O's slice · u, each MLP's what its layer added
   to the stream beyond its heads · u, and the embedding's E[id] · u; they add up to x · u.
   Computed in float64 from the trace's weights, values and streams.
   @returns {{heads: Float64Array, mlps: Float64Array, embedding: number, total: number,
              scale: number}} heads: (n_layers, n_heads), row by row */
export function directLogitAttribution(model, trace, position, a, b) {
  const c = model.config, d = c.dModel, T = trace.T, H = c.nHeads, dh = c.dHead, group = H / c.nKvHeads;
  const row = (matrix, i) => matrix.row(i, new Float32Array(matrix.nIn));
  const ea = row(model.embedding, a), eb = row(model.embedding, b);
  const at = (stream) => stream.subarray(position * d, (position + 1) * d);
  const x = at(trace.x);
  let ss = 0;
  for (let i = 0; i < d; i++) ss += x[i] * x[i];
  const scale = Math.sqrt(ss / d + c.normEps);
  const u = new Float64Array(d);
  for (let i = 0; i < d; i++) u[i] = model.finalNorm[i] * (ea[i] - eb[i]) / scale;
  const dot = (vec) => { let s = 0; for (let i = 0; i < d; i++) s += vec[i] * u[i]; return s; };
  const heads = new Float64Array(c.nLayers * H), mlps = new Float64Array(c.nLayers);
  const wRow = new Float32Array(H * dh);
  for (let l = 0; l < c.nLayers; l++) {
    const w = trace.weights[l], v = trace.v[l], wu = new Float64Array(H * dh); // W_O.T @ u
    for (let r = 0; r < d; r++) {
      model.layers[l].wO.row(r, wRow);
      for (let k = 0; k < H * dh; k++) wu[k] += wRow[k] * u[r];
    }
    let attention = 0;
    for (let h = 0; h < H; h++) {
      const g = Math.floor(h / group);
      let share = 0;
      for (let k = 0; k < dh; k++) {
        let o = 0; // head h's output at the position, component k
        for (let j = 0; j <= position; j++) o += w[(h * T + position) * T + j] * v[(g * T + j) * dh + k];
        share += o * wu[h * dh + k];
      }
      heads[l * H + h] = share;
      attention += share;
    }
    const after = at(l + 1 < c.nLayers ? trace.inputs[l + 1] : trace.x), before = at(trace.inputs[l]);
    let added = 0;
    for (let i = 0; i < d; i++) added += (after[i] - before[i]) * u[i];
    mlps[l] = added - attention;
  }
  return { heads: heads, mlps: mlps, embedding: dot(row(model.embedding, trace.ids[position])), total: dot(x),
           scale: scale };
}

/* Next-token log-probabilities at the positions `rows` of the final stream x (T, d_model):
   the final RMSNorm, a dot product with every token's embedding (the weights are tied, as
   qkv.smollm2.output_logits computes them), then a log-softmax in float64. */
export function logProbs(model, x, rows) {
  const c = model.config, d = c.dModel, picked = new Float32Array(rows.length * d);
  rows.forEach(function (t, r) { picked.set(x.subarray(t * d, (t + 1) * d), r * d); });
  const h = rmsNorm(picked, rows.length, d, model.finalNorm, c.normEps); // (rows, d_model)
  const logits = matmul(h, rows.length, model.embedding); // (rows, vocab_size)
  return rows.map(function (_, r) {
    const row = logits.subarray(r * c.vocabSize, (r + 1) * c.vocabSize), out = new Float64Array(c.vocabSize);
    let peak = -Infinity, sum = 0;
    for (let i = 0; i < row.length; i++) if (row[i] > peak) peak = row[i];
    for (let i = 0; i < row.length; i++) sum += Math.exp(row[i] - peak);
    const log = Math.log(sum);
    for (let i = 0; i < row.length; i++) out[i] = row[i] - peak - log;
    return out;
  });
}

/* The k likeliest tokens of a row of log-probabilities: ids and probabilities, likeliest
   first (ties: lower id first, as NumPy's stable argsort of -p). */
export function topTokens(logp, k) {
  const best = [];
  for (let i = 0; i < logp.length; i++) {
    if (best.length < k || logp[i] > logp[best[best.length - 1]]) {
      let at = best.length;
      while (at > 0 && logp[best[at - 1]] < logp[i]) at--;
      best.splice(at, 0, i);
      if (best.length > k) best.pop();
    }
  }
  return { ids: best, probs: best.map(function (i) { return Math.exp(logp[i]); }) };
}

/* KL(p || q) in nats, of two rows of log-probabilities: how far the edited model's next
   token distribution q moved from the model's own p (0 when they are equal). */
export function klDivergence(logp, logq) {
  let kl = 0;
  for (let i = 0; i < logp.length; i++) {
    const p = Math.exp(logp[i]);
    if (p > 0) kl += p * (logp[i] - logq[i]);
  }
  return kl;
}

/* ---- what the explorer shows: qkv_site.smollm2_data.sentence_data, unrounded ------------ */

/* Causal softmax of one row of scores (keys 0..i), in float64. */
function softmaxRow(scores, from, n, scale, out, at) {
  let peak = -Infinity;
  for (let j = 0; j < n; j++) peak = Math.max(peak, scores[from + j] * scale);
  let sum = 0;
  for (let j = 0; j < n; j++) { out[at + j] = Math.exp(scores[from + j] * scale - peak); sum += out[at + j]; }
  for (let j = 0; j < n; j++) out[at + j] /= sum;
}

/**
 * The explorer's tables for one run, like the built sentences' files but not rounded:
 * per layer and head a flat causal triangle (query P's keys start at P(P-1)/2, P from 1).
 * raw: q · k; scaled: q · k / √d_head (what the model's softmax sees); weights[s]: s = 0 the
 * softmax of the raw scores, s = 1 of the scaled ones (the model's own weights); entropy[s]:
 * one per query, in nats.
 */
export function attentionTables(trace, c) {
  const T = trace.T, tri = T * (T + 1) / 2, n = c.nLayers * c.nHeads;
  const raw = new Float64Array(n * tri), scaled = new Float64Array(n * tri);
  const weights = [new Float64Array(n * tri), new Float64Array(n * tri)];
  const entropy = [new Float64Array(n * T), new Float64Array(n * T)];
  const scales = [1, 1 / Math.sqrt(c.dHead)];
  for (let l = 0; l < c.nLayers; l++) {
    for (let h = 0; h < c.nHeads; h++) {
      const table = l * c.nHeads + h, src = trace.raw[l];
      for (let i = 0; i < T; i++) {
        const from = (h * T + i) * T, at = table * tri + i * (i + 1) / 2;
        for (let j = 0; j <= i; j++) {
          raw[at + j] = src[from + j];
          scaled[at + j] = src[from + j] * scales[1];
        }
        for (let s = 0; s < 2; s++) {
          softmaxRow(src, from, i + 1, scales[s], weights[s], at);
          let e = 0;
          for (let j = 0; j <= i; j++) {
            const w = weights[s][at + j];
            if (w > 0) e -= w * Math.log(w);
          }
          entropy[s][table * T + i] = e;
        }
      }
    }
  }
  return { raw: raw, scaled: scaled, weights: weights, entropy: entropy };
}
