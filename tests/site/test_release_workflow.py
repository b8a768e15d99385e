"""The release workflow's build job runs as written, with the pip a runner's Python bundles.

The job's install, build and check steps are taken from ``.github/workflows/release.yml``
itself and run in a copy of the project, in a fresh virtual environment made by ``venv``
(whose pip is the one this Python bundles, as on a runner: no upgrade). A step that only a
tag push can run (the tag check) is left out, as a pull request's dry run leaves it out.
"""

from __future__ import annotations

import os
import subprocess
import tarfile
import venv
import zipfile

import yaml
from checkout import copy_project
from support import HANG, ROOT


def _dry_run_steps() -> list[str]:
    """The ``run`` scripts of the build job that a pull request runs."""
    release = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yml").read_text())
    assert "pull_request" in release[True]  # YAML 1.1 reads the key `on` as True
    steps = release["jobs"]["build"]["steps"]
    return [s["run"] for s in steps if "run" in s and s.get("if") != "github.event_name == 'push'"]


def test_the_release_build_job_builds_and_checks_the_package_with_a_bundled_pip(tmp_path):
    root = copy_project(tmp_path / "qkv")
    env_dir = tmp_path / "runner-python"
    venv.EnvBuilder(with_pip=True).create(env_dir)  # the bundled pip, not upgraded
    env = {**os.environ, "PATH": f"{env_dir / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    scripts = _dry_run_steps()
    assert any("pip install" in s for s in scripts) and any("twine check" in s for s in scripts)
    for script in scripts:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=HANG,
        )
        assert done.returncode == 0, f"{script}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    (sdist,), (wheel,) = (root / "dist").glob("qkv-*.tar.gz"), (root / "dist").glob("qkv-*.whl")
    # what is published: the library, not the site's build package or the tests
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert "qkv/dot_product.py" in names
    assert not any(n.startswith(("qkv_site/", "tests/", "snippets/")) for n in names)
    with tarfile.open(sdist) as archive:
        assert any(n.endswith("/pyproject.toml") for n in archive.getnames())
