"""A page's executed blocks, found one way and run (or read from the cache) one way.

The build runs a ``python exec="on"`` block where the site's Markdown extensions place it:
pymdownx.snippets expands its ``--8<--`` includes, admonitions, tabs and ``???`` boxes may
indent it, and pymdownx.superfences hands it to the ``python`` fence with its options
(``session="..."``). Everything else that needs a page's blocks (the plugin's start ahead of
a long page, the tests, the copy-paste run) finds them here, through the same extensions
with a fence that only notes what it is handed (:func:`find_blocks`); they are run through
the build's own snippet kind and cache by :func:`qkv_site.artifacts.snippets.run_page`. So
what a test reads is exactly what the build showed, by the build's own keys.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import markdown
import markdown_exec

from qkv_site.site import front_matter, includes

FENCES = ("python", "py")  # the fence names markdown-exec's python blocks use
# What decides where an exec block is and what it holds: includes, fences, and the blocks
# that indent them (mkdocstrings, maths and the rest only change what is around them).
BLOCK_EXTENSIONS = (
    "pymdownx.snippets",
    "pymdownx.superfences",
    "admonition",
    "pymdownx.details",
    "pymdownx.tabbed",
    "md_in_html",
)


@dataclass(frozen=True)
class Block:
    """One block the build runs on a page, as the fence receives it."""

    code: str
    session: str | None  # markdown-exec's session="..."; None: a block alone
    includes: tuple[str, ...] = ()  # the snippet sections it includes ("traps.py:same_vector")
    whole: bool = False  # the block is one include line and nothing else

    @property
    def section(self) -> str | None:
        """The one snippet section the block consists of, if it is one include."""
        return self.includes[0] if self.whole else None


def extensions_of(entries: Iterable, configs: Mapping | None = None) -> tuple[list[str], dict]:
    """Extension names and their settings from mkdocs.yml's ``markdown_extensions`` (names,
    or ``{name: options}``), with MkDocs' ``mdx_configs`` if given."""
    names, settings = [], {}
    for entry in entries:
        name, options = next(iter(entry.items())) if isinstance(entry, dict) else (entry, None)
        names.append(name)
        settings[name] = dict(options or (configs or {}).get(name) or {})
    return names, settings


def markdown_settings(
    names: list[str],
    settings: Mapping[str, dict],
    fence: Callable,
    *,
    root: Path | None = None,
    only: Iterable[str] | None = None,
) -> tuple[list[str], dict]:
    """The site's Markdown extensions and settings with ``fence`` as the ``python`` fence's
    formatter (markdown-exec's validator decides which blocks reach it): the one builder of
    them outside MkDocs. ``root``: snippet paths are taken from there; ``only``: these
    extensions alone."""
    names = [n for n in names if only is None or n in only]
    settings = {n: dict(settings.get(n, {})) for n in names}
    if root is not None and "pymdownx.snippets" in settings:
        paths = settings["pymdownx.snippets"].get("base_path", ["."])
        paths = [paths] if isinstance(paths, str) else paths
        settings["pymdownx.snippets"]["base_path"] = [str(Path(root) / p) for p in paths]
    superfences = settings.setdefault("pymdownx.superfences", {})
    if "pymdownx.superfences" not in names:
        names.append("pymdownx.superfences")
    others = [f for f in superfences.get("custom_fences", []) if f.get("name") not in FENCES]
    mine = [{"name": n, "class": n, "validator": markdown_exec.validator, "format": fence} for n in FENCES]
    superfences["custom_fences"] = others + mine
    return names, settings


def find_blocks(text: str, names: list[str], settings: Mapping[str, dict], **options) -> tuple[str, list]:
    """Convert a page's Markdown (front matter removed) with the site's extensions
    (:func:`markdown_settings` ``options``), noting each executed block instead of running
    it: the HTML, and ``[(code, session)]`` in page order, the code as the build runs it."""
    found: list[tuple[str, str | None]] = []

    def note(source, language, css_class, opts, md, **kwargs):
        def run(code, session=None, **_):
            found.append((code, session or None))
            return ""

        return markdown_exec.base_format(language="python", run=run, code=source, md=md, **opts)

    names, settings = markdown_settings(names, settings, note, **options)
    html = markdown.Markdown(extensions=names, extension_configs=settings).convert(text)
    return html, found


def site_extensions(root: Path) -> tuple[list[str], dict]:
    """mkdocs.yml's Markdown extensions and settings (read by :mod:`qkv_site.site`)."""
    from qkv_site.site import mkdocs_config

    return extensions_of(mkdocs_config(root)["markdown_extensions"])


def page_text(root: Path, page: str) -> str:
    """``docs/PAGE``'s Markdown without its front matter."""
    return front_matter((Path(root) / "docs" / page).read_text(encoding="utf-8"))[1]


def written_blocks(root: Path, page: str) -> list[Block]:
    """The blocks the build runs on ``docs/PAGE`` as the page writes them, their includes
    not expanded (an include never holds a block, so they are the same blocks): found with
    only the extensions that place blocks, so quickly; each names what it includes."""
    names, settings = site_extensions(root)
    only = [n for n in BLOCK_EXTENSIONS if n != "pymdownx.snippets"]
    _, found = find_blocks(page_text(root, page), names, settings, root=root, only=only)
    blocks = []
    for code, session in found:
        lines = [line for line in code.splitlines() if line.strip()]
        found = tuple(
            f"{i.snippet}:{i.section}" if i.section is not None else i.snippet for i in includes(code)
        )
        blocks.append(Block(code, session, found, whole=len(lines) == 1 and len(found) == 1))
    return blocks


def runs_blocks(root: Path, page: str) -> bool:
    """Whether the build runs any block of ``docs/PAGE``."""
    return bool(written_blocks(root, page))


def render_page(root: Path, page: str) -> tuple[str, list[Block]]:
    """``docs/PAGE`` rendered by the site's Markdown extensions alone (no theme), its blocks
    noted, not run: the HTML (the code blocks as the build shows them) and its blocks, each
    with the code the build runs and the sections it includes."""
    names, settings = site_extensions(root)
    html, built = find_blocks(page_text(root, page), names, settings, root=root)
    written = written_blocks(root, page)
    if [b.session for b in written] != [s for _, s in built]:
        raise ValueError(f"docs/{page}: its blocks {written} differ from the expanded page's {built}")
    pairs = zip(built, written, strict=True)
    return html, [Block(code, w.session, w.includes, w.whole) for (code, _), w in pairs]


def page_blocks(root: Path, page: str) -> list[Block]:
    """The blocks the build runs on ``docs/PAGE``, in page order (:func:`render_page`)."""
    return render_page(root, page)[1]
