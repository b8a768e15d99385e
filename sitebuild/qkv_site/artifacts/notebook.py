"""Notebooks (``docs/*.ipynb``): executed and rendered by one job each, out of process.

mkdocs-jupyter makes a notebook a page (and publishes the ``.ipynb`` beside it); the job
executes the notebook with a Jupyter kernel and renders it with mkdocs-jupyter's own
converter and options, then :mod:`qkv_site.notebook_page` finishes the HTML. The result is
cached like every artifact; the kernel imports ``qkv`` in a process the worker cannot see,
so the job names every file of ``qkv/`` as an input.

The CSS of nbconvert's template is served once, as ``assets/notebook.css``, which the
page template (``overrides/main.html``) links on notebook pages.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from mkdocs.structure.files import File
from mkdocs.structure.toc import get_toc

from qkv_site.artifacts.runner import Job

STYLESHEET = "assets/notebook.css"
# mkdocs-jupyter options that shape the page; passed to its converter as they are set.
OPTIONS = ("kernel_name", "theme", "allow_errors", "show_input", "no_input", "no_prompt",
           "remove_tag_config", "highlight_extra_classes", "include_requirejs",
           "custom_mathjax_url")


def render(out: Path, path: str, options: dict, toc_depth: int, root: str) -> list[Path]:
    """The task: execute and render notebook ``path``; write page, CSS and contents."""
    from mkdocs_jupyter import convert
    from mkdocs_jupyter.plugin import _get_nb_toc_tokens
    from nbconvert.preprocessors import ExecutePreprocessor

    from qkv_site.notebook_page import finish

    # The kernel sends printed text in chunks on a timer; merged, each cell prints one
    # block and the page is the same bytes every build (no nbconvert option reaches this).
    ExecutePreprocessor.coalesce_streams = True
    os.environ.pop("MPLBACKEND", None)  # the kernel inherits it; its figures need the inline one
    notebook = json.loads(Path(path).read_text(encoding="utf-8"))
    alts = {cell["id"]: cell["metadata"]["alt"] for cell in notebook["cells"]
            if "id" in cell and "alt" in cell.get("metadata", {})}
    body = convert.nb2html(path, execute=True, **options)
    page_html, css = finish(body, alts)
    (out / "page.html").write_text(page_html, encoding="utf-8")
    (out / "notebook.css").write_text(css, encoding="utf-8")
    tokens, title = _get_nb_toc_tokens(path, toc_depth)
    (out / "toc.json").write_text(json.dumps({"tokens": tokens, "title": title}), encoding="utf-8")
    return [Path(path), *sorted((Path(root) / "qkv").rglob("*.py"))]  # what the kernel read


class Notebooks:
    """The notebook kind: jobs start at ``on_files``; each page's render waits for its job."""

    def __init__(self, plugin):
        self.plugin = plugin
        self.futures = {}

    def _jupyter(self, config):
        return config.plugins.get("mkdocs-jupyter")

    def on_files(self, files, config):
        self.futures = {}
        jupyter = self._jupyter(config)
        if jupyter is None or not self.plugin.config.enabled:
            return
        runner = self.plugin.runner
        for file in files.documentation_pages():
            if file.src_uri.endswith(".ipynb") and jupyter.should_include(file):
                args = {"path": file.abs_src_path, "toc_depth": jupyter.config["toc_depth"],
                        "options": {k: jupyter.config[k] for k in OPTIONS},
                        "root": str(runner.root)}
                job = Job("notebooks", "qkv_site.artifacts.notebook:render", args,
                          source=f"docs/{file.src_uri}")
                self.futures[file.src_uri] = runner.submit(job)

    def on_pre_page(self, page, config, files):
        future = self.futures.get(page.file.src_uri)
        if future is None:
            return
        ignore_h1 = self._jupyter(config).config["ignore_h1_titles"]

        def render(page_self, config, files):  # replaces mkdocs-jupyter's render
            result = future.result()
            page_self.content = result.text("page.html")
            toc = json.loads(result.text("toc.json"))
            page_self.toc = get_toc(toc["tokens"])
            if toc["title"] is not None and not ignore_h1:
                page_self.title = toc["title"]

        page.render = render.__get__(page)

    def on_page_content(self, page_html, page, config, files):
        if page.file.src_uri in self.futures:
            notebook = json.loads(Path(page.file.abs_src_path).read_text(encoding="utf-8"))
            if description := notebook.get("metadata", {}).get("description"):
                page.meta["description"] = description
        return page_html

    def on_env(self, env, config, files):
        if self.futures:
            css = next(iter(self.futures.values())).result().folder / "notebook.css"
            files.append(File.generated(config, STYLESHEET, abs_src_path=str(css)))
