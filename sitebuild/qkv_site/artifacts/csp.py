"""A Content-Security-Policy on every page, computed from what the pages hold.

Every HTML page gets, first in its ``<head>``, ``<meta http-equiv="Content-Security-Policy">``
with :func:`policy`: everything from the site's own origin (``default-src 'self'``, which
covers the search worker, the explorer's worker and its data), images also from ``data:``
URLs (Material's icons in its CSS), and no plugin, frame or form target elsewhere. An inline
``<script>`` or ``<style>`` runs only if its SHA-256 is listed: the hashes are those of every
inline script and style found on any page of this build, not a hand-kept list, so a new
inline script (Material's, mkdocs-jupyter's, a page's) is allowed by the build that adds it.
The list is the site's, not the page's: with Material's instant navigation, a page's
scripts run in the document of the first page the reader opened, under its policy.

The hashes are known once every page is written, so each page gets a placeholder
(``on_post_page``) that ``on_post_build`` replaces with the site's policy. An event handler
attribute (``onclick="..."``) or a ``style="..."`` attribute would be blocked: the build stops
naming the page instead.

What a policy in a ``<meta>`` cannot do, and only an HTTP header could (a static host such
as GitHub Pages sets no custom header): ``frame-ancestors`` (refusing to be framed),
``report-uri``/``report-to`` (reports of violations) and ``sandbox`` are ignored in a meta
element, and the policy holds from the element on, which is why it comes first.

``mkdocs serve`` gets no policy: it puts a script of its own into every page it serves (the
live reload, a different one for each request), which a policy would block.
"""

from __future__ import annotations

import base64
import hashlib
import re
from html.parser import HTMLParser
from pathlib import Path

from qkv_site.artifacts.runner import ArtifactError

PLACEHOLDER = "qkv-content-security-policy"
META = f'<meta http-equiv="Content-Security-Policy" content="{PLACEHOLDER}">'
EXECUTED_SCRIPT_TYPES = {"", "text/javascript", "application/javascript", "module"}


def sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def policy(scripts: set[str], styles: set[str]) -> str:
    """The policy allowing the site's own origin and these inline scripts and styles (their
    hash sources, ``'sha256-...'``)."""
    return "; ".join(
        [
            "default-src 'self'",
            " ".join(["script-src 'self'", *sorted(scripts)]),
            " ".join(["style-src 'self'", *sorted(styles)]),
            "img-src 'self' data:",
            "object-src 'none'",
            "base-uri 'self'",
            "form-action 'self'",
        ]
    )


class InlineCode(HTMLParser):
    """The inline scripts and styles of a page, and any attribute a policy would block."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.scripts: set[str] = set()
        self.styles: set[str] = set()
        self.blocked: list[str] = []
        self._open: tuple[str, set] | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        self.blocked += [
            f"<{tag} {name}=...>" for name in attributes if re.fullmatch(r"on[a-z]{3,}|style", name)
        ]  # onclick=, style=
        executed = (
            tag == "script"
            and "src" not in attributes
            and (attributes.get("type") or "").lower() in EXECUTED_SCRIPT_TYPES
        )
        if executed or tag == "style":
            self._open, self._text = (tag, self.scripts if executed else self.styles), []

    def handle_data(self, data):
        if self._open:
            self._text.append(data)

    def handle_endtag(self, tag):
        if self._open and tag == self._open[0]:
            self._open[1].add(sha256("".join(self._text)))
            self._open = None


class ContentSecurityPolicy:
    """The CSP kind: a placeholder in every page, the site's policy written at the end."""

    def __init__(self):
        self.found: dict[str, InlineCode] = {}  # page file -> its inline code (kept across serve)
        self.written: dict[str, str] = {}  # page file -> the policy it holds

    def on_post_page(self, output, page, config):
        return self._place(output, page.file.abs_dest_path, page.file.src_uri)

    def on_post_template(self, output, template_name, config):
        if not template_name.endswith(".html"):
            return output
        return self._place(output, str(Path(config.site_dir) / template_name), template_name)

    def _place(self, output: str, path: str, name: str) -> str:
        found = InlineCode()
        found.feed(output)
        if found.blocked:
            raise ArtifactError(
                f"{name}: a Content-Security-Policy without 'unsafe-inline' "
                f"blocks {', '.join(sorted(set(found.blocked)))}; use a class "
                f"and a stylesheet, or addEventListener in a script file"
            )
        head = re.search(r"<head[^>]*>", output)
        if head is None:
            raise ArtifactError(f"{name}: no <head> to put the Content-Security-Policy in")
        self.found[path] = found
        self.written.pop(path, None)
        return output[: head.end()] + META + output[head.end() :]

    def on_post_build(self, config):
        self.found = {p: f for p, f in self.found.items() if Path(p).exists()}
        site_policy = policy(
            set().union(*(f.scripts for f in self.found.values())),
            set().union(*(f.styles for f in self.found.values())),
        )
        for path in self.found:
            if self.written.get(path) == site_policy:
                continue  # unchanged since this page got it (a later build of `mkdocs serve`)
            page = Path(path)
            text = page.read_text(encoding="utf-8")
            previous = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', text)
            page.write_text(
                text[: previous.start(1)] + site_policy + text[previous.end(1) :], encoding="utf-8"
            )
            self.written[path] = site_policy
