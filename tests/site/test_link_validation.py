"""The strict build rejects a broken internal link and a broken anchor.

A tiny docs tree with the site's own ``validation:`` settings (read from mkdocs.yml) is
built with ``--strict``: with a link to a missing page and a link to a missing heading it
fails and names both; without them it builds. MkDocs on its own only logs a missing anchor
as information, so a third build shows that the failure comes from the site's settings.
"""

from __future__ import annotations

import subprocess

import yaml
from checkout import clean_env
from support import build_site, mkdocs_config

BROKEN = "See [a page that is not there](missing.md) and [a heading](other.md#no-such-heading).\n"
SOUND = "See [the other page](other.md) and [its heading](other.md#a-real-heading).\n"


def validation_block() -> str:
    """The ``validation:`` settings of the site's mkdocs.yml, as YAML."""
    return yaml.safe_dump({"validation": mkdocs_config()["validation"]})


def build_fixture(tmp_path, index: str, validation: str) -> subprocess.CompletedProcess:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text(f"# Fixture\n\n{index}")
    (docs / "other.md").write_text("# Other\n\n## A real heading\n\nText.\n")
    (tmp_path / "mkdocs.yml").write_text(f"site_name: fixture\n{validation}")
    return build_site(tmp_path / "site", cwd=tmp_path, env=clean_env())


def test_broken_link_and_anchor_fail_the_strict_build_naming_both(tmp_path):
    done = build_fixture(tmp_path, BROKEN, validation_block())
    log = done.stdout + done.stderr
    assert done.returncode != 0, log
    assert "missing.md" in log
    assert "#no-such-heading" in log


def test_the_same_tree_with_sound_links_builds(tmp_path):
    done = build_fixture(tmp_path, SOUND, validation_block())
    assert done.returncode == 0, done.stdout + done.stderr


def test_without_the_sites_settings_a_broken_anchor_passes(tmp_path):
    done = build_fixture(tmp_path, "See [a heading](other.md#no-such-heading).\n", "")
    assert done.returncode == 0, done.stdout + done.stderr
