"""mkdocs.yml as data, read one way by everything outside MkDocs (the tests, the benchmarks):
plain YAML with MkDocs' ``!ENV`` tag resolved as MkDocs resolves it, and the artifact cache
folder a build of the project would use."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

PLUGIN = "qkv-artifacts"


def mkdocs_config(root: Path, environ: Mapping[str, str] | None = None) -> dict:
    """``root/mkdocs.yml`` as data (MkDocs' own loader would also import the hooks).

    An ``!ENV [NAME, ..., default]`` value is resolved as MkDocs resolves it (the first of
    the variables set, its text read as YAML, else the default), from ``environ`` alone: by
    default none is set, so each takes its default, whatever this process's environment holds.
    """
    import yaml

    environ = {} if environ is None else environ

    def env(loader, node):
        if isinstance(node, yaml.ScalarNode):
            names, default = [loader.construct_scalar(node)], None
        else:
            *names, default = loader.construct_sequence(node)
            names, default = (names, default) if names else ([default], None)
        found = next((environ[n] for n in names if n in environ), None)
        return default if found is None else yaml.safe_load(found)

    loader = type("MkDocsYaml", (yaml.SafeLoader,), {})
    loader.add_constructor("!ENV", env)
    return yaml.load((Path(root) / "mkdocs.yml").read_text(encoding="utf-8"), Loader=loader)


def cache_dir(root: Path, environ: Mapping[str, str] | None = None) -> Path:
    """The artifact cache a build of ``root`` uses with ``environ`` (default: this process's
    environment, so ``QKV_CACHE`` counts wherever mkdocs.yml reads it)."""
    from qkv_site.artifacts.plugin import ArtifactsConfig

    config = mkdocs_config(root, os.environ if environ is None else environ)
    for entry in config.get("plugins", []):
        if isinstance(entry, dict) and PLUGIN in entry:
            folder = (entry[PLUGIN] or {}).get("cache_dir")
            break
    else:
        raise ValueError(f"{root}/mkdocs.yml does not use the {PLUGIN} plugin")
    folder = Path(folder or ArtifactsConfig.cache_dir.default)
    return folder if folder.is_absolute() else Path(root) / folder
