"""Time the site build: cold (empty artifact cache), warm (nothing changed), and without
artifacts; and what the cold build spends its CPU on.

All three are measured in this one run, on the same machine state, each into its own
output folder and with its own artifact cache (the qkv-artifacts plugin's, ``QKV_CACHE``):

1. cold:   an empty cache, so every figure, snippet, the notebook and the explorer data
           are computed (the trained model's weights are dequantized first, untimed: the
           weight cache lives outside the tree and a machine that built once has it);
2. warm:   the same cache again, nothing changed, so everything comes from the cache;
3. off:    ``QKV_ARTIFACTS=false``, nothing computed or read (figures become a line of text).

One untimed build first warms the OS file cache. Goals on the 2-core build machine (issue
24): cold at most 75 s wall, warm at most 1.2x off. Each timing is the best of ``--repeat``
runs (default 1); machines are noisy, so the load average is printed before and after.

The cold build also writes each computed artifact's CPU seconds (the plugin's ``timings``
option, ``QKV_TIMINGS``); printed are the ten slowest artifacts (a figure, the notebook, the
explorer's data, one snippet block) and the ten slowest snippet sessions (the blocks of one
``session=`` on one page, summed).

    python benchmarks/build_times.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WARM_OVER_OFF_GOAL = 1.2
COLD_GOAL_S = 75.0
SLOWEST = 10


def build(out: Path, **env: str) -> tuple[float, float]:
    """Wall and CPU seconds (all processes) of one ``mkdocs build --strict`` into ``out``.

    CPU time barely depends on what else the machine runs; wall time does. Exits (status 1,
    with mkdocs' log) if the build fails: the time of a failing build measures nothing. No
    ``--quiet``: it would hide the warnings that ``--strict`` turns into a failure.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1", **env},
    )
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(
            f"the timed build failed (exit {done.returncode}; env {env}):\n{done.stdout[-5000:]}\n"
            f"{done.stderr[-5000:]}"
        )
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return seconds, cpu


def dequantize_model() -> None:
    """Fill the trained model's weight cache (outside the tree), untimed; exits if it fails."""
    done = subprocess.run(
        [sys.executable, "-c", "from qkv import smollm2; smollm2.load()"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        sys.exit(f"loading the trained model failed:\n{done.stderr[-5000:]}")


def slowest(rows: list[dict]) -> tuple[list[tuple[float, str]], list[tuple[float, str]]]:
    """The slowest artifacts and the slowest snippet sessions of a ``timings`` file."""
    artifacts = sorted(((r["cpu_s"], f"{r['kind']}: {r['source']}") for r in rows), reverse=True)
    sessions: dict[str, float] = {}
    for row in rows:
        # "docs/x.md (session 'y', block 3)" -> "docs/x.md (session 'y')"
        if row["kind"] == "snippets":
            name = re.sub(r", block \d+\)$", ")", row["source"])
            sessions[name] = sessions.get(name, 0.0) + row["cpu_s"]
    ranked = sorted(((s, name) for name, s in sessions.items()), reverse=True)
    return artifacts[:SLOWEST], ranked[:SLOWEST]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="best of this many runs each")
    args = parser.parse_args()

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="qkv-build-times-") as tmp:
        tmp = Path(tmp)
        dequantize_model()
        build(tmp / "warm-up", QKV_ARTIFACTS="false")  # the OS file cache
        cold, warm, off = [], [], []
        timings = tmp / "timings.json"
        for run in range(args.repeat):
            cache = tmp / f"artifacts-cache-{run}"
            cold.append(build(tmp / "cold", QKV_CACHE=str(cache), QKV_TIMINGS=str(timings)))
            rows = json.loads(timings.read_text(encoding="utf-8"))
            warm.append(build(tmp / "warm", QKV_CACHE=str(cache)))
            off.append(build(tmp / "off", QKV_ARTIFACTS="false", QKV_CACHE=str(cache)))
            shutil.rmtree(tmp / "cold")
        (cold_s, cold_cpu), (warm_s, warm_cpu), (off_s, off_cpu) = min(cold), min(warm), min(off)

    load = os.getloadavg()
    print(
        f"site build, best of {args.repeat}; cores {os.cpu_count()}; load average (1, 5, 15 min) "
        f"{', '.join(f'{x:.1f}' for x in load_before)} before, "
        f"{', '.join(f'{x:.1f}' for x in load)} after (wall times grow with other load; CPU does not)"
    )
    print(
        f"  cold build (empty cache):       {cold_s:5.1f} s wall, {cold_cpu:5.1f} s CPU   goal <= "
        f"{COLD_GOAL_S:.0f} s wall   {'ok' if cold_s <= COLD_GOAL_S else 'MISSED'}"
    )
    print(f"  warm rebuild (nothing changed): {warm_s:3.1f} s wall, {warm_cpu:5.1f} s CPU")
    print(f"  build with QKV_ARTIFACTS=false: {off_s:5.1f} s wall, {off_cpu:5.1f} s CPU")
    ratio = warm_s / off_s
    print(
        f"  ratio warm / off: {ratio:.2f} wall, {warm_cpu / off_cpu:.2f} CPU   goal <= "
        f"{WARM_OVER_OFF_GOAL}   {'ok' if ratio <= WARM_OVER_OFF_GOAL else 'MISSED'}"
    )
    print(
        f"  ratio cold / off: {cold_s / off_s:.2f} wall, {cold_cpu / off_cpu:.2f} CPU"
        "   (what computing every artifact adds)"
    )
    artifacts, sessions = slowest(rows)
    total = sum(r["cpu_s"] for r in rows)
    print(f"  the last cold build computed {len(rows)} artifacts in {total:.1f} s of worker CPU")
    print(f"  the {SLOWEST} slowest artifacts (CPU s):")
    for seconds, name in artifacts:
        print(f"    {seconds:6.1f}  {name}")
    print(f"  the {SLOWEST} slowest snippet sessions (CPU s, blocks summed):")
    for seconds, name in sessions:
        print(f"    {seconds:6.1f}  {name}")


if __name__ == "__main__":
    main()
