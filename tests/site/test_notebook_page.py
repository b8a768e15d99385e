"""The companion notebook: stored clean, runs top to bottom, and its page works offline.

The notebook (docs/notebook.ipynb) is rendered by mkdocs-jupyter and post-processed by
hooks/notebook.py; these tests check the stored file, a fresh execution, the hook's
functions, and the built page.
"""

from __future__ import annotations

import html
import importlib.util
import json
import re
import sys
from html.parser import HTMLParser
from urllib.parse import urljoin, urlparse

import nbformat
import pytest
from nbclient import NotebookClient
from support import ROOT, build_site

NOTEBOOK = ROOT / "docs" / "notebook.ipynb"


def _load_hook():
    """hooks/notebook.py as a module (it imports its sibling hooks/maths.py)."""
    sys.path.insert(0, str(ROOT / "hooks"))
    try:
        spec = importlib.util.spec_from_file_location("notebook_hook", ROOT / "hooks" / "notebook.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(ROOT / "hooks"))


hook = _load_hook()


class _Links(HTMLParser):
    """Every src and href on a page, with the tag it sits on."""

    def __init__(self):
        super().__init__()
        self.refs: list[tuple[str, str, dict]] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for name in ("src", "href"):
            if attrs.get(name) is not None:
                self.refs.append((tag, attrs[name], attrs))


def _refs(html: str) -> list[tuple[str, str, dict]]:
    parser = _Links()
    parser.feed(html)
    return parser.refs


# ---- the built page --------------------------------------------------------------------


@pytest.fixture(scope="module")
def notebook_page(built_site) -> str:
    return (built_site / "notebook" / "index.html").read_text(encoding="utf-8")


def test_page_links_the_download_of_the_stored_notebook(built_site, notebook_page):
    buttons = [attrs for tag, _, attrs in _refs(notebook_page)
               if attrs.get("data-testid") == "download-notebook"]
    assert len(buttons) == 1
    assert buttons[0]["href"] == "notebook.ipynb" and "download" in buttons[0]
    published = built_site / "notebook" / "notebook.ipynb"
    assert published.read_bytes() == NOTEBOOK.read_bytes()


def test_page_names_no_other_host_in_any_src_or_href(notebook_page):
    external = [url for _, url, _ in _refs(notebook_page)
                if urlparse(url).scheme in ("http", "https") or url.startswith("//")]
    assert external == []
    assert not re.search(r"import\(\s*['\"](?:https?:)?//", notebook_page)
    assert "mathjax" not in notebook_page.lower()


def test_page_maths_is_mathml_and_images_have_alt_text(notebook_page):
    cells = [notebook_page[m.end():hook._div_end(notebook_page, m.end())]
             for m in hook._MARKDOWN_CELL.finditer(notebook_page)]
    assert cells and [c for c in cells if "$" in c] == []
    assert notebook_page.count("<math") >= 20
    assert "No description has been provided" not in notebook_page
    alts = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    for cell in alts["cells"]:
        if "alt" in cell["metadata"]:
            assert f'alt="{html.escape(cell["metadata"]["alt"])}"' in notebook_page, cell["id"]


def test_each_cell_prints_one_block_so_builds_do_not_differ(notebook_page):
    """The kernel's text arrives in timed chunks; the page merges them (see hooks/notebook.py)."""
    cells = [notebook_page[m.start():hook._div_end(notebook_page, m.end())]
             for m in hook._CELL.finditer(notebook_page)]
    printed = [c.count('data-mime-type="text/plain"') for c in cells]
    assert sum(printed) >= 10 and max(printed) == 1, printed


def test_page_description_and_relative_links_resolve(built_site, notebook_page):
    description = nbformat.read(NOTEBOOK, as_version=4).metadata.description
    assert f'<meta name="description" content="{description}">' in notebook_page
    base = "http://site/notebook/"
    missing = []
    for _, url, _ in _refs(notebook_page):
        if url.startswith(("#", "data:")) or urlparse(url).scheme:
            continue
        path = urlparse(urljoin(base, url)).path.lstrip("/")
        target = built_site / path
        if not (target.is_file() or (target / "index.html").is_file()):
            missing.append(url)
    assert missing == []


def test_a_failing_cell_fails_the_build(tmp_path):
    """With the site's mkdocs-jupyter settings, a notebook whose assert fails stops the build."""
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    plugin = re.search(r"^  - mkdocs-jupyter:.*\n(?:      .*\n)+", config, re.M)
    assert plugin and "allow_errors: false" in plugin.group(0)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# Fixture\n")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        'assert 1 + 1 == 3, "the text says so"')])
    nb.metadata.kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "docs" / "broken.ipynb")
    (tmp_path / "mkdocs.yml").write_text(f"site_name: fixture\nplugins:\n{plugin.group(0)}")
    done = build_site(tmp_path / "site", cwd=tmp_path)
    assert done.returncode != 0
    assert "the text says so" in done.stdout + done.stderr
