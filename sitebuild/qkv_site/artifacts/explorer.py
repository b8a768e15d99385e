"""The attention explorer's data: ``explorer/data.json``, exported from qkv.

The explorer page (``docs/explorer.md``) only draws; every number it shows comes from
:func:`qkv_site.explorer_data.explorer_json`, computed by one job and added to the site
through MkDocs' file API (never into ``docs/``, which would make ``mkdocs serve`` loop).
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File
from mkdocs.utils import get_relative_url

from qkv_site.artifacts.runner import Job

DATA_URI = "explorer/data.json"
PAGE = "explorer.md"
JOB = Job("explorer", "qkv_site.artifacts.tasks:explorer", {},
          "sitebuild/qkv_site/explorer_data.py")


class Explorer:
    """The explorer kind: one job, started with the build, its file added at ``on_files``."""

    def __init__(self, plugin):
        self.plugin = plugin

    def on_pre_build(self, config):
        wanted = self.plugin.config.enabled and Path(config.docs_dir, PAGE).is_file()
        self.future = self.plugin.runner.submit(JOB) if wanted else None

    def on_files(self, files, config):
        if self.future is not None:
            data = self.future.result().folder / "data.json"
            files.append(File.generated(config, DATA_URI, abs_src_path=str(data)))

    def on_page_content(self, page_html, page, config, files):
        # The page names its data relative to itself; the URL depends on use_directory_urls.
        if page.file.src_uri == PAGE:
            return page_html.replace('data-src="data.json"',
                                     f'data-src="{get_relative_url(DATA_URI, page.url)}"', 1)
        return page_html
