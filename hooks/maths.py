"""Render maths to MathML while the site builds, so pages need no script and no network.

``pymdownx.arithmatex`` (generic mode) wraps each formula in a ``span``/``div`` with class
``arithmatex``; this hook swaps the LaTeX inside for MathML from ``latex2mathml``. The
browser draws MathML natively; the vendored Noto Sans Math font gives it stretchy
brackets and radicals.
"""

from __future__ import annotations

import html
import re

from latex2mathml.converter import convert

# arithmatex (generic) output: inline \( ... \) in a span, display \[ ... \] in a div.
_INLINE = re.compile(r'<span class="arithmatex">\\\((.+?)\\\)</span>', re.S)
_DISPLAY = re.compile(r'<div class="arithmatex">\\\[(.+?)\\\]</div>', re.S)


def to_mathml(latex: str, display: bool) -> str:
    """MathML for one formula; raises ValueError naming the formula if it cannot convert."""
    source = html.unescape(latex).strip()
    try:
        mathml = convert(source, display="block" if display else "inline")
    except Exception as error:  # latex2mathml raises many types; name the formula
        raise ValueError(f"cannot render maths {source!r}: {error}") from error
    return mathml


def render_maths(page_html: str) -> str:
    page_html = _DISPLAY.sub(
        lambda m: f'<div class="arithmatex">{to_mathml(m.group(1), display=True)}</div>',
        page_html,
    )
    return _INLINE.sub(
        lambda m: f'<span class="arithmatex">{to_mathml(m.group(1), display=False)}</span>',
        page_html,
    )


def on_page_content(html_text, page, config, files):
    try:
        return render_maths(html_text)
    except ValueError as error:
        raise ValueError(f"{page.file.src_path}: {error}") from error
