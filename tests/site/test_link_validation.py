"""The strict build rejects a broken internal link, a broken anchor and a link it cannot read.

A tiny docs tree with the site's own ``validation:`` settings (read from mkdocs.yml) is
built with ``--strict``: with a link to a missing page, to a missing heading or to something
that is no page, it fails and names it; with sound links it builds. MkDocs on its own only
logs a missing anchor as information, so a last build shows that the failure comes from the
site's settings.
"""

from __future__ import annotations

import subprocess

import pytest
import yaml
from checkout import clean_env
from support import build_site, mkdocs_config

BROKEN_PAGE = "See [a page that is not there](missing.md).\n"
BROKEN_ANCHOR = "See [a heading](other.md#no-such-heading).\n"
UNRECOGNIZED = "See [a folder](a-folder/).\n"  # no page: MkDocs cannot tell what it means
BROKEN = [(BROKEN_PAGE, "missing.md"), (BROKEN_ANCHOR, "#no-such-heading"), (UNRECOGNIZED, "a-folder/")]
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


def warnings(done: subprocess.CompletedProcess) -> str:
    return "\n".join(line for line in (done.stdout + done.stderr).splitlines() if "WARNING" in line)


@pytest.mark.parametrize(("link", "named"), BROKEN, ids=["page", "anchor", "unrecognized"])
def test_a_broken_link_or_anchor_alone_fails_the_strict_build_naming_it(tmp_path, link, named):
    done = build_fixture(tmp_path, link, validation_block())
    assert done.returncode != 0, done.stdout + done.stderr
    assert named in warnings(done)


def test_the_same_tree_with_sound_links_builds(tmp_path):
    done = build_fixture(tmp_path, SOUND, validation_block())
    assert done.returncode == 0, done.stdout + done.stderr


def test_without_the_sites_settings_a_broken_anchor_passes(tmp_path):
    done = build_fixture(tmp_path, BROKEN_ANCHOR, "")
    assert done.returncode == 0, done.stdout + done.stderr
