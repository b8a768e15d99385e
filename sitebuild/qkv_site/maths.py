"""Maths to MathML at build time, so pages need no script and no network.

``pymdownx.arithmatex`` (generic mode) wraps each formula in a ``span``/``div`` with class
``arithmatex``; :func:`render_maths` swaps the LaTeX inside for MathML from
``latex2mathml``. The browser draws MathML natively; the vendored Noto Sans Math font gives
it stretchy brackets and radicals. The notebook's page uses :func:`to_mathml` too.
"""

from __future__ import annotations

import html
import re

from latex2mathml.converter import convert

# arithmatex (generic) output: inline \( ... \) in a span, display \[ ... \] in a div.
_INLINE = re.compile(r'<span class="arithmatex">\\\((.+?)\\\)</span>', re.S)
_DISPLAY = re.compile(r'<div class="arithmatex">\\\[(.+?)\\\]</div>', re.S)


def to_mathml(latex: str, display: bool) -> str:
    """MathML for one formula; raises ValueError naming the formula if it cannot convert.

    >>> to_mathml("x^2", display=False)[:50]
    '<math xmlns="http://www.w3.org/1998/Math/MathML" d'
    """
    source = html.unescape(latex).strip()
    try:
        return convert(source, display="block" if display else "inline")
    except Exception as error:  # latex2mathml raises many types; name the formula
        raise ValueError(f"cannot render maths {source!r}: {error}") from error


def render_maths(page_html: str) -> str:
    """The page with every arithmatex formula in MathML."""
    page_html = _DISPLAY.sub(
        lambda m: f'<div class="arithmatex">{to_mathml(m.group(1), display=True)}</div>',
        page_html,
    )
    return _INLINE.sub(
        lambda m: f'<span class="arithmatex">{to_mathml(m.group(1), display=False)}</span>',
        page_html,
    )


# A heading's maths reaches the navigation as text: the table of contents writes each
# heading's title, LaTeX delimiters and all, into a span of its own.
_NAV_ENTRY = re.compile(r'(<span class="md-ellipsis">)(.*?)(</span>)', re.S)
_NAV_FORMULA = re.compile(r"\\\((.+?)\\\)", re.S)


def render_nav_maths(page_html: str) -> str:
    r"""The page with the formulas of its navigation entries (the table of contents shows
    headings like "A sum of \(d_k\) products") in MathML, as in the headings themselves.

    >>> render_nav_maths('<span class="md-ellipsis">At \\(d_k = 1\\) it</span>').count("<math")
    1
    """
    return _NAV_ENTRY.sub(
        lambda m: (
            m.group(1)
            + _NAV_FORMULA.sub(lambda f: to_mathml(f.group(1), display=False), m.group(2))
            + m.group(3)
        ),
        page_html,
    )
