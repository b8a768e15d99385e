"""What `pip install qkv` gets: a wheel and an sdist that hold the NumPy library and nothing
of the site, with a licence and metadata that PyPI accepts (``twine check``).

The expected contents come from the source tree (every module in ``qkv/``) and from
pyproject.toml, not from the built files.
"""

from __future__ import annotations

import email.parser
import json
import re
import subprocess
import sys
import tarfile
import tomllib
import zipfile

import pytest
from packaging.requirements import Requirement
from support import HANG, ROOT

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
NAME_VERSION = f"{PROJECT['name']}-{PROJECT['version']}"
MODULES = sorted(
    f"qkv/{p.relative_to(ROOT / 'qkv').as_posix()}"
    for p in (ROOT / "qkv").rglob("*.py")
    if "__pycache__" not in p.parts
)


@pytest.fixture(scope="module")
def wheel_files(built_dist) -> dict[str, bytes]:
    with zipfile.ZipFile(built_dist[1]) as wheel:
        return {name: wheel.read(name) for name in wheel.namelist()}


@pytest.fixture(scope="module")
def metadata(wheel_files):
    return email.parser.Parser().parsestr(wheel_files[f"{NAME_VERSION}.dist-info/METADATA"].decode("utf-8"))


def test_twine_accepts_both_files(built_dist):
    done = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *map(str, built_dist)],
        capture_output=True,
        text=True,
        timeout=HANG,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("PASSED") == 2, done.stdout


def test_the_wheel_holds_the_library_and_nothing_else(wheel_files):
    assert MODULES, "the source tree has a qkv package"
    code = sorted(n for n in wheel_files if not n.startswith(f"{NAME_VERSION}.dist-info/"))
    assert code == MODULES  # no qkv_site, no sitebuild, no hooks, tests or snippets


def test_the_wheel_carries_the_licence(wheel_files, metadata):
    licence = wheel_files[f"{NAME_VERSION}.dist-info/licenses/LICENSE"]
    assert licence == (ROOT / "LICENSE").read_bytes()
    assert metadata["License-Expression"] == PROJECT["license"] == "MIT"
    assert metadata.get_all("License-File") == ["LICENSE"]


def test_metadata_names_the_project_and_needs_only_numpy(metadata):
    assert metadata["Name"] == "qkv" and metadata["Version"] == PROJECT["version"]
    assert metadata["Requires-Python"] == ">=3.11"
    assert metadata["Summary"] == PROJECT["description"]
    requirements = [Requirement(r) for r in metadata.get_all("Requires-Dist")]
    always = [r for r in requirements if r.marker is None]
    assert [r.name for r in always] == ["numpy"]
    examples = [
        r.name
        for r in requirements
        if r.marker is not None
        and r.marker.evaluate({"extra": "examples"})
        and not r.marker.evaluate({"extra": ""})
    ]
    assert examples == ["matplotlib"]  # what the pages and the notebook need beyond NumPy


def test_the_extras_are_only_what_a_reader_installs_from_pypi(metadata):
    # The site's build and the tests are dependency groups (pyproject.toml), which never
    # reach the metadata: an extra "docs" or "test" would offer PyPI users what needs this
    # repository (the site package in sitebuild/ is never published).
    assert metadata.get_all("Provides-Extra") == ["examples", "smollm2"]
    named = {Requirement(r).name for r in metadata.get_all("Requires-Dist")}
    assert named == {"numpy", "matplotlib", "gguf", "tokenizers"}, named
    groups = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["dependency-groups"]
    assert {"docs", "test"} <= set(groups)


def test_the_long_description_is_the_readme_with_the_install_line(metadata):
    assert metadata["Description-Content-Type"] == "text/markdown"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert metadata.get_payload().strip() == readme.strip()
    assert 'pip install "qkv[examples]"' in readme


def test_the_sdist_holds_the_library_its_licence_and_its_build_files(built_dist):
    with tarfile.open(built_dist[0]) as sdist:
        names = {n.removeprefix(f"{NAME_VERSION}/") for n in sdist.getnames()}
    files = {n for n in names if "." in n.rsplit("/", 1)[-1] or n in {"LICENSE", "PKG-INFO"}}
    source = {n for n in files if n.endswith(".py")}
    assert sorted(source) == MODULES
    assert {"LICENSE", "README.md", "pyproject.toml", "PKG-INFO"} <= files
    assert not {
        n
        for n in names
        if n.split("/")[0] in {"tests", "sitebuild", "hooks", "docs", "snippets", "benchmarks"}
    }


def test_the_install_line_is_on_the_home_page_in_the_readme_and_atop_the_notebook():
    notebook = json.loads((ROOT / "docs" / "notebook.ipynb").read_text(encoding="utf-8"))
    first = notebook["cells"][0]
    assert first["cell_type"] == "markdown"  # read by the reader, never run by the build
    places = {
        "README.md": (ROOT / "README.md").read_text(encoding="utf-8"),
        "docs/index.md": (ROOT / "docs" / "index.md").read_text(encoding="utf-8"),
        "the notebook's first cell": "".join(first["source"]),
    }
    for place, text in places.items():
        extras = re.findall(r'pip install "qkv\[(\w+)\]"', text)
        assert extras == ["examples"], place
    assert "examples" in PROJECT["optional-dependencies"]
    code = ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]
    assert not [c for c in code if "pip install" in c or "%pip" in c]
