"""Time qkv.attention against torch's scaled_dot_product_attention on the CPU.

float32, one head, T in (256, 1024, 4096), d_k = d_v = 64, the same thread count for
both libraries, best of several runs. Prints the ratio qkv / torch for each size, measured
in this one run (machines are noisy: compare ratios, not seconds). Goal: ratio <= 1.5.

    python benchmarks/attention_vs_torch.py
"""

from __future__ import annotations

import os
import time

import numpy as np
import torch
import torch.nn.functional as F
from threadpoolctl import threadpool_info

import qkv

REPEATS = {256: 50, 1024: 15, 4096: 5}
D = 64


def best_of(fn, repeats: int) -> float:
    fn()  # warm-up: first-touch allocation, lazy init
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    blas_threads = max(pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas")
    torch.set_num_threads(blas_threads)
    print(
        f"threads: numpy BLAS {blas_threads}, torch {torch.get_num_threads()}; "
        f"cores {os.cpu_count()}; torch {torch.__version__}, numpy {np.__version__}"
    )
    print(f"{'T':>6} {'qkv ms':>9} {'torch ms':>9} {'qkv/torch':>10}")
    worst = 0.0
    for t, repeats in REPEATS.items():
        rng = np.random.default_rng(t)
        q, k, v = (rng.standard_normal((t, D), dtype=np.float32) for _ in range(3))
        tq, tk, tv = (torch.from_numpy(a)[None] for a in (q, k, v))

        def run_torch(tq=tq, tk=tk, tv=tv):
            with torch.no_grad():
                return F.scaled_dot_product_attention(tq, tk, tv)

        ours = best_of(lambda q=q, k=k, v=v: qkv.attention(q, k, v), repeats)
        theirs = best_of(run_torch, repeats)
        worst = max(worst, ours / theirs)
        print(f"{t:>6} {ours * 1e3:>9.2f} {theirs * 1e3:>9.2f} {ours / theirs:>10.2f}")
    print(f"worst ratio {worst:.2f} (goal <= 1.5): {'met' if worst <= 1.5 else 'NOT met'}")


if __name__ == "__main__":
    main()
