"""Throwaway copies of the repository, for tests whose commands write files or edit sources.

``copy_project(dest)`` copies what a clone would hold plus the work not yet committed:
every file git tracks or would track (``git ls-files --cached --others --exclude-standard``),
so ignored output such as ``site/``, ``.cache/`` and ``.venv/`` stays behind.

``borrow_environment(root)`` gives the copy its own ``.venv`` that sees the packages already
installed for this test run (through a ``.pth`` file) instead of downloading them again.
``./dev`` then installs only the copy itself into it (``pip install -e .``), so the copy's
``qkv`` is the one imported and the environment running the tests is left untouched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

from support import ROOT


def project_files(root: Path = ROOT) -> list[str]:
    """Paths (relative to ``root``) of the files a clone plus uncommitted work would hold."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    return sorted(p for p in listed if p and (root / p).is_file())


def copy_project(dest: Path, root: Path = ROOT) -> Path:
    """Copy the project's files into ``dest`` (created); returns ``dest``."""
    for rel in project_files(root):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, target)
    return dest


_SCRIPT = """#!{python}
import sys
from {module} import {function}
sys.exit({function}())
"""


def borrow_environment(root: Path) -> Path:
    """Create ``root/.venv`` that imports this run's installed packages; returns its python."""
    env_dir = root / ".venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(env_dir)
    python = env_dir / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(purelib, "_borrowed_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # Jupyter finds nbconvert's templates and the kernel spec under <prefix>/share/jupyter.
    shared_data = Path(sys.prefix, "share", "jupyter")
    if shared_data.is_dir():
        (env_dir / "share").mkdir(exist_ok=True)
        (env_dir / "share" / "jupyter").symlink_to(shared_data)
    # Console scripts are not borrowed with the packages; ./dev calls this one by path.
    mkdocs = env_dir / "bin" / "mkdocs"
    mkdocs.write_text(_SCRIPT.format(python=python, module="mkdocs.__main__", function="cli"))
    mkdocs.chmod(0o755)
    return python


def clean_env(**extra: str) -> dict[str, str]:
    """The environment for commands run in a copy: no variable pointing back at this tree
    (``QKV_VENV``, ``QKV_CACHE``, ...) or changing what a build makes, and none of this
    pytest run's (``PYTEST_XDIST_WORKER`` would make a pytest run in the copy take itself
    for a worker of this one, and put its builds in another folder)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not (k.startswith("QKV_") and k != "QKV_CHROMIUM")
        and not k.startswith("PYTEST_")
        and k not in ("VIRTUAL_ENV", "PYTHONPATH", "SOURCE_DATE_EPOCH")
    }
    return {**env, "NO_MKDOCS_2_WARNING": "1", **extra}
