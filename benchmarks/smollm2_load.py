"""How long SmolLM2-135M-Instruct takes to load (cold: read and dequantize the GGUF file; warm: map
the cache folder; in memory) and to run, measured in one run.

    python benchmarks/smollm2_load.py

The cold load writes into a temporary cache folder, so the user's cache is left alone.
"""

from __future__ import annotations

import tempfile
import time

import numpy as np
from qkv_site.smollm2_data import MAX_TOKENS  # the longest text the site's explorer runs
from threadpoolctl import threadpool_limits

from qkv import smollm2

SENTENCE = "The cat sat on the mat because it was warm"


def timed(fn, repeat=1):
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    with tempfile.TemporaryDirectory() as cache, threadpool_limits(1, user_api="blas"):
        smollm2.unload()
        cold, _ = timed(lambda: smollm2.load(cache_dir=cache))
        smollm2.unload()
        warm, model = timed(lambda: smollm2.load(cache_dir=cache))
        in_memory, _ = timed(lambda: smollm2.load(cache_dir=cache), repeat=3)
        ids = model.encode(SENTENCE)
        first, _ = timed(lambda: smollm2.forward(model, ids))  # pages the weights in
        forward, _ = timed(lambda: smollm2.forward(model, ids), repeat=5)
        cached, _ = timed(lambda: smollm2.decode_cached(model, ids), repeat=3)
        uncached, _ = timed(lambda: smollm2.decode_uncached(model, ids), repeat=3)
        longest = np.resize(ids, MAX_TOKENS)
        full, _ = timed(lambda: smollm2.forward(model, longest), repeat=3)
    print(
        f"load: cold {cold:.2f} s, warm {warm:.2f} s, in memory {in_memory * 1e3:.2f} ms "
        f"(cold / warm = {cold / warm:.0f}x)"
    )
    print(
        f"forward, {len(ids)} tokens: first {first:.2f} s, then {forward * 1e3:.0f} ms; "
        f"{MAX_TOKENS} tokens: {full * 1e3:.0f} ms"
    )
    print(
        f"token by token, {len(ids)} tokens: with cache {cached * 1e3:.0f} ms, without "
        f"{uncached * 1e3:.0f} ms (without / with = {uncached / cached:.1f}x)"
    )


if __name__ == "__main__":
    main()
