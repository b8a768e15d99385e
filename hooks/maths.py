"""Render maths to MathML while the site builds (the work is in ``qkv_site.maths``)."""

from __future__ import annotations

from mkdocs.exceptions import PluginError
from qkv_site.maths import render_maths, render_nav_maths


def on_page_content(html_text, page, config, files):
    try:
        return render_maths(html_text)
    except ValueError as error:
        raise PluginError(f"{page.file.src_path}: {error}") from error


def on_post_page(output, page, config):
    try:
        return render_nav_maths(output)  # the table of contents repeats the headings' maths
    except ValueError as error:
        raise PluginError(f"{page.file.src_path}: {error}") from error
