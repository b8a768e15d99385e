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

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from support import ROOT

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
        timeout=300,
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
