"""Make the companion notebook's page (docs/notebook.ipynb, rendered by mkdocs-jupyter)
behave like every other page: offline maths, alt text, a description, a fresh cache.

- nbconvert's template adds MathJax and Mermaid loaders that point at a CDN. They are
  removed, and the ``$...$`` / ``$$...$$`` maths of the Markdown cells is converted to
  MathML at build time with the same function as the chapters (``hooks/maths.py``).
  Anything else in the notebook's HTML that would load from another host stops the build.
- nbconvert cannot take alt text from a notebook; a code cell that draws a figure gives
  it in its metadata (``"alt": "..."``) and it is put on the cell's image here.
- The page description comes from the notebook's metadata (``"description": "..."``).
- mkdocs-jupyter caches the executed page by the notebook's own bytes only, so an edit to
  ``qkv`` would leave stale numbers on the page. The cache folder is keyed here by the
  contents of ``qkv/`` (and of this hook) as well.
- The kernel sends printed text in chunks on a timer, so on a busy machine one cell's output
  could be split in two one build and not the next. nbclient can merge a cell's chunks
  (``coalesce_streams``), but neither nbconvert's configuration nor mkdocs-jupyter reaches
  that setting, so it is switched on here; the page is then the same bytes every build.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import shutil
from pathlib import Path

from maths import to_mathml
from nbconvert.preprocessors import ExecutePreprocessor

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache" / "mkdocs-jupyter"

# What nbconvert's "lab" template puts in every page; none of it is needed here.
_MATHJAX = re.compile(r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->", re.S)
_MERMAID = re.compile(r'<script type="module">(?:(?!</script>).)*?mermaid.*?</script>', re.S)
_EXTERNAL = re.compile(  # an attribute, a JS import or a CSS url() naming another host
    r"""(?:\b(?:src|href)\s*=\s*["']?|import\(\s*["']|url\(\s*["']?)(?:https?:)?//""", re.I)
_MARKDOWN_CELL = re.compile(r'<div class="jp-RenderedHTMLCommon jp-RenderedMarkdown[^"]*"[^>]*>')
# A display formula alone in its paragraph replaces the paragraph (a div may not sit in a p).
_DISPLAY_MATH = re.compile(r"<p>\s*\$\$(.+?)\$\$\s*</p>|\$\$(.+?)\$\$", re.S)
_INLINE_MATH = re.compile(r"(?<![\\$])\$(?!\$)(.+?)(?<![\\$])\$", re.S)
_CELL = re.compile(r'<div class="jp-Cell jp-CodeCell[^"]*" id="cell-id=([^"]+)">')
_NO_ALT = 'alt="No description has been provided for this image"'


def is_notebook(page) -> bool:
    return page.file.src_uri.endswith(".ipynb")


def _div_end(text: str, start: int) -> int:
    """Index just past the ``</div>`` closing the div whose content starts at ``start``."""
    depth = 1
    for tag in re.finditer(r"<div\b|</div>", text[start:]):
        depth += 1 if tag.group() == "<div" else -1
        if depth == 0:
            return start + tag.end()
    raise ValueError("unbalanced <div> in the notebook's HTML")


def _maths_to_mathml(cell_html: str) -> str:
    cell_html = _DISPLAY_MATH.sub(
        lambda m: f'<div class="arithmatex">{to_mathml(m.group(1) or m.group(2), True)}</div>',
        cell_html)
    return _INLINE_MATH.sub(
        lambda m: f'<span class="arithmatex">{to_mathml(m.group(1), display=False)}</span>',
        cell_html)


def render_markdown_maths(page_html: str) -> str:
    """Convert the maths of every Markdown cell (and only there: code may contain ``$``)."""
    out, pos = [], 0
    for match in _MARKDOWN_CELL.finditer(page_html):
        if match.start() < pos:
            continue
        end = _div_end(page_html, match.end())
        out += [page_html[pos:match.end()], _maths_to_mathml(page_html[match.end():end])]
        pos = end
    return "".join(out) + page_html[pos:]


def add_alt_text(page_html: str, alts: dict[str, str]) -> str:
    """Put each code cell's ``alt`` metadata on the images that cell produced."""
    out, pos = [], 0
    for match in _CELL.finditer(page_html):
        end = _div_end(page_html, match.end())
        cell = page_html[match.start():end]
        if match.group(1) in alts:
            cell = cell.replace(_NO_ALT, f'alt="{html.escape(alts[match.group(1)])}"')
        out += [page_html[pos:match.start()], cell]
        pos = end
    return "".join(out) + page_html[pos:]


def offline(page_html: str) -> str:
    """The page without nbconvert's CDN loaders; raises if another external load is left."""
    page_html = _MERMAID.sub("", _MATHJAX.sub("", page_html))
    if leftover := _EXTERNAL.search(page_html):
        context = page_html[max(0, leftover.start() - 80):leftover.end() + 80]
        raise ValueError(f"the notebook page would load from another host: ...{context}...")
    return page_html


def _cache_key() -> str:
    """A hash of ``qkv/`` and of this hook, which both shape the cached page."""
    digest = hashlib.sha256()
    for path in [*sorted((ROOT / "qkv").rglob("*.py")), Path(__file__).resolve()]:
        digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


# ---- MkDocs event handlers -------------------------------------------------------------


def on_config(config):
    plugin = config.plugins.get("mkdocs-jupyter")
    if plugin is not None:
        ExecutePreprocessor.coalesce_streams = True  # shadows a trait that is not configurable
        key = _cache_key()
        for stale in CACHE.glob("*"):  # caches of other versions of qkv, or unkeyed ones
            if stale.name != key:  # ignore errors: a concurrent build may remove it too
                shutil.rmtree(stale, ignore_errors=True) if stale.is_dir() else stale.unlink(True)
        plugin.config["cache_dir"] = str(CACHE / key)
    return config


def on_page_content(page_html, page, config, files):
    if not is_notebook(page):
        return page_html
    notebook = json.loads(Path(page.file.abs_src_path).read_text(encoding="utf-8"))
    if description := notebook.get("metadata", {}).get("description"):
        page.meta["description"] = description
    alts = {cell["id"]: cell["metadata"]["alt"] for cell in notebook["cells"]
            if "id" in cell and "alt" in cell.get("metadata", {})}
    try:
        return offline(add_alt_text(render_markdown_maths(page_html), alts))
    except ValueError as error:
        raise ValueError(f"{page.file.src_path}: {error}") from error
