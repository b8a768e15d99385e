"""The companion notebook's built page: offline, MathML, alt text, one stylesheet, and a
failing cell stops the build.

The notebook is executed and rendered (mkdocs-jupyter's converter) by a job of the
qkv-artifacts plugin, which makes it a page, and finished by ``qkv_site.notebook_page``;
these tests read the built HTML with BeautifulSoup.
"""

from __future__ import annotations

import re
from urllib.parse import urljoin, urlparse

import nbformat
import pytest
import yaml
from bs4 import BeautifulSoup
from support import ROOT, build_site, mkdocs_config

NOTEBOOK = ROOT / "docs" / "notebook.ipynb"


@pytest.fixture(scope="module")
def soup(built_site) -> BeautifulSoup:
    return BeautifulSoup((built_site / "notebook" / "index.html").read_text(encoding="utf-8"), "html.parser")


def _urls(soup: BeautifulSoup) -> list[str]:
    """Every src and href, but the page's own published address (rel=canonical)."""
    return [
        tag[name]
        for name in ("src", "href")
        for tag in soup.find_all(attrs={name: True})
        if not (tag.name == "link" and "canonical" in tag.get("rel", []))
    ]


def test_page_links_the_download_of_the_stored_notebook(built_site, soup):
    buttons = soup.select('[data-testid="download-notebook"]')
    assert len(buttons) == 1
    assert buttons[0]["href"] == "notebook.ipynb" and buttons[0].has_attr("download")
    published = built_site / "notebook" / "notebook.ipynb"
    assert published.read_bytes() == NOTEBOOK.read_bytes()


def test_page_names_no_other_host_in_any_src_or_href(soup):
    external = [
        url for url in _urls(soup) if urlparse(url).scheme in ("http", "https") or url.startswith("//")
    ]
    assert external == []
    scripts = " ".join(s.get_text() for s in soup.find_all("script"))
    assert not re.search(r"import\(\s*['\"](?:https?:)?//", scripts), "a script imports from a host"
    assert "mathjax" not in str(soup).lower()


def test_page_maths_is_mathml_and_images_have_alt_text(soup):
    cells = soup.select(".jp-RenderedMarkdown")
    assert cells and [c["class"] for c in cells if "$" in c.get_text()] == []
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    formulas = [
        m
        for cell in notebook.cells
        if cell.cell_type == "markdown"  # `code` aside
        for m in re.findall(r"\$\$.+?\$\$|\$.+?\$", re.sub(r"`[^`]*`", "", cell.source), re.S)
    ]
    assert len(soup.find_all("math")) == len(formulas)  # every formula of the text, as MathML
    images = soup.select(".jp-CodeCell img")
    assert images and all(img.get("alt") for img in images)
    assert "No description has been provided" not in str(soup)
    for cell in notebook.cells:
        if "alt" in cell.metadata:
            shown = soup.find(id=f"cell-id={cell.id}")
            assert [img["alt"] for img in shown.find_all("img")] == [cell.metadata.alt], cell.id


def test_each_cell_prints_one_block_so_builds_do_not_differ(soup):
    """The kernel's text arrives in timed chunks; the page merges them into one block."""
    cells = [c for c in nbformat.read(NOTEBOOK, as_version=4).cells if c.cell_type == "code"]
    printed = {
        c.id: len(soup.find(id=f"cell-id={c.id}").select('[data-mime-type="text/plain"]')) for c in cells
    }
    assert printed == {c.id: int("print(" in c.source) for c in cells}  # one block if it prints


def test_css_is_one_shared_stylesheet_not_inline(built_site, soup):
    assert soup.find("style", string=lambda s: s and ".jp-" in s) is None, "nbconvert's CSS is inline"
    links = [link["href"] for link in soup.find_all("link", rel="stylesheet")]
    assert "../assets/notebook.css" in links
    css = (built_site / "assets" / "notebook.css").read_text(encoding="utf-8")
    assert ".jp-Cell" in css and ".highlight" in css  # the template's look: cells and code colours


def test_page_description_and_relative_links_resolve(built_site, soup):
    description = nbformat.read(NOTEBOOK, as_version=4).metadata.description
    assert soup.find("meta", attrs={"name": "description"})["content"] == description
    base = "http://site/notebook/"
    missing = []
    for url in _urls(soup):
        if url.startswith(("#", "data:")) or urlparse(url).scheme:
            continue
        path = urlparse(urljoin(base, url)).path.lstrip("/")
        target = built_site / path
        if not (target.is_file() or (target / "index.html").is_file()):
            missing.append(url)
    assert missing == []


def test_a_failing_cell_fails_the_build_naming_the_notebook(tmp_path):
    """With the site's plugin settings, a notebook whose assert fails stops the build."""
    plugins = [p for p in mkdocs_config()["plugins"] if isinstance(p, dict) and "qkv-artifacts" in p]
    plugins[0]["qkv-artifacts"]["cache_dir"] = str(tmp_path / "cache")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# Fixture\n")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('assert 1 + 1 == 3, "the text says so"')])
    nb.metadata.kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "docs" / "broken.ipynb")
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump({"site_name": "fixture", "plugins": plugins}))
    done = build_site(tmp_path / "site", cwd=tmp_path)
    assert done.returncode != 0
    assert "docs/broken.ipynb: computing this notebooks artifact failed" in done.stderr
    assert "the text says so" in done.stderr
