"""Memory and time of qkv.tiled_attention against qkv.attention and torch's SDPA, and
qkv.online_softmax against qkv.softmax.

float32, one head, d_k = d_v = 64. Every ratio is measured in this one run (the machine
may be shared and busy: compare ratios, not seconds, and run it more than once).

- peak memory (tracemalloc, which sees NumPy's buffers) of ``tiled_attention`` against
  ``attention`` at T = 16,384; goal: at most 1/32;
- time of ``tiled_attention`` (its default blocks, 1,024 queries by 2,048 keys) against
  ``attention`` at T = 4,096, 8,192 and 16,384 (best of several runs, alternated); goal: at
  most 1.5x at every T >= 4,096. Measured with one BLAS thread (on a shared, busy machine
  a second thread mostly waits, and waits longer in many small products than in one large
  one) and again with all of NumPy's BLAS threads;
- time against torch's ``scaled_dot_product_attention`` (CPU, same thread count), for
  scale: no goal, NumPy is not a fused kernel;
- ``online_softmax`` against ``softmax`` on one row of 1,000,000 float64 scores; goal:
  at most 2x;
- with ``--blocks``: a sweep of block sizes at T = 4,096 (how the defaults were chosen);
- with ``--linear``: linear against softmax attention (float32) across T, and the first T
  at which linear attention is faster in this run.

    python benchmarks/tiled_attention.py [--blocks] [--linear]
"""

from __future__ import annotations

import argparse
import os
import time
import tracemalloc

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

import qkv

D = 64
TIME_T = (4096, 8192, 16384)
MEMORY_T = 16384


def inputs(t: int, dtype=np.float32):
    rng = np.random.default_rng(t)
    return tuple(rng.standard_normal((t, D), dtype=np.float64).astype(dtype) for _ in range(3))


def peak_bytes(fn) -> int:
    """The largest amount of memory allocated at once while ``fn`` runs (inputs excluded)."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def best_of_alternating(fns: dict, repeats: int) -> dict:
    """Best time of each function, the functions run in turn so load hits all alike."""
    for fn in fns.values():
        fn()  # warm-up
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def memory() -> float:
    q, k, v = inputs(MEMORY_T)
    full = peak_bytes(lambda: qkv.attention(q, k, v))
    tiled = peak_bytes(lambda: qkv.tiled_attention(q, k, v))
    ratio = tiled / full
    print(f"peak memory at T = {MEMORY_T:,}: attention {full / 2**20:,.1f} MiB, ", end="")
    print(f"tiled_attention {tiled / 2**20:,.1f} MiB, ratio 1/{full / tiled:.0f}")
    print(f"  goal <= 1/32: {'met' if ratio <= 1 / 32 else 'NOT met'}")
    return ratio


def timing(with_torch: bool, threads: int) -> float:
    torch = None
    if with_torch:
        try:
            import torch

            torch.set_num_threads(threads)  # the same threads as NumPy's BLAS
        except ImportError:
            print("(torch is not installed: no comparison with scaled_dot_product_attention)")
    print(f"time with {threads} thread(s) for NumPy's BLAS{' and torch' if torch else ''}:")
    print(f"{'T':>6} {'attention s':>12} {'tiled s':>9} {'tiled/attention':>16}", end="")
    print(f" {'torch s':>9} {'tiled/torch':>12}" if torch else "")
    worst = 0.0
    for t in TIME_T:
        q, k, v = inputs(t)
        fns = {
            "attention": lambda q=q, k=k, v=v: qkv.attention(q, k, v),
            "tiled": lambda q=q, k=k, v=v: qkv.tiled_attention(q, k, v),
        }
        if torch:
            tq, tk, tv = (torch.from_numpy(a)[None] for a in (q, k, v))

            def sdpa(tq=tq, tk=tk, tv=tv):
                with torch.no_grad():
                    return torch.nn.functional.scaled_dot_product_attention(tq, tk, tv)

            fns["torch"] = sdpa
        best = best_of_alternating(fns, repeats=5 if t <= 4096 else 3)
        ratio = best["tiled"] / best["attention"]
        worst = max(worst, ratio)
        print(f"{t:>6} {best['attention']:>12.3f} {best['tiled']:>9.3f} {ratio:>16.2f}", end="")
        print(f" {best['torch']:>9.3f} {best['tiled'] / best['torch']:>12.1f}" if torch else "")
    print(f"worst tiled/attention {worst:.2f} (goal <= 1.5): {'met' if worst <= 1.5 else 'NOT met'}")
    return worst


def softmax_row() -> float:
    z = np.random.default_rng(0).normal(size=1_000_000) * 10
    best = best_of_alternating(
        {"softmax": lambda: qkv.softmax(z), "online": lambda: qkv.online_softmax(z)}, 15
    )
    ratio = best["online"] / best["softmax"]
    print(
        f"1M-score row: softmax {best['softmax'] * 1e3:.2f} ms, online_softmax "
        f"{best['online'] * 1e3:.2f} ms, ratio {ratio:.2f} (goal <= 2): {'met' if ratio <= 2 else 'NOT met'}"
    )
    return ratio


def blocks() -> None:
    t = 4096
    q, k, v = inputs(t)
    sizes = [(bq, bk) for bq in (256, 512, 1024, 2048) for bk in (512, 1024, 2048, 4096)]
    fns = {"attention": lambda: qkv.attention(q, k, v)}
    for bq, bk in sizes:
        fns[(bq, bk)] = lambda bq=bq, bk=bk: qkv.tiled_attention(q, k, v, block_q=bq, block_k=bk)
    best = best_of_alternating(fns, repeats=3)
    print(f"block sizes at T = {t}: time relative to attention (lower is better)")
    for bq, bk in sizes:
        print(f"  block_q {bq:>5} block_k {bk:>5}: {best[(bq, bk)] / best['attention']:.2f}")


def linear() -> None:
    print("linear_attention / attention time (float32, d = 64), and the flop ratio")
    crossed = None
    for t in (16, 32, 64, 128, 256, 512, 1024, 2048):
        q, k, v = inputs(t)
        fns = {
            "softmax": lambda q=q, k=k, v=v: qkv.attention(q, k, v),
            "linear": lambda q=q, k=k, v=v: qkv.linear_attention(q, k, v),
        }
        best = best_of_alternating(fns, 20)
        ratio = best["linear"] / best["softmax"]
        flops = qkv.linear_attention_flops(t, D, D) / qkv.attention_flops(t, t, D, D)
        print(f"  T = {t:>5}: time ratio {ratio:.2f}, flop ratio {flops:.2f}")
        if crossed is None and ratio < 1:
            crossed = t
    print(f"first T where linear attention was faster in this run: {crossed}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", action="store_true", help="sweep the block sizes at T = 4,096")
    parser.add_argument("--linear", action="store_true", help="linear against softmax attention")
    parser.add_argument("--no-torch", action="store_true", help="skip torch's SDPA")
    args = parser.parse_args()
    blas = max((p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"), default=0)
    print(
        f"numpy {np.__version__}, BLAS threads {blas}, cores {os.cpu_count()}, load {os.getloadavg()[0]:.1f}"
    )
    if args.blocks:
        blocks()
    memory()
    for threads in sorted({1, blas}):
        with threadpool_limits(threads):
            timing(with_torch=not args.no_torch, threads=threads)
    softmax_row()
    if args.linear:
        linear()


if __name__ == "__main__":
    main()
