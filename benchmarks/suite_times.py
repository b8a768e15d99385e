"""How long the test tiers take, measured in one run: ``./dev check``'s tests and ``./dev test``'s.

Runs pytest on this tree as ``./dev`` runs it (every core, pytest-xdist), with a JUnit report
in a temporary folder, and prints for each tier: the wall time, how busy the machine's cores
were meanwhile (from /proc/stat, so the build and Chromium processes count), the time the
tests took by folder, and the slowest test files. Goals on the 2-core machine: ``check``
<= 60 s, ``test`` <= 450 s of pytest.

    python benchmarks/suite_times.py [--tier check|test|both]

The caches this tree already holds are used (the artifact cache, the trained model's
weights, transformers' reference answers): it measures a contributor's run, not a cold one.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOALS = {"check": 60.0, "test": 450.0}
ARGS = {"check": ["-m", "not build"], "test": []}


def busy_core_seconds() -> float:
    """Seconds of CPU time all cores have spent busy since boot (Linux /proc/stat)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def run(tier: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-n",
            "auto",
            "--dist",
            "worksteal",
            f"--junitxml={report}",
            *ARGS[tier],
        ]
        busy, start = busy_core_seconds(), time.perf_counter()
        done = subprocess.run(
            command, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}
        )
        wall, busy = time.perf_counter() - start, busy_core_seconds() - busy
        summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-500:]
        by_folder, by_file = collections.Counter(), collections.Counter()
        for case in ET.parse(report).getroot().iter("testcase"):
            name = case.get("classname", "")
            folder = name.split(".")[1] if name.startswith("tests.") else "doctests"
            by_folder[folder] += float(case.get("time", 0))
            by_file[name] += float(case.get("time", 0))
    cores = os.cpu_count()
    print(f"== {tier}: {summary}")
    print(f"  wall {wall:6.1f} s   goal <= {GOALS[tier]:.0f} s   {'ok' if wall <= GOALS[tier] else 'MISSED'}")
    print(
        f"  cores busy {busy:6.1f} core-s of {wall * cores:.0f} ({busy / (wall * cores):.0%}; "
        f"{cores} cores): the run is bound by CPU when this is near 100 %"
    )
    print(
        "  test time by folder (s, summed over workers): "
        + ", ".join(f"{folder} {seconds:.0f}" for folder, seconds in by_folder.most_common())
    )
    print(
        "  slowest files: "
        + ", ".join(
            f"{name.removeprefix('tests.')} {seconds:.0f}" for name, seconds in by_file.most_common(8)
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tier", choices=["check", "test", "both"], default="both")
    tiers = ["check", "test"] if (tier := parser.parse_args().tier) == "both" else [tier]
    for name in tiers:
        run(name)


if __name__ == "__main__":
    main()
