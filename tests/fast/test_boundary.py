"""The library's boundary: qkv's attention modules stand apart from the site's experiment
tooling (qkv.lab), and no module reaches into another's private names.

The rules, read from the source with ``ast`` (lazy imports inside functions count too):

1. Every module directly in ``qkv/`` is one of :data:`LIBRARY`; the experiment tooling lives
   in ``qkv/lab/``. A new module says which side it is on by being listed here or moved.
2. No library module imports from ``qkv.lab``: the library is usable, tested and documented
   without the tooling, and the tooling may change without touching it.
3. No module of ``qkv/``, ``sitebuild/``, ``snippets/`` or ``benchmarks/`` uses a private
   name (a leading underscore) of a qkv module other than its own: not ``from qkv.x import
   _y``, not ``x._y`` on an imported module, not a private module (``from qkv import _m``).
   The one exception is ``qkv._checks``, the library's shared private module of input
   checks, which modules inside ``qkv/`` may import (it stays private so that its helpers
   are not a promise to readers). The tests may reach into private names: they test them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from support import ROOT

LIBRARY = {
    "__init__",
    "_checks",
    "cost",
    "diagnostics",
    "dot_product",
    "exercises",
    "kvcache",
    "masks",
    "multihead",
    "positions",
    "projections",
    "rope",
    "smollm2",
    "smollm2_file",
    "tiled",
    "toy",
}
"""The library's modules: attention and what a trained model needs to run it. ``toy`` is the
example data every page starts from (the way a library ships its example data sets);
``exercises`` checks a reader's own version of the library's functions against them."""

SHARED_PRIVATE = "qkv._checks"
CHECKED = ("qkv", "sitebuild", "snippets", "benchmarks")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def module_name(path: Path) -> str:
    """``qkv/lab/patching.py`` -> ``qkv.lab.patching``; ``qkv/lab/__init__.py`` -> ``qkv.lab``."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(tree: ast.AST, here: str) -> list[tuple[int, str]]:
    """Every module an ``import`` or ``from ... import`` names, with its line (relative
    imports resolved against the module ``here``)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = here.split(".")[: -node.level]
                base = ".".join([*package, *([base] if base else [])])
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found


def is_qkv_module(name: str) -> bool:
    """Whether ``qkv.x.y`` names a module or package of qkv (not a function or a value)."""
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def private_uses(tree: ast.AST, here: str) -> list[str]:
    """The private names of other qkv modules that a module's source uses, as
    ``line: what``."""
    inside_qkv = here.split(".")[0] == "qkv"
    bad = []
    modules = {}  # local name -> the qkv module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "qkv":
                    modules[alias.asname or "qkv"] = alias.name if alias.asname else "qkv"
                    if alias.name.startswith(SHARED_PRIVATE) and not inside_qkv:
                        bad.append(f"{node.lineno}: import {alias.name} (private to qkv)")
        elif (
            isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "qkv"
        ):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if is_qkv_module(full):  # a module: its attributes are its names (not a value's)
                    modules[alias.asname or alias.name] = full
                if SHARED_PRIVATE in (node.module, full):
                    if not inside_qkv:
                        bad.append(f"{node.lineno}: from {node.module} import {alias.name} (private to qkv)")
                elif _private(alias.name) and node.module != here:
                    bad.append(f"{node.lineno}: from {node.module} import {alias.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and _private(node.attr):
            owner = modules.get(node.value.id)
            full = f"{owner}.{node.attr}"
            if owner is not None and owner != here and not (full == SHARED_PRIVATE and inside_qkv):
                bad.append(f"{node.lineno}: {node.value.id}.{node.attr} ({owner})")
    return sorted(bad, key=lambda b: int(b.split(":")[0]))


def sources(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py"))


def test_every_module_of_qkv_is_the_library_or_the_lab():
    top = {p.stem for p in (ROOT / "qkv").glob("*.py")}
    # a subpackage of the library counts as one module (qkv.exercises is one; qkv.lab is not)
    top |= {p.parent.name for p in (ROOT / "qkv").glob("*/__init__.py")} - {"lab"}
    assert top == LIBRARY, (
        f"not classified: {sorted(top - LIBRARY)} (list a library module in LIBRARY, or move "
        f"experiment tooling to qkv/lab/); listed but gone: {sorted(LIBRARY - top)}"
    )
    lab = {p.stem for p in (ROOT / "qkv" / "lab").glob("*.py")}
    assert {"patching", "scoring", "interventions", "head_scores", "stats", "training", "scaling"} <= lab


def test_the_lab_says_it_is_tooling_with_no_stability_promise():
    import qkv.lab

    assert "experiment tooling" in qkv.lab.__doc__
    assert "No stability promise" in qkv.lab.__doc__


@pytest.mark.parametrize(
    "path", sorted((ROOT / "qkv").glob("*.py")), ids=lambda p: p.relative_to(ROOT).as_posix()
)
def test_no_library_module_imports_the_lab(path):
    here = module_name(path)
    tree = ast.parse(path.read_text(), filename=str(path))
    lab = [
        f"line {line}: {name}" for line, name in imported_modules(tree, here) if name.startswith("qkv.lab")
    ]
    assert not lab, f"{here} imports the experiment tooling: {lab}"


@pytest.mark.parametrize("path", sources(*CHECKED), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_module_uses_another_modules_private_names(path):
    here = module_name(path)
    bad = private_uses(ast.parse(path.read_text(), filename=str(path)), here)
    assert not bad, f"{path.relative_to(ROOT)} uses private names of other qkv modules: {bad}"


@pytest.mark.parametrize(
    ("source", "here", "expected"),
    [
        (
            "from qkv.lab.scoring import _families\n",
            "qkv.lab.patching",
            ["1: from qkv.lab.scoring import _families"],
        ),
        ("from qkv import _serve\n", "qkv.lab.patching", ["1: from qkv import _serve"]),
        (
            "from qkv import smollm2\nsmollm2._assemble()\n",
            "qkv.lab.patching",
            ["2: smollm2._assemble (qkv.smollm2)"],
        ),
        ("import qkv.smollm2 as s\ns._LOADED\n", "qkv_site.x", ["2: s._LOADED (qkv.smollm2)"]),
        (
            "from qkv._checks import whole_number\n",
            "qkv_site.x",
            ["1: from qkv._checks import whole_number (private to qkv)"],
        ),
        ("from qkv import _checks\n", "snippets.x", ["1: from qkv import _checks (private to qkv)"]),
        ("from qkv import _checks\n_checks.whole_number\n", "qkv.lab.stats", []),
        ("from qkv._checks import whole_number\n", "qkv.masks", []),
        ("from qkv import smollm2\nsmollm2.__name__\n", "qkv.lab.patching", []),
    ],
)
def test_the_private_name_rule_finds_what_it_should(source, here, expected):
    assert private_uses(ast.parse(source), here) == expected


def test_the_lab_import_rule_finds_lazy_and_relative_imports():
    source = "def f():\n    from qkv.lab import patching\nfrom .lab import stats\n"
    names = [name for _, name in imported_modules(ast.parse(source), "qkv.smollm2")]
    assert "qkv.lab.patching" in names and "qkv.lab.stats" in names


# ---- the build package, the snippets and the benchmarks -------------------------------------
#
# 4. The build package (sitebuild/qkv_site) imports neither the pages' code (snippets/) nor
#    the tests: what both the build and a page need lives in qkv (qkv.toy, qkv.lab.texts,
#    qkv.lab.training), which both import, so snippets/ is a leaf of the graph.
# 5. Its modules import each other without a circle, lazy imports included (a circle is how a
#    module ends up half-built by hand to break it).
# 6. No benchmark imports a test module: what both need (building, serving, Chromium) is in
#    qkv_site.local.
# 7. A snippet imports only what a reader installs with qkv: NumPy, qkv, threadpoolctl (qkv's
#    own dependency), the standard library, and the data files beside it in snippets/.

SITE_PACKAGE = ROOT / "sitebuild" / "qkv_site"
READER_IMPORTS = {"numpy", "qkv", "threadpoolctl", "matplotlib", "torch"}


def site_module(path: Path) -> str:
    parts = list(path.relative_to(ROOT / "sitebuild").with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def site_graph() -> dict[str, set[str]]:
    """qkv_site's modules and the qkv_site modules each imports (lazy imports too)."""
    modules = {site_module(p): p for p in SITE_PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        named = {m for _, m in imported_modules(ast.parse(path.read_text(encoding="utf-8")), name)}
        graph[name] = {m for m in named if m in modules and m != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every circle a depth-first walk of ``graph`` meets, each as the path around it.

    >>> circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})
    [['a', 'b', 'c', 'a']]
    >>> circles({"a": {"b"}, "b": set()})
    []
    """
    found, state, path = [], {}, []

    def walk(node):
        state[node] = "open"
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                found.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                walk(nxt)
        path.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            walk(node)
    return found


def test_the_build_package_imports_no_page_code_and_no_test():
    bad = []
    for path in sorted(SITE_PACKAGE.rglob("*.py")):
        for line, name in imported_modules(ast.parse(path.read_text(encoding="utf-8")), site_module(path)):
            if name.split(".")[0] in {"snippets", "tests", "support", "conftest", "checkout"}:
                bad.append(f"{path.relative_to(ROOT)}:{line}: {name}")
    assert bad == [], f"the build reads the pages' code or the tests: {bad}"


def test_the_build_package_has_no_import_circle():
    graph = site_graph()
    assert len(graph) > 20 and any(graph.values())  # the walk sees the package
    assert circles(graph) == []


def test_no_benchmark_imports_a_test_module():
    tests = {p.stem for p in (ROOT / "tests").rglob("*.py")} - {"__init__"}
    bad = []
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        source = path.read_text(encoding="utf-8")
        for line, name in imported_modules(ast.parse(source), f"benchmarks.{path.stem}"):
            if name.split(".")[0] in tests | {"tests"}:
                bad.append(f"{path.name}:{line}: {name}")
        if '"tests"' in source and "sys.path" in source:
            bad.append(f"{path.name}: puts tests/ on sys.path")
    assert bad == []


def test_a_snippet_imports_only_what_a_reader_installs():
    import sys

    beside = {p.stem for p in (ROOT / "snippets").glob("*.py")}
    bad = []
    for path in sorted((ROOT / "snippets").glob("*.py")):
        for line, name in imported_modules(
            ast.parse(path.read_text(encoding="utf-8")), f"snippets.{path.stem}"
        ):
            top = name.split(".")[0]
            if top and top not in READER_IMPORTS | beside and top not in sys.stdlib_module_names:
                bad.append(f"{path.name}:{line}: {name}")
    assert bad == []
