/* The WebAssembly matrix product (matmul.wat, assembled into matmul.wasm) and its memory.
 *
 * smollm2.js's `matmul` is the JavaScript product; this one computes the same sums with
 * 128-bit SIMD (four float32 products at a time), several times faster. It reads the weights
 * where they lie, so the model file is put inside the WebAssembly memory: the worker reads
 * the download straight into it (`fileBuffer`), and every tensor the file lists is a view of
 * that memory. The memory never grows (growing would detach those views): its size is fixed
 * when the file's size is known.
 *
 * Layout of the memory, in bytes:
 *   0            the float16 table: 65,536 float32 values, one per half-precision pattern
 *   ROWS         two rows of dequantized weights (at most MAX_IN numbers each)
 *   X            the input x of a product, (tokens, nIn) float32, at most X_FLOATS numbers
 *   Y            its output y, (tokens, nOut) float32, at most Y_FLOATS numbers
 *   PACKED       x again, its tokens in groups of four (the product's own copy)
 *   FILE         the model file
 * A product with more tokens than X and Y hold runs in slices of tokens; each output is the
 * same sum whatever the slice.
 *
 * Without WebAssembly SIMD (WebAssembly.validate refuses the module) or if the module does
 * not load, `compileKernel` gives null and the worker keeps the JavaScript product.
 *
 * Content-Security-Policy: compiling WebAssembly needs 'wasm-unsafe-eval' wherever a policy
 * applies. The site's policy is a <meta> element in each page; a worker started from a
 * script URL is governed by the policy its own response carries (none from a static host),
 * not the page's, so the product compiles in the worker under the site's policy (Chromium
 * 156; tests/browser/test_model_in_browser.py checks that the worker reports "wasm-simd").
 * A host that sent a policy header without 'wasm-unsafe-eval' would get the JavaScript
 * product, with the same numbers.
 */

const PAGE = 65536;
const MAX_IN = 4096; // the widest row a product dequantizes here (SmolLM2's widest: 1,536)
const ROWS = 65536 * 4;
const X = ROWS + 2 * MAX_IN * 4;
const X_FLOATS = 64 * 1536; // 64 tokens of the MLP's 1,536 numbers
const Y = X + X_FLOATS * 4;
const Y_FLOATS = 16 * 49152; // 16 rows of logits over the whole vocabulary
const PACKED = Y + Y_FLOATS * 4;
const FILE = Math.ceil((PACKED + X_FLOATS * 4) / PAGE) * PAGE;
const KINDS = { Q4_1: 0, Q8_0: 1 };

/**
 * Fetch and compile matmul.wasm (beside this file).
 * @returns {Promise<WebAssembly.Module|null>} null without WebAssembly SIMD or on any failure
 */
export async function compileKernel(url) {
  try {
    if (typeof WebAssembly !== "object") return null;
    const response = await fetch(url);
    if (!response.ok) return null;
    const bytes = await response.arrayBuffer();
    if (!WebAssembly.validate(bytes)) return null; // no SIMD in this browser
    return await WebAssembly.compile(bytes);
  } catch (err) {
    return null; // e.g. a policy that forbids compiling WebAssembly: the JavaScript product
  }
}

/**
 * Make the memory for a model file of `fileBytes` bytes and instantiate the module in it.
 * @param {WebAssembly.Module} module what compileKernel gave
 * @param {number} fileBytes the model file's size
 * @param {Float32Array} f16 the value of every float16 bit pattern (65,536 numbers)
 * @returns {{fileBuffer: Uint8Array, covers: function, matmul: function}} fileBuffer: where
 *   the file goes (fileBytes bytes); covers(W): whether this product computes x @ W.T;
 *   matmul(x, T, W): it, a new Float32Array (T, W.nOut)
 */
export function makeKernel(module, fileBytes, f16) {
  const pages = Math.ceil((FILE + fileBytes) / PAGE);
  const memory = new WebAssembly.Memory({ initial: pages, maximum: pages });
  const product = new WebAssembly.Instance(module, { env: { memory: memory } }).exports.matmul;
  const heap = memory.buffer;
  new Float32Array(heap, 0, 65536).set(f16);
  const xs = new Float32Array(heap, X, X_FLOATS), ys = new Float32Array(heap, Y, Y_FLOATS);

  function covers(W) {
    return W.bytes.buffer === heap && W.type in KINDS && W.nOut % 2 === 0 && W.nIn <= MAX_IN &&
      W.nIn % 32 === 0 && W.nIn <= X_FLOATS && W.nOut <= Y_FLOATS;
  }

  function matmul(x, T, W) {
    const nIn = W.nIn, nOut = W.nOut, y = new Float32Array(T * nOut);
    const slice = Math.min(Math.floor(X_FLOATS / nIn), Math.floor(Y_FLOATS / nOut));
    for (let t0 = 0; t0 < T; t0 += slice) {
      const n = Math.min(slice, T - t0);
      xs.set(x.subarray(t0 * nIn, (t0 + n) * nIn));
      product(KINDS[W.type], W.bytes.byteOffset, nIn, nOut, 0, nOut, X, n, Y, ROWS, PACKED, 0);
      y.set(ys.subarray(0, n * nOut), t0 * nOut);
    }
    return y;
  }

  return { fileBuffer: new Uint8Array(heap, FILE, fileBytes), covers: covers, matmul: matmul };
}
