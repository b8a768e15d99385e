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

import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

from qkv_site.local import clean_env, copy_project, project_files  # noqa: F401

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
