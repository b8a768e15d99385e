"""What the trained model (SmolLM2-135M-Instruct) costs the site build, measured in one run.

Four strict builds, each into its own folder, after one untimed warm-up build:

1. cold, everything: an empty artifact cache (the qkv-artifacts plugin's, ``QKV_CACHE``)
   *and* an empty model weight cache (``QKV_MODEL_CACHE`` pointing at an empty folder), so
   the GGUF file is read and dequantized once (~13 s of CPU) and every artifact (figures,
   snippets, the notebook, both explorer modes) is computed;
2. cold artifacts: an empty artifact cache, the weight cache filled (the usual "fresh
   clone on a machine that built before" case; the weights cache lives outside the tree);
3. warm: nothing changed, every artifact from the cache;
4. off: ``QKV_ARTIFACTS=false``, nothing computed or read.

Goals (issue 17): the cold-artifacts build (2.) at most 45 s on the 2-core build machine;
warm at most 1.2x off. Also printed: the snippets of chapters 14 and 15 alone (warm weight
cache: their experiments, interventions included) and each trained-model figure alone.

    python benchmarks/trained_model_build.py [--skip-weights]

``--skip-weights`` leaves out build 1 (the one that dequantizes the file again, minutes on a
busy machine).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COLD_GOAL_S = 45.0
WARM_OVER_OFF_GOAL = 1.2
TRAINED_FIGURES = ("trained-head-types",)
TRAINED_SNIPPETS = (
    "snippets/trained_model.py",
    "snippets/trained_model_exercises.py",
    "snippets/coreference.py",
    "snippets/coreference_exercises.py",
)


def _build_times():
    spec = importlib.util.spec_from_file_location("build_times", ROOT / "benchmarks" / "build_times.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timed_run(args: list[str], **env: str) -> float:
    start = time.perf_counter()
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, env={**os.environ, **env})
    if done.returncode != 0:
        sys.exit(f"{' '.join(args)} failed:\n{done.stderr}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--skip-weights", action="store_true", help="leave out the build with an empty weight cache"
    )
    args = parser.parse_args()
    build = _build_times().build
    paths = os.pathsep.join([str(ROOT), str(ROOT / "sitebuild")])
    with tempfile.TemporaryDirectory(prefix="qkv-trained-build-") as tmp:
        tmp = Path(tmp)
        build(tmp / "warm-up", QKV_ARTIFACTS="false")  # OS file cache
        everything = (
            None
            if args.skip_weights
            else build(
                tmp / "cold", QKV_CACHE=str(tmp / "artifacts-a"), QKV_MODEL_CACHE=str(tmp / "weights-empty")
            )
        )
        cold = build(tmp / "cold-artifacts", QKV_CACHE=str(tmp / "artifacts-b"))
        warm = build(tmp / "warm", QKV_CACHE=str(tmp / "artifacts-b"))
        off = build(tmp / "off", QKV_ARTIFACTS="false")
        snippets = {path: timed_run([sys.executable, path]) for path in TRAINED_SNIPPETS}
        figures = {
            name: timed_run(
                [sys.executable, "-m", "qkv_site.figures.render", name, str(tmp / "one" / name)],
                PYTHONPATH=paths,
                MPLBACKEND="svg",
            )
            for name in TRAINED_FIGURES
        }
    print(
        f"site build with the trained-model chapter; cores {os.cpu_count()}, load average "
        f"{os.getloadavg()[0]:.1f} at the end (wall times grow with other load; CPU does not)"
    )
    rows = (
        ("cold, empty artifact AND weight caches", everything),
        ("cold artifacts, weight cache filled", cold),
        ("warm (nothing changed)", warm),
        ("QKV_ARTIFACTS=false", off),
    )
    for label, measured in rows:
        if measured is not None:
            wall, cpu = measured
            print(f"  {label:<38} {wall:6.1f} s wall  {cpu:6.1f} s CPU")
    wall = cold[0]
    verdict = "ok" if wall <= COLD_GOAL_S else "MISSED"
    print(f"  goal: cold artifacts, weight cache filled <= {COLD_GOAL_S:.0f} s wall: {verdict}")
    ratio, cpu_ratio = warm[0] / off[0], warm[1] / off[1]
    verdict = "ok" if ratio <= WARM_OVER_OFF_GOAL else "MISSED"
    print(f"  warm / off: {ratio:.2f} wall, {cpu_ratio:.2f} CPU   goal <= {WARM_OVER_OFF_GOAL}: {verdict}")
    for path, seconds in snippets.items():
        print(f"  python {path} alone: {seconds:.1f} s")
    for name, seconds in figures.items():
        print(f"  figure {name} alone (fresh process, both themes): {seconds:.1f} s")


if __name__ == "__main__":
    main()
