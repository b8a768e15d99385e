/* Patching on several of the reader's cores: a pool of dedicated Web Workers (worker.js), each
 * with its own WebAssembly memory and its own copy of the model, talking by messages only. No
 * SharedArrayBuffer, so no cross-origin isolation (which GitHub Pages cannot send) is needed.
 *
 * The page's own model worker (trained.js starts it and downloads the file into it) is the
 * pool's first worker. The others are started for patching: each gets a copy of the file's
 * bytes from the first (transferred, never fetched again) and assembles the model itself, with
 * the same matrix product as the first (a worker whose product differs, WebAssembly or the
 * plain-JavaScript fallback, is stopped and not used: its cells would differ in the last bits).
 * patch.js's plan() cuts the work into one batch per layer; the batches are shared out by
 * their cost (work(): early layers rerun more layers, so they cost more), the costliest first,
 * each to the worker with the least work so far; every worker records the pair itself and runs
 * its batches. A batch's cells do not depend on which worker runs it, so they are the one-worker
 * run's, bit for bit.
 *
 *   const pool = makePool(primary, product);        // primary: the page's model Worker
 *   pool.planned() -> { k, cores, reason }          // how many workers a run will use
 *   pool.patch(message, { onStart, onCells, onProgress }) -> Promise<{ k, seconds }>
 *       message: { kind, texts, conts, maxTokens }, as worker.js's "patch" takes it; onStart
 *       gets "patch-start"'s fields, onCells each "patched" (done and total summed over the
 *       workers), onProgress({ done, total }); rejects with { kind, message } on an error, or
 *       { kind: "cancelled" } when cancelled
 *   pool.cancel()                                   // stops every worker's job; the started
 *                                                    // workers are terminated (memory freed)
 *   pool.live() -> number                           // workers alive now, the first included
 *
 * Forcing K (tests, benchmarks): globalThis.QKV_WORKERS = n before the run, or ?workers=n in
 * the page's address.
 */

/* At most 4 workers. Each holds its own copy of the model: the 98 MB file in its WebAssembly
   memory, what is unpacked from it, and the pair's recorded runs and a batch's activations
   while patching; 4 copies already ask several hundred MB of one browser tab. And the gain
   falls off: the 30 batches rerun 30, 29, ..., 1 layers (465 in all), each worker's copy takes a
   second or more to start, and the page itself, the reader's other tabs and the system need a
   core too; most laptops have 4 to 8. */
export const MAX_WORKERS = 4;
const PER_WORKER_GB = 0.25; // one copy of the model with its patching activations, rounded up

function forced() {
  const given = globalThis.QKV_WORKERS ?? new URLSearchParams((globalThis.location && location.search) || "")
    .get("workers");
  const k = Number(given);
  return Number.isInteger(k) && k >= 1 ? Math.min(k, 8) : null;
}

/* How many workers to use, and why: the cores the browser reports, the memory it reports
   (navigator.deviceMemory, in GB, Chromium only, at most 8; a quarter of it for the copies of
   the model), the cap. Where the memory is unknown (Firefox, Safari), two workers. */
export function chooseK() {
  const cores = Math.max(1, Number(globalThis.navigator && navigator.hardwareConcurrency) || 1);
  const k = forced();
  if (k) return { k: k, cores: cores, reason: "forced" };
  const memory = Number(globalThis.navigator && navigator.deviceMemory) || 0;
  const byMemory = memory ? Math.floor(memory / 4 / PER_WORKER_GB) : 2;
  if (byMemory < 2) return { k: 1, cores: cores, reason: "memory" };
  return { k: Math.max(1, Math.min(cores, byMemory, MAX_WORKERS)), cores: cores, reason: "cores" };
}

export function makePool(primary, product) {
  const helpers = []; // [{ worker, ready: Promise }], started for patching, beyond the first
  let nextId = 1, run = null;

  /* One request to a worker, answered by the message whose type is `until` (or an error). */
  function ask(worker, message, until, onOther) {
    const id = "pool-" + nextId++;
    return new Promise((resolve, reject) => {
      const listen = (event) => {
        const msg = event.data || {};
        if (msg.id !== id) return;
        if (msg.type === until || msg.type === "error" || msg.type === "patch-cancelled") {
          worker.removeEventListener("message", listen);
          worker.removeEventListener("error", died);
          if (msg.type === until) resolve(msg);
          else reject(msg.type === "error" ? msg : { kind: "cancelled" });
        } else if (onOther) {
          onOther(msg);
        }
      };
      const died = (event) => {
        worker.removeEventListener("message", listen);
        reject({ kind: "crashed", message: "A patching worker stopped (" + (event.message || "out of memory?") + ")." });
      };
      worker.addEventListener("message", listen);
      worker.addEventListener("error", died);
      message.id = id;
      if (message.buffer) worker.postMessage(message, [message.buffer]); else worker.postMessage(message);
      if (run) run.asked.push({ worker: worker, id: id });
    });
  }

  /* A started worker with the model loaded, or null when it could not load it, or loaded it
     with another matrix product. */
  function startHelper() {
    const worker = new Worker(new URL("worker.js", import.meta.url), { type: "module" });
    const entry = { worker: worker, ready: null };
    entry.ready = ask(primary, { type: "file" }, "file").then((got) => new Promise((resolve) => {
      const loaded = (event) => {
        const msg = event.data || {};
        if (msg.type !== "loaded" && !(msg.type === "error" && msg.id === undefined)) return;
        worker.removeEventListener("message", loaded);
        resolve(msg.type === "loaded" && msg.product === product);
      };
      worker.addEventListener("message", loaded);
      worker.addEventListener("error", () => resolve(false));
      worker.postMessage({ type: "load", buffer: got.buffer, wasm: product === "wasm-simd" }, [got.buffer]);
    })).catch(() => false).then((ok) => {
      if (!ok) drop(entry);
      return ok;
    });
    helpers.push(entry);
    return entry;
  }

  function drop(entry) {
    entry.worker.terminate();
    const i = helpers.indexOf(entry);
    if (i >= 0) helpers.splice(i, 1);
  }

  /* The batches shared out: the costliest first, each to the worker with the least work. */
  function share(batches, k) {
    const loads = new Array(k).fill(0), lists = Array.from({ length: k }, () => []);
    batches.slice().sort((a, b) => b.cost - a.cost || a.layer - b.layer).forEach((b) => {
      const w = loads.indexOf(Math.min(...loads));
      loads[w] += b.cost;
      lists[w].push(b.layer);
    });
    return lists;
  }

  async function patch(message, on) {
    cancel();
    const me = { cancelled: false, asked: [] };
    me.stopped = new Promise((_, reject) => { me.stop = () => reject({ kind: "cancelled" }); });
    me.stopped.catch(() => {});
    run = me;
    const started = performance.now(), want = chooseK().k;
    helpers.slice(Math.max(0, want - 1)).forEach(drop); // more than this run uses: freed
    while (helpers.length < want - 1) startHelper(); // their copies of the file are asked for first
    const starting = helpers.slice();
    const recorded = await Promise.race([
      ask(primary, Object.assign({ type: "patch-record" }, message), "patch-recorded"), me.stopped]);
    // the shares are made for every worker asked for; the first starts on its own at once, each
    // other when it has loaded the model, and the share of one that could not load (or loaded
    // another matrix product) goes to the first, after its own
    const k = 1 + starting.length, lists = share(recorded.batches, k), total = recorded.total;
    const done = new Array(k).fill(0), before = new Array(k).fill(0); // each worker's work: this job's, its earlier jobs'
    let cells = 0, told = 0, used = 1;
    const progress = () => done.concat(before).reduce((s, x) => s + x, 0);
    on.onStart(Object.assign({}, recorded, { k: k }));
    const runOn = (worker, w, layers) => (layers.length ? ask(worker,
      Object.assign({ type: "patch-batches", layers: layers }, message), "patch-ran", (msg) => {
        if (me.cancelled) return;
        if (msg.type === "patch-progress") {
          done[w] = msg.done;
          const now = performance.now();
          if (now - told > 100) { told = now; on.onProgress({ done: progress(), total: total }); }
        } else if (msg.type === "patched") {
          done[w] = msg.done;
          cells++;
          on.onCells(Object.assign({}, msg, { done: progress(), total: total, last: cells === recorded.batches.length,
                                              seconds: (performance.now() - started) / 1000, k: used }));
        }
      }).then((msg) => { before[w] += done[w]; done[w] = 0; return msg; }) : Promise.resolve());
    let first = runOn(primary, 0, lists[0]);
    const others = starting.map((entry, i) => Promise.race([entry.ready, me.stopped]).then((ok) => {
      if (ok) { used++; return runOn(entry.worker, i + 1, lists[i + 1]); }
      first = first.then(() => runOn(primary, 0, lists[i + 1]));
      return first;
    }));
    const jobs = others.concat([first]);
    try {
      await Promise.race([Promise.all(jobs), me.stopped]);
      await Promise.race([first, me.stopped]); // a share it took over may have been queued meanwhile
    } catch (err) {
      if (run === me) cancel();
      throw err;
    }
    if (run === me) run = null;
    return { k: used, seconds: (performance.now() - started) / 1000 };
  }

  /* Stop the run: the first worker's job is cancelled (it stays, the lab needs it), the
     others are terminated, and their memory with them. */
  function cancel() {
    if (run) {
      run.cancelled = true;
      run.stop();
      run.asked.filter((a) => a.worker === primary).forEach((a) => primary.postMessage({ type: "patch-cancel", id: a.id }));
      run = null;
    }
    helpers.slice().forEach(drop);
  }

  return {
    planned: chooseK,
    patch: patch,
    cancel: cancel,
    live: () => 1 + helpers.length,
  };
}
