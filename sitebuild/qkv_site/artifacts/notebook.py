"""Notebooks (``docs/*.ipynb``): executed and rendered by one job each, out of process.

mkdocs-jupyter makes a notebook a page (and publishes the ``.ipynb`` beside it); the job
executes the notebook with a Jupyter kernel and renders it with mkdocs-jupyter's own
converter and options, then :mod:`qkv_site.notebook_page` finishes the HTML. The result is
cached like every artifact; the kernel imports ``qkv`` in a process the worker cannot see,
so the job names every file of ``qkv/`` as an input.

The CSS of nbconvert's template is served once, as ``assets/notebook.css``, which the
page template (``overrides/main.html``) links on notebook pages; the notebook's figures are
files beside its page instead of base64 inside it.
"""

from __future__ import annotations

import json
import posixpath
from pathlib import Path

from mkdocs.structure.files import File
from mkdocs.structure.toc import get_toc

from qkv_site.artifacts.runner import Job

STYLESHEET = "assets/notebook.css"
# mkdocs-jupyter options that shape the page; passed to its converter as they are set.
OPTIONS = ("kernel_name", "theme", "allow_errors", "show_input", "no_input", "no_prompt",
           "remove_tag_config", "highlight_extra_classes", "include_requirejs",
           "custom_mathjax_url")


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
                path = Path(file.abs_src_path).resolve()
                path = path.relative_to(runner.root) if path.is_relative_to(runner.root) else path
                args = {"path": path.as_posix(), "toc_depth": jupyter.config["toc_depth"],
                        "options": {k: jupyter.config[k] for k in OPTIONS}}
                job = Job("notebooks", "qkv_site.artifacts.tasks:notebook", args,
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
        for src_uri, future in self.futures.items():  # each page's figures, beside the page
            url = files.get_file_from_path(src_uri).url  # "notebook/" or "notebook.html"
            folder = url.rstrip("/") if url.endswith("/") else posixpath.dirname(url)
            for image in sorted((future.result().folder / "images").iterdir()):
                uri = posixpath.join(folder, image.name)
                files.append(File.generated(config, uri, abs_src_path=str(image)))
