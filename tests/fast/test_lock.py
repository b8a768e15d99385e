"""``./dev lock`` (requirements/lock.py) re-resolves from what is declared and writes hashes,
and an install from its output checks them.

The resolver runs on a tiny project of two packages whose wheels this test writes itself,
offline (``--no-index --find-links``), so the lock is pip-tools' answer to the requirement
given, not a copy of the repository's files.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename
from support import HANG, ROOT

sys.path.insert(0, str(ROOT / "requirements"))
import lock


def wheel(folder: Path, name: str, version: str) -> str:
    """Write the smallest installable wheel of ``name==version`` into ``folder``; its SHA-256."""
    path = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f"VERSION = {version!r}\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{n},,\n" for n in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            archive.writestr(member, text)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def install(lock_file: Path, wheels: Path, target: Path) -> subprocess.CompletedProcess:
    """``./dev``'s install of a lock file, offline, into ``target``."""
    return subprocess.run(
        [
            *(sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--require-hashes"),
            *("--no-deps", "--no-index", "--find-links", str(wheels), "--target", str(target)),
            *("-r", str(lock_file)),
        ],
        capture_output=True,
        text=True,
        timeout=HANG,
    )


def test_a_changed_requirement_changes_the_lock_and_the_install_checks_its_hashes(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    one_1, one_2, two = (
        wheel(wheels, "tinyone", "1.0"),
        wheel(wheels, "tinyone", "2.0"),
        wheel(wheels, "tinytwo", "1.0"),
    )
    offline = ("--no-index", "--find-links", str(wheels))
    out = tmp_path / "lock.txt"

    lock.compile_lock(["tinyone<2"], out, *offline)
    before = out.read_text()
    assert re.search(rf"^tinyone==1\.0 \\\n\s+--hash=sha256:{one_1}$", before, re.M), before
    assert "tinytwo" not in before

    lock.compile_lock(["tinyone<2"], out, *offline)  # the same needs, written again
    assert out.read_text() == before  # the same bytes: no temporary path in its comments

    lock.compile_lock(["tinyone>=2", "tinytwo"], out, *offline)  # the declared needs change
    after = out.read_text()
    assert re.search(rf"^tinyone==2\.0 \\\n\s+--hash=sha256:{one_2}$", after, re.M), after
    assert re.search(rf"^tinytwo==1\.0 \\\n\s+--hash=sha256:{two}$", after, re.M), after
    assert "tinyone==1.0" not in after

    installed = install(out, wheels, tmp_path / "good")
    assert installed.returncode == 0, installed.stderr
    assert (tmp_path / "good" / "tinyone" / "__init__.py").read_text() == "VERSION = '2.0'\n"

    tampered = tmp_path / "tampered.txt"
    tampered.write_text(after.replace(one_2, "0" * 64))  # a file that is not the one locked
    refused = install(tampered, wheels, tmp_path / "bad")
    assert refused.returncode != 0
    assert "THESE PACKAGES DO NOT MATCH THE HASHES" in refused.stderr and "tinyone" in refused.stderr
    assert not (tmp_path / "bad" / "tinyone").exists()


def test_the_lock_files_satisfy_what_pyproject_declares():
    """Every declared requirement (the project's own aside) is pinned in its lock file at a
    version it accepts: a requirement changed without ``./dev lock`` fails here (and ``./dev``
    refuses to install, since nothing beyond the lock is fetched)."""
    for group, needs in lock.declared(ROOT).items():
        text = (ROOT / "requirements" / f"{group}.txt").read_text(encoding="utf-8")
        for file in lock.NO_DEPS.values() if group == "test" else ():
            text += (ROOT / "requirements" / file).read_text(encoding="utf-8")
        pins = {canonicalize_name(n): v for n, v in re.findall(r"^([A-Za-z0-9][\w.-]*)==(\S+)", text, re.M)}
        for text_requirement in needs:
            requirement = Requirement(text_requirement)
            name = canonicalize_name(requirement.name)
            assert name in pins, f"{group}: {requirement} is not in requirements/{group}.txt"
            assert requirement.specifier.contains(pins[name], prereleases=True), (
                group,
                requirement,
                pins[name],
            )
        assert "qkv" not in pins and "qkv-site" not in pins  # installed from their folders


def _torch_files() -> dict[str, str]:
    """``{wheel file name: SHA-256}`` that requirements/torch.txt's comment names, each hash
    checked to be one the requirement accepts."""
    text = (ROOT / "requirements" / "torch.txt").read_text(encoding="utf-8")
    named = dict(re.findall(r"^#\s+(torch-\S+\.whl) ([0-9a-f]{64})$", text, re.M))
    accepted = set(re.findall(r"--hash=sha256:([0-9a-f]{64})", text))
    assert named and set(named.values()) == accepted, "the file list and the hashes disagree"
    return named


def _covers(files, python: str, platform: str) -> bool:
    """Whether one of ``files`` installs on CPython ``python`` ("3.13") on ``platform``
    ("linux", "macosx", "win")."""
    tag = "cp" + python.replace(".", "")
    for file in files:
        _, _, _, tags = parse_wheel_filename(file)
        if any(t.interpreter == tag and platform in t.platform for t in tags):
            return True
    return False


def test_the_torch_lock_covers_every_python_and_platform_ci_installs_on():
    # CI = the GitHub jobs that run ./dev, and .ci/run on this kind of machine (its Python
    # is the one running this test). A job that names QKV_TORCH_INDEX installs the pinned
    # version from that index (tests/fast/test_dev.py); any other must find its file here.
    files = _torch_files()
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "tests.yml").read_text())
    machines = [(f"{sys.version_info.major}.{sys.version_info.minor}", "linux", {})]
    for job in workflow["jobs"].values():
        if not any("./dev" in step.get("run", "") for step in job["steps"]):
            continue
        (setup,) = [s for s in job["steps"] if s.get("uses", "").startswith("actions/setup-python@")]
        platform = {"ubuntu": "linux", "macos": "macosx", "windows": "win"}[job["runs-on"].split("-")[0]]
        machines.append((str(setup["with"]["python-version"]), platform, job.get("env", {})))
    assert len(machines) >= 3, machines  # .ci/run and the two jobs of tests.yml
    for python, platform, env in machines:
        if env.get("QKV_TORCH_INDEX"):
            assert env["QKV_TORCH_INDEX"] == "https://download.pytorch.org/whl/cpu", env
        else:
            assert _covers(files, python, platform), f"no torch file for Python {python} on {platform}"


def test_the_coverage_check_tells_a_missing_python_from_a_present_one():
    files = _torch_files()
    assert _covers(files, "3.13", "macosx") and _covers(files, "3.11", "linux")
    assert not _covers(files, "3.13", "linux")  # PyPI's Linux files are the CUDA build: left out
    assert not _covers(files, "3.9", "win")
