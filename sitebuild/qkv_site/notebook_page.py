"""The companion notebook's page, made offline and accessible (run by the notebook job).

mkdocs-jupyter's converter (nbconvert's "lab" template) turns the executed notebook into
HTML; :func:`finish` reads that HTML with BeautifulSoup and finishes it:

- the template adds MathJax and Mermaid loaders that point at a CDN: they are removed, and
  the ``$...$`` / ``$$...$$`` maths of the Markdown cells becomes MathML at build time, with
  the same function as the chapters (``qkv_site.maths``). Anything else that would load
  from another host stops the build.
- nbconvert cannot take alt text from a notebook; a code cell that draws a figure gives it
  in its metadata (``"alt": "..."``) and it is put on the cell's images here.
- the template inlines ~600 KB of CSS and every figure as base64: the CSS is taken out, so
  the site serves it once as a stylesheet every notebook page links, and each figure
  becomes a file beside the page, named by its bytes.
- the page's table of contents is read off its headings (:func:`toc_tokens`).
"""

from __future__ import annotations

import base64
import hashlib
import re
from urllib.parse import urlparse

from bs4 import BeautifulSoup, Comment, NavigableString, Tag

from qkv_site.maths import to_mathml

NO_ALT = "No description has been provided for this image"
# maths in a Markdown cell's text: $$display$$ or $inline$ (not \$, not an empty $$)
MATHS = re.compile(r"\$\$(.+?)\$\$|(?<![\\$])\$(?!\$)(.+?)(?<![\\$])\$", re.S)
URL_ATTRIBUTES = ("src", "href", "srcset", "poster", "data", "action")
# an import() in a script, a url() or @import in CSS, naming another host
EXTERNAL_IN_CODE = re.compile(r"""(?:import\(\s*["']|url\(\s*["']?|@import\s+["'])(?:https?:)?//""", re.I)
IMAGE = re.compile(r"data:image/(png|jpeg);base64,([A-Za-z0-9+/=\s]+)")


def _fragment(markup: str) -> Tag:
    return BeautifulSoup(markup, "html.parser")


def remove_cdn_loaders(soup: BeautifulSoup) -> None:
    """Drop the template's MathJax loader and configuration and its Mermaid module."""
    for script in soup.find_all("script"):
        source, kind = script.get("src"), script.get("type", "")
        if (
            kind == "text/x-mathjax-config"
            or (source is not None and not source.strip())
            or "mathjax" in (source or "").lower()
            or (kind == "module" and "mermaid" in script.get_text())
        ):
            script.decompose()
    for comment in soup.find_all(string=lambda s: isinstance(s, Comment) and "mathjax" in s.lower()):
        comment.extract()


def maths_to_mathml(soup: BeautifulSoup) -> None:
    """MathML for the maths of every Markdown cell (and only there: code may hold ``$``)."""
    for cell in soup.select(".jp-RenderedMarkdown"):
        for text in cell.find_all(string=MATHS.search):
            if text.find_parent(["code", "pre"]) is not None:
                continue
            paragraph = text.parent
            if (
                paragraph.name == "p"
                and len(paragraph.contents) == 1
                and (whole := re.fullmatch(r"\s*\$\$(.+?)\$\$\s*", text, re.S))
            ):
                # a formula alone in its paragraph replaces it (a div may not sit in a p)
                paragraph.replace_with(
                    _fragment(f'<div class="arithmatex">{to_mathml(whole.group(1), display=True)}</div>')
                )
                continue
            pieces, last = [], 0
            for match in MATHS.finditer(text):
                pieces.append(NavigableString(text[last : match.start()]))
                latex, display = (match.group(1), True) if match.group(1) else (match.group(2), False)
                tag = "div" if display else "span"
                pieces.append(_fragment(f'<{tag} class="arithmatex">{to_mathml(latex, display)}</{tag}>'))
                last = match.end()
            pieces.append(NavigableString(text[last:]))
            text.replace_with(*pieces)


def add_alt_text(soup: BeautifulSoup, alts: dict[str, str]) -> None:
    """Put each code cell's ``alt`` metadata on the images that cell produced."""
    for cell_id, alt in alts.items():
        cell = soup.find(id=f"cell-id={cell_id}")
        if cell is None:
            raise ValueError(f"the notebook's cell {cell_id} has alt text but is not on the page")
        for image in cell.find_all("img", alt=NO_ALT):
            image["alt"] = alt


def take_styles(soup: BeautifulSoup) -> str:
    """Remove every ``<style>`` element; their CSS joined in page order."""
    styles = soup.find_all("style")
    css = "\n".join(style.get_text().strip() for style in styles)
    for style in styles:
        style.decompose()
    return css + "\n"


def images_to_files(soup: BeautifulSoup) -> dict[str, bytes]:
    """Each embedded (base64) image becomes a file beside the page, named by a hash of its
    bytes (an unchanged figure keeps its URL); the files by name."""
    images = {}
    for image in soup.find_all("img", src=lambda src: src and IMAGE.match(src)):
        kind, data = IMAGE.match(image["src"]).groups()
        data = base64.b64decode(data)
        name = f"figure-{hashlib.sha256(data).hexdigest()[:12]}.{kind}"
        images[name] = data
        image["src"] = name
    return images


def refuse_external(soup: BeautifulSoup, css: str) -> None:
    """ValueError naming what the page or its CSS would load from another host."""
    for tag in soup.find_all(True):
        for attribute in URL_ATTRIBUTES:
            for url in str(tag.get(attribute, "")).replace(",", " ").split():
                if urlparse(url).scheme in ("http", "https") or url.startswith("//"):
                    raise ValueError(f"the notebook page would load {url} ({tag.name} {attribute})")
    for code in [*(s.get_text() for s in soup.find_all("script")), css]:
        if found := EXTERNAL_IN_CODE.search(code):
            context = code[max(0, found.start() - 80) : found.end() + 80]
            raise ValueError(f"the notebook page would load from another host: ...{context}...")


def toc_tokens(soup: BeautifulSoup) -> list[dict]:
    """The page's headings as MkDocs' table-of-contents tokens (nested by level)."""
    root: list[dict] = []
    open_levels: list[dict] = []  # the last token seen at each depth
    for heading in soup.find_all(re.compile(r"^h[1-6]$"), id=True):
        name = "".join(
            s for s in heading.find_all(string=True) if not s.find_parent("a", class_="anchor-link")
        ).strip()
        token = {"level": int(heading.name[1]), "id": heading["id"], "name": name, "children": []}
        while open_levels and open_levels[-1]["level"] >= token["level"]:
            open_levels.pop()
        (open_levels[-1]["children"] if open_levels else root).append(token)
        open_levels.append(token)
    return root


def finish(page_html: str, alts: dict[str, str]) -> tuple[str, str, dict[str, bytes], list[dict]]:
    """The finished page HTML, its CSS, its images and its table of contents."""
    soup = BeautifulSoup(page_html, "html.parser")
    remove_cdn_loaders(soup)
    maths_to_mathml(soup)
    add_alt_text(soup, alts)
    css = take_styles(soup)
    images = images_to_files(soup)
    refuse_external(soup, css)
    return str(soup), css, images, toc_tokens(soup)
