"""The companion notebook: stored clean, runs top to bottom, and its page works offline.

The notebook (docs/notebook.ipynb) is rendered by mkdocs-jupyter in a job of the
qkv-artifacts plugin and finished by ``qkv_site.notebook_page``; these tests check the
stored file, a fresh execution and the functions that finish the page (the built page is
checked in tests/site/test_notebook_page.py).
"""

from __future__ import annotations

import base64
import inspect
import json

import nbformat
import pytest
from bs4 import BeautifulSoup
from nbclient import NotebookClient
from qkv_site import notebook_page
from support import HANG, ROOT

NOTEBOOK = ROOT / "docs" / "notebook.ipynb"


# ---- the stored notebook ---------------------------------------------------------------


def test_stored_notebook_is_valid_and_has_no_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(cell.source.strip() for cell in code)
    assert [c.id for c in code if c.outputs] == []
    assert [c.id for c in code if c.execution_count is not None] == []
    assert nb.metadata.kernelspec.name == "python3"
    assert nb.metadata.get("description"), "the page's <meta description> comes from here"


def test_every_figure_cell_gives_alt_text():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    drawing = [c for c in nb.cells if c.cell_type == "code" and "plt.show()" in c.source]
    assert drawing
    assert [c.id for c in drawing if not c.metadata.get("alt")] == []


# The notebook's computation, whole: projections, scores, scaling, softmax, output, masks,
# heads, cross-attention and the cache. The run below records which of these it calls.
WHOLE_COMPUTATION = (
    "project",
    "scale_factor",
    "softmax",
    "attention",
    "causal_mask",
    "padding_mask",
    "multi_head_attention",
    "cross_attention",
    "decode_with_cache",
    "decode_without_cache",
    "WorkCounter",
    "kv_cache_bytes",
)

# Run in the kernel before the notebook's first cell (not stored in the notebook): every
# Python function that starts running is recorded by its file, first line and name.
_RECORD_CALLS = """
import sys
_qkv_calls = set()
def _qkv_record(frame, event, arg):
    if event == "call":
        code = frame.f_code
        _qkv_calls.add((code.co_filename, code.co_firstlineno, code.co_name))
sys.setprofile(_qkv_record)
"""
_REPORT_CALLS = "import json, sys; sys.setprofile(None); print(json.dumps(sorted(_qkv_calls)))"


def _code_of(name: str):
    """The code that runs when the notebook calls ``qkv.NAME``: the function's, or a class's
    ``__init__``."""
    import qkv

    target = getattr(qkv, name)
    code = (target.__init__ if isinstance(target, type) else inspect.unwrap(target)).__code__
    return (code.co_filename, code.co_firstlineno, code.co_name)


def test_notebook_runs_top_to_bottom_and_calls_the_whole_computation(tmp_path):
    """A fresh kernel executes every cell without an error (its asserts check its prose),
    draws every figure it shows, and calls each function of the computation."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    stored = len(nb.cells)
    nb.cells = [nbformat.v4.new_code_cell(_RECORD_CALLS), *nb.cells, nbformat.v4.new_code_cell(_REPORT_CALLS)]
    client = NotebookClient(
        nb, timeout=HANG, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    assert len(nb.cells) == stored + 2
    outputs = [o for c in nb.cells[1:-1] if c.cell_type == "code" for o in c.outputs]
    assert [o for o in outputs if o.output_type == "error"] == []
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    drawing = [c for c in nb.cells if c.cell_type == "code" and "plt.show()" in c.source]
    assert len(images) == len(drawing)
    called = {tuple(c) for c in json.loads(nb.cells[-1].outputs[0]["text"])}
    missing = [name for name in WHOLE_COMPUTATION if _code_of(name) not in called]
    assert missing == [], f"the notebook never calls these qkv functions: {missing}"


# ---- qkv_site.notebook_page -----------------------------------------------------------------

MARKDOWN_CELL = (
    '<div class="jp-RenderedHTMLCommon jp-RenderedMarkdown jp-MarkdownOutput" '
    'data-mime-type="text/markdown">{}</div>'
)


def soup(html: str) -> BeautifulSoup:
    return BeautifulSoup(html, "html.parser")


def test_maths_in_markdown_cells_becomes_mathml():
    page = soup(MARKDOWN_CELL.format("<p>Scale by $\\sqrt{d_k}$:</p>\n<p>$$QK^\\top$$</p>"))
    notebook_page.maths_to_mathml(page)
    out = str(page)
    assert "$" not in out
    assert out.count("<math") == 2
    assert '<div class="arithmatex"><math' in out and "<p><div" not in out
    assert '<p>Scale by <span class="arithmatex"><math' in out


def test_dollars_outside_markdown_cells_are_left_alone():
    code = '<div class="highlight-ipynb"><pre>price = "$5 or $6"</pre></div>'
    page = soup(code + MARKDOWN_CELL.format("<p>$x$</p>"))
    notebook_page.maths_to_mathml(page)
    assert str(page).startswith(code) and str(page).count("<math") == 1


@pytest.mark.parametrize(
    "html",
    [
        '<script src="https://cdn.example.org/x.js"></script>',
        '<link rel="stylesheet" href="//cdn.example.org/x.css">',
        '<img srcset="a.png 1x, https://cdn.example.org/b.png 2x">',
        '<script type="module">await import("https://cdn.example.org/m.mjs")</script>',
        "<style>.x { background: url('//cdn.example.org/a.png') }</style>",
    ],
)
def test_a_remaining_external_load_stops_the_build(html):
    with pytest.raises(ValueError, match=r"cdn\.example\.org"):
        notebook_page.finish(html, {})


def test_cdn_loaders_of_the_template_are_removed():
    page = (
        '<p>a</p><!-- Load mathjax -->\n<script src="https://cdn.example.org/mathjax.js">'
        '</script>\n<script type="text/x-mathjax-config">init()</script>\n<script src="">'
        '</script><!-- End of mathjax configuration --><script type="module">\n'
        'const m = await import("https://cdn.example.org/mermaid.mjs");</script><p>b</p>'
    )
    html, *_ = notebook_page.finish(page, {})
    assert html.replace("\n", "") == "<p>a</p><p>b</p>"


def test_alt_text_goes_on_the_images_of_its_cell():
    no_alt = '<img alt="No description has been provided for this image" src="x.png"/>'
    cells = (
        f'<div class="jp-Cell jp-CodeCell jp-Notebook-cell" id="cell-id=one">{no_alt}</div>'
        f'<div class="jp-Cell jp-CodeCell jp-Notebook-cell" id="cell-id=two">{no_alt}</div>'
    )
    html, *_ = notebook_page.finish(cells, {"two": 'Weights "sum" to 1'})
    assert html.count(no_alt) == 1
    assert "alt='Weights \"sum\" to 1'" in html or 'alt="Weights &quot;sum&quot; to 1"' in html
    with pytest.raises(ValueError, match="cell three"):
        notebook_page.finish(cells, {"three": "a cell the page does not have"})


def test_styles_are_taken_out_in_order():
    page = "<style>.a { x: 1 }</style><p>kept</p><style type='text/css'>.b { y: 2 }</style>"
    html, css, *_ = notebook_page.finish(page, {})
    assert html == "<p>kept</p>"
    assert css.index(".a") < css.index(".b") and "<style" not in css


def test_each_embedded_image_becomes_a_file_named_by_its_bytes():
    png = b"\x89PNG fake bytes"
    encoded = base64.b64encode(png).decode()
    page = f'<img alt="a" src="data:image/png;base64,{encoded}"/><img src="data:image/png;base64,{encoded}"/>'
    html, _, images, _ = notebook_page.finish(page, {})
    assert list(images.values()) == [png]
    (name,) = images
    assert html == f'<img alt="a" src="{name}"/><img src="{name}"/>'


def test_the_table_of_contents_nests_the_headings_without_their_anchor_signs():
    page = (
        '<h1 id="top">Title<a class="anchor-link" href="#top">¶</a></h1>'
        '<h2 id="one">One</h2><h3 id="deep">Deep</h3><h2 id="two">Two <em>2</em></h2>'
    )
    *_, toc = notebook_page.finish(page, {})
    assert toc == [
        {
            "level": 1,
            "id": "top",
            "name": "Title",
            "children": [
                {
                    "level": 2,
                    "id": "one",
                    "name": "One",
                    "children": [{"level": 3, "id": "deep", "name": "Deep", "children": []}],
                },
                {"level": 2, "id": "two", "name": "Two 2", "children": []},
            ],
        }
    ]
