"""Notebooks (``docs/*.ipynb``): each one a page of the site, executed and rendered by a job.

A notebook in ``docs/`` becomes a page (:class:`NotebookPage`, a documentation page to
MkDocs) and its ``.ipynb`` is published beside that page for download. The page's source,
as MkDocs reads it (``on_page_read_source``), is front matter only: the notebook's
description and file name (``page.meta.notebook``, which ``overrides/main.html`` turns
into a download button), so no Markdown extension ever sees the notebook's JSON.

The job (``tasks.notebook``) executes the notebook with a Jupyter kernel, renders it with
mkdocs-jupyter's converter, and :mod:`qkv_site.notebook_page` finishes the HTML; the page's
content and table of contents are the job's, put in place at ``on_page_content``. The
kernel imports ``qkv`` in a process the worker cannot see, so the job names every file of
``qkv/`` as an input. The CSS of nbconvert's template is served once, as
``assets/notebook.css``; the notebook's figures are files beside its page.
"""

from __future__ import annotations

import json
import posixpath
from pathlib import Path

from mkdocs.structure.files import File
from mkdocs.structure.toc import get_toc

from qkv_site.artifacts.runner import Job, Runner

STYLESHEET = "assets/notebook.css"
NOT_RUN = "<p><em>The notebook is not executed in this build (artifacts are disabled).</em></p>"


class NotebookPage(File):
    """A notebook as a page of the site."""

    def is_documentation_page(self) -> bool:
        return True


class Notebooks:
    """The notebook kind: a job per notebook from ``on_files``; its page waits for it."""

    def __init__(self, runner: Runner, enabled: bool):
        self.runner, self.enabled = runner, enabled
        self.futures = {}

    def on_files(self, files, config):
        self.futures = {}
        runner = self.runner
        for file in [f for f in files if f.src_uri.endswith(".ipynb") and f.generated_by is None]:
            page = NotebookPage(
                file.src_uri, file.src_dir, file.dest_dir, file.use_directory_urls, inclusion=file.inclusion
            )
            files.remove(file)
            files.append(page)
            download = posixpath.join(posixpath.dirname(page.dest_uri), posixpath.basename(file.src_uri))
            files.append(File.generated(config, download, abs_src_path=file.abs_src_path))
            if self.enabled:
                path = Path(file.abs_src_path).resolve()
                path = path.relative_to(runner.root) if path.is_relative_to(runner.root) else path
                self.futures[file.src_uri] = runner.submit(
                    Job(
                        "notebooks",
                        "qkv_site.artifacts.tasks:notebook",
                        {"path": path.as_posix()},
                        source=f"docs/{file.src_uri}",
                    )
                )
        return files

    def on_page_read_source(self, page, config):
        if not isinstance(page.file, NotebookPage):
            return None
        notebook = json.loads(Path(page.file.abs_src_path).read_text(encoding="utf-8"))
        meta = {
            "notebook": posixpath.basename(page.file.src_uri),
            "description": notebook.get("metadata", {}).get("description"),
        }
        return "---\n" + "".join(f"{k}: {json.dumps(v)}\n" for k, v in meta.items() if v) + "---\n"

    def on_page_content(self, page_html, page, config, files):
        if not isinstance(page.file, NotebookPage):
            return page_html
        if page.file.src_uri not in self.futures:
            return NOT_RUN
        result = self.futures[page.file.src_uri].result()
        page.toc = get_toc(json.loads(result.text("toc.json")))
        return result.text("page.html")

    def on_env(self, env, config, files):
        if self.futures:
            css = next(iter(self.futures.values())).result().folder / "notebook.css"
            files.append(File.generated(config, STYLESHEET, abs_src_path=str(css)))
        for src_uri, future in self.futures.items():  # each page's figures, beside the page
            folder = posixpath.dirname(files.get_file_from_path(src_uri).dest_uri)
            for image in sorted((future.result().folder / "images").iterdir()):
                files.append(
                    File.generated(config, posixpath.join(folder, image.name), abs_src_path=str(image))
                )
        return env
