"""Figures: ``<!-- figure: NAME -->`` on a line of its own becomes a rendered figure.

Every module of :mod:`qkv_site.figures` is a figure (``ALT``, ``CAPTION``, ``data()``,
``build(style)``, optionally ``NARROW``). Each figure a page places is one job, started when
the build has its files and rendered while MkDocs renders the pages; its SVGs are added to the site as
``figures/NAME-VARIANT.svg`` and the token is replaced by :func:`figure_html`: the figure, and
a folded block with the numbers behind it (its ``tables()``, each with a CSV download) and
links to download its SVGs.

A figure's cache entry holds while the files it imported are unchanged and the libraries it
imported keep their versions; the versions of the trained model's packages
(:data:`~qkv_site.artifacts.tasks.MODEL_PACKAGES`) count for every figure, since a figure
may read the model's file without importing the package that ships it.

The build stops, naming the page, on an unknown figure name or a token that shares its line
with other text; and, naming the figure's module, when a figure fails to render.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from mkdocs.structure.files import File

from qkv_site.artifacts.runner import ArtifactError, Job, Result, Runner
from qkv_site.artifacts.tasks import MODEL_PACKAGES
from qkv_site.figures import HERE as FIGURES
from qkv_site.figures import names
from qkv_site.figures._table import Table, details_html

SITE_FOLDER = "figures"  # figures/NAME-light.svg etc. in the built site
NARROW_MEDIA = "(max-width: 599px)"  # phones get the stacked layout, where there is one

# A token alone on its line comes through Markdown as a raw HTML comment on its own line;
# one in a code block is escaped (&lt;!--) and is left alone.
STANDALONE = re.compile(r"^[ \t]*<!--\s*figure:\s*(\S*?)\s*-->[ \t]*$", re.M)
ANYWHERE = re.compile(r"<!--\s*figure:\s*(\S*?)\s*-->")


def job(name: str, root: Path) -> Job:
    source = f"sitebuild/qkv_site/figures/{name.replace('-', '_')}.py"
    return Job("figures", "qkv_site.artifacts.tasks:figure", {"name": name}, source, packages=MODEL_PACKAGES)


def site_path(name: str, variant: str) -> str:
    return f"{SITE_FOLDER}/{name}-{variant}.svg"


def svg_size(svg: bytes) -> tuple[int, int]:
    """Width and height in CSS pixels of an SVG whose root gives them in points."""
    head = svg[: svg.index(b">", svg.index(b"<svg")) + 1].decode()
    width, height = (float(re.search(rf'{a}="([\d.]+)pt"', head).group(1)) for a in ("width", "height"))
    return round(width * 4 / 3), round(height * 4 / 3)


def figure_html(name: str, meta: dict, svgs: dict[str, bytes], url, anchor: bool = True) -> str:
    """The ``<figure>`` for figure ``name``: every piece of its markup is made here.

    ``meta`` holds ``alt``, ``caption`` and optionally ``tables`` (the numbers behind the
    figure, as :meth:`Table.as_json` writes them); ``svgs`` maps each variant ("light", "dark",
    "light-narrow", ...) to its SVG; ``url(variant)`` gives that SVG's URL from the page.
    ``anchor`` gives it the id ``figure-NAME`` (once per page: ids must be unique).
    """
    alt = html.escape(meta["alt"], quote=True)
    pictures = []
    for theme in ("light", "dark"):
        width, height = svg_size(svgs[theme])
        img = (
            f'<img src="{url(theme)}#only-{theme}" alt="{alt}" width="{width}" '
            f'height="{height}" loading="lazy" decoding="async">'
        )
        narrow = f"{theme}-narrow"
        if narrow in svgs:
            n_width, n_height = svg_size(svgs[narrow])
            img = (
                f'<source media="{NARROW_MEDIA}" srcset="{url(narrow)}" width="{n_width}" '
                f'height="{n_height}">{img}'
            )
        pictures.append(f"<picture>{img}</picture>")
    caption = html.escape(meta["caption"])
    id_attr = f' id="figure-{name}"' if anchor else ""
    tables = [Table.from_json(t) for t in meta.get("tables", [])]
    data = details_html(name, tables, {theme: url(theme) for theme in ("light", "dark")})
    return (
        f'<figure class="qkv-figure" data-figure="{name}"{id_attr}>'
        f"{''.join(pictures)}<figcaption>{caption}</figcaption>{data}</figure>"
    )


def placeholder_html(name: str) -> str:
    return (
        f'<p class="qkv-figure-off"><em>Figure “{html.escape(name)}” is not rendered in '
        f"this build (artifacts are disabled).</em></p>"
    )


def tokens_of(page_html: str, page_name: str, known: list[str]) -> list[str]:
    """The figure names a page's HTML places; ArtifactError on a bad or misplaced token."""
    standalone = STANDALONE.findall(page_html)
    if len(standalone) != len(ANYWHERE.findall(page_html)):
        raise ArtifactError(
            f"{page_name}: a figure token shares its line with other text; put "
            f"'<!-- figure: NAME -->' on a line of its own, with blank lines around it"
        )
    for name in standalone:
        if name not in known:
            raise ArtifactError(
                f"{page_name}: unknown figure in '<!-- figure: {name} -->'; "
                f"the figures are: {', '.join(known)}"
            )
    return standalone


class Figures:
    """The figure kind: jobs start at ``on_files`` for the figures the pages' Markdown names,
    and SVGs are placed at ``on_env``. A figure no page places is not rendered."""

    def __init__(self, runner: Runner, enabled: bool):
        self.runner, self.enabled = runner, enabled

    def on_pre_build(self, config):
        folder = self.runner.root / "sitebuild" / "qkv_site" / "figures"
        self.names = names(folder if folder.is_dir() else FIGURES)
        self.pages, self.placed, self.futures = [], set(), {}

    def _submit(self, wanted) -> None:
        runner = self.runner
        for name in sorted(set(wanted) - set(self.futures)):
            self.futures[name] = runner.submit(job(name, runner.root))

    def on_files(self, files, config):
        # Start rendering now, while MkDocs renders the pages: the names are read off the
        # Markdown (a page's HTML, read later, decides; what this misses is rendered then).
        if self.enabled:
            named = set()
            for file in files.documentation_pages():
                if file.src_uri.endswith(".md") and file.abs_src_path:
                    named.update(STANDALONE.findall(Path(file.abs_src_path).read_text("utf-8")))
            self._submit(named & set(self.names))

    def on_page_content(self, page_html, page, config, files):
        if placed := tokens_of(page_html, page.file.src_uri, self.names):
            if not self.enabled:
                return STANDALONE.sub(lambda m: placeholder_html(m.group(1)), page_html)
            self.pages.append(page)
            self.placed.update(placed)
        return page_html

    def on_env(self, env, config, files):
        if not self.enabled:
            return
        self._submit(self.placed)
        results: dict[str, Result] = {n: self.futures[n].result() for n in sorted(self.placed)}
        meta, by_path = {}, {}
        for name, result in results.items():
            meta[name] = json.loads(result.text(f"{name}.json"))
            for variant in meta[name]["variants"]:
                file = File.generated(
                    config,
                    site_path(name, variant),
                    abs_src_path=str(result.folder / f"{name}-{variant}.svg"),
                )
                files.append(file)
                by_path[file.src_uri] = file
        for page in self.pages:
            shown = set()

            def expand(match, page=page, shown=shown):
                name = match.group(1)
                svgs = {v: results[name].read(f"{name}-{v}.svg") for v in meta[name]["variants"]}
                markup = figure_html(
                    name,
                    meta[name],
                    svgs,
                    anchor=name not in shown,
                    url=lambda v: by_path[site_path(name, v)].url_relative_to(page.file),
                )
                shown.add(name)
                return markup

            page.content = STANDALONE.sub(expand, page.content)
