"""The companion notebook's page, made offline and accessible (run by the notebook job).

mkdocs-jupyter (nbconvert's "lab" template) turns the executed notebook into HTML; this
module finishes that HTML:

- nbconvert's template adds MathJax and Mermaid loaders that point at a CDN. They are
  removed, and the ``$...$`` / ``$$...$$`` maths of the Markdown cells is converted to
  MathML at build time with the same function as the chapters (``qkv_site.maths``).
  Anything else that would load from another host stops the build.
- nbconvert cannot take alt text from a notebook; a code cell that draws a figure gives
  it in its metadata (``"alt": "..."``) and it is put on the cell's image here.
- The template inlines ~600 KB of CSS into the page and every figure as base64:
  :func:`split_styles` takes the CSS out so the site serves it once, as a stylesheet every
  notebook page links, and :func:`split_images` makes each figure a file beside the page.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re

from qkv_site.maths import to_mathml

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


_STYLE = re.compile(r"<style[^>]*>(.*?)</style>", re.S)


def split_styles(page_html: str) -> tuple[str, str]:
    """The page without its ``<style>`` elements, and their CSS joined in page order."""
    css = "\n".join(m.group(1).strip() for m in _STYLE.finditer(page_html))
    return _STYLE.sub("", page_html), css + "\n"


_DATA_IMAGE = re.compile(r'src="data:image/(png|jpeg);base64,([A-Za-z0-9+/=\s]+)"')


def split_images(page_html: str) -> tuple[str, dict[str, bytes]]:
    """The page with each embedded (base64) image replaced by a file beside the page.

    Files are named by a hash of their bytes, so an unchanged figure keeps its URL.
    """
    images = {}

    def to_file(match: re.Match) -> str:
        data = base64.b64decode(match.group(2))
        name = f"figure-{hashlib.sha256(data).hexdigest()[:12]}.{match.group(1)}"
        images[name] = data
        return f'src="{name}"'

    return _DATA_IMAGE.sub(to_file, page_html), images


def finish(page_html: str, alts: dict[str, str]) -> tuple[str, str, dict[str, bytes]]:
    """The finished page HTML, its CSS and its images (see the module docstring)."""
    page_html = offline(add_alt_text(render_markdown_maths(page_html), alts))
    page_html, css = split_styles(page_html)
    page_html, images = split_images(page_html)
    return page_html, css, images
