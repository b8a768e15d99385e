"""The ``qkv-artifacts`` plugin's settings (as Material's plugins keep theirs beside the
plugin), and the cache folder a build of a project uses, for everything outside MkDocs."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from mkdocs.config import config_options
from mkdocs.config.base import Config

PLUGIN = "qkv-artifacts"


class ArtifactsConfig(Config):
    enabled = config_options.Type(bool, default=True)
    cache_dir = config_options.Type(str, default=".cache/artifacts")
    concurrency = config_options.Type(int, default=max(1, os.cpu_count() or 1))
    content_security_policy = config_options.Type(bool, default=False)
    # a file to write each computed artifact's CPU seconds to, as JSON ("": none); for
    # benchmarks/build_times.py
    timings = config_options.Type(str, default="")
    # the Python the pages' snippets run in ("": the build's own, with this tree's qkv): the
    # tests give a reader's environment (the built wheel and what a reader installs), so the
    # build's run of each page is also the proof that its code runs where a reader runs it
    snippet_python = config_options.Type(str, default="")


def cache_dir(root: Path, environ: Mapping[str, str] | None = None) -> Path:
    """The artifact cache a build of ``root`` uses with ``environ`` (default: this process's
    environment, so ``QKV_CACHE`` counts wherever mkdocs.yml reads it)."""
    from qkv_site.site import mkdocs_config

    config = mkdocs_config(root, os.environ if environ is None else environ)
    for entry in config.get("plugins", []):
        if isinstance(entry, dict) and PLUGIN in entry:
            folder = (entry[PLUGIN] or {}).get("cache_dir")
            break
    else:
        raise ValueError(f"{root}/mkdocs.yml does not use the {PLUGIN} plugin")
    folder = Path(folder or ArtifactsConfig.cache_dir.default)
    return folder if folder.is_absolute() else Path(root) / folder
