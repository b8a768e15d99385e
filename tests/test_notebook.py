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


# ---- the stored notebook ---------------------------------------------------------------


def test_stored_notebook_is_valid_and_has_no_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert len(code) >= 10
    assert [c.id for c in code if c.outputs] == []
    assert [c.id for c in code if c.execution_count is not None] == []
    assert nb.metadata.kernelspec.name == "python3"
    assert nb.metadata.get("description"), "the page's <meta description> comes from here"


def test_notebook_covers_the_whole_computation():
    """Projections, scores, scaling, softmax, output, masks, heads, cross-attention, cache."""
    source = "\n".join(c.source for c in nbformat.read(NOTEBOOK, as_version=4).cells)
    for call in ("qkv.project(", "qkv.scale_factor(", "qkv.softmax(", "qkv.attention(",
                 "qkv.causal_mask(", "qkv.padding_mask(", "qkv.multi_head_attention(",
                 "qkv.cross_attention(", "qkv.decode_with_cache(", "qkv.decode_without_cache(",
                 "qkv.WorkCounter(", "qkv.kv_cache_bytes("):
        assert call in source, call


def test_every_figure_cell_gives_alt_text():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    drawing = [c for c in nb.cells if c.cell_type == "code" and "plt.show()" in c.source]
    assert drawing
    assert [c.id for c in drawing if not c.metadata.get("alt")] == []


def test_notebook_runs_top_to_bottom(tmp_path):
    """A fresh kernel executes every cell without an error; its asserts check its prose."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert [o for o in outputs if o.output_type == "error"] == []
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    drawing = [c for c in nb.cells if c.cell_type == "code" and "plt.show()" in c.source]
    assert len(images) == len(drawing)


# ---- hooks/notebook.py -----------------------------------------------------------------

MARKDOWN_CELL = ('<div class="jp-RenderedHTMLCommon jp-RenderedMarkdown jp-MarkdownOutput" '
                 'data-mime-type="text/markdown">{}</div>')


def test_maths_in_markdown_cells_becomes_mathml():
    cell_html = MARKDOWN_CELL.format("<p>Scale by $\\sqrt{d_k}$:</p>\n<p>$$QK^\\top$$</p>")
    out = hook.render_markdown_maths(cell_html)
    assert "$" not in out
    assert out.count("<math") == 2
    assert '<div class="arithmatex"><math' in out and "<p><div" not in out


def test_dollars_outside_markdown_cells_are_left_alone():
    code = '<div class="highlight-ipynb"><pre>price = "$5 or $6"</pre></div>'
    assert hook.render_markdown_maths(code + MARKDOWN_CELL.format("<p>$x$</p>")).startswith(code)


def test_a_remaining_external_load_stops_the_build():
    with pytest.raises(ValueError, match="another host"):
        hook.offline('<script src="https://cdn.example.org/x.js"></script>')
    with pytest.raises(ValueError, match="another host"):
        hook.offline('<script type="module">await import("https://cdn.example.org/m.mjs")</script>')
    with pytest.raises(ValueError, match="another host"):
        hook.offline("<style>.x { background: url('//cdn.example.org/a.png') }</style>")


def test_cdn_loaders_of_the_template_are_removed():
    page = ('<p>a</p><!-- Load mathjax -->\n<script src="https://cdn.example.org/mathjax.js">'
            '</script>\n<script type="text/x-mathjax-config">init()</script>\n'
            '<!-- End of mathjax configuration --><script type="module">\n'
            'const m = await import("https://cdn.example.org/mermaid.mjs");</script><p>b</p>')
    assert hook.offline(page) == "<p>a</p><p>b</p>"


def test_alt_text_goes_on_the_images_of_its_cell():
    no_alt = '<img alt="No description has been provided for this image" src="data:,">'
    cells = (f'<div class="jp-Cell jp-CodeCell jp-Notebook-cell" id="cell-id=one">{no_alt}</div>'
             f'<div class="jp-Cell jp-CodeCell jp-Notebook-cell" id="cell-id=two">{no_alt}</div>')
    out = hook.add_alt_text(cells, {"two": 'Weights "sum" to 1'})
    assert out.count(no_alt) == 1
    assert 'alt="Weights &quot;sum&quot; to 1"' in out


# ---- the built page --------------------------------------------------------------------


@pytest.fixture(scope="module")
def notebook_page(built_site) -> str:
    return (built_site / "notebook" / "index.html").read_text(encoding="utf-8")


@pytest.mark.build
def test_page_links_the_download_of_the_stored_notebook(built_site, notebook_page):
    buttons = [attrs for tag, _, attrs in _refs(notebook_page)
               if attrs.get("data-testid") == "download-notebook"]
    assert len(buttons) == 1
    assert buttons[0]["href"] == "notebook.ipynb" and "download" in buttons[0]
    published = built_site / "notebook" / "notebook.ipynb"
    assert published.read_bytes() == NOTEBOOK.read_bytes()


@pytest.mark.build
def test_page_names_no_other_host_in_any_src_or_href(notebook_page):
    external = [url for _, url, _ in _refs(notebook_page)
                if urlparse(url).scheme in ("http", "https") or url.startswith("//")]
    assert external == []
    assert not re.search(r"import\(\s*['\"](?:https?:)?//", notebook_page)
    assert "mathjax" not in notebook_page.lower()


@pytest.mark.build
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


@pytest.mark.build
def test_each_cell_prints_one_block_so_builds_do_not_differ(notebook_page):
    """The kernel's text arrives in timed chunks; the page merges them (see hooks/notebook.py)."""
    cells = [notebook_page[m.start():hook._div_end(notebook_page, m.end())]
             for m in hook._CELL.finditer(notebook_page)]
    printed = [c.count('data-mime-type="text/plain"') for c in cells]
    assert sum(printed) >= 10 and max(printed) == 1, printed


@pytest.mark.build
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


@pytest.mark.browser
def test_download_button_downloads_the_notebook(page, site_url):
    page.goto(site_url + "notebook/", wait_until="networkidle")
    button = page.get_by_test_id("download-notebook")
    assert button.is_visible()
    with page.expect_download() as info:
        button.click()
    download = info.value
    assert download.suggested_filename == "notebook.ipynb"
    assert json.loads(open(download.path(), encoding="utf-8").read())["nbformat"] == 4


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
