"""The ``qkv-artifacts`` MkDocs plugin: everything the build computes from code, one way.

Configured in ``mkdocs.yml`` like Material's own plugins::

    plugins:
      - qkv-artifacts:
          enabled: true           # false: compute nothing (figures become a line of text,
                                  # snippets are not run, the notebook is not executed)
          cache_dir: .cache/artifacts
          concurrency: 2          # worker processes; default: one per core
          content_security_policy: true  # a CSP on every page, from what the pages hold
          snippet_python: ""      # the Python the snippets run in (the tests: a reader's)

Each kind of artifact is a small class in this package with the MkDocs events it needs
(see ``ArtifactsPlugin._kinds``), made with what it needs (the runner and the settings), not
with the plugin; the plugin hands each event to them in turn, each handler getting what the
one before returned, as MkDocs hands an event from plugin to plugin. All of them hand their
work to one :class:`~qkv_site.artifacts.runner.Runner`, which computes it out of process and
caches it by content hash. A failure raises
:class:`~qkv_site.artifacts.runner.ArtifactError` (a ``PluginError``) naming the file.

Adding a kind (the trained model's attention maps, say) is two steps:

1. a task function in ``tasks.py``, ``task(out: Path, **args)``, that writes its files into
   ``out`` (it runs in a worker process: import what it needs inside it);
2. a module here with a class whose methods are the MkDocs events it needs (``on_pre_build``,
   ``on_files``, ``on_env``...): made with the runner (and the settings it reads), it submits
   ``Job(KIND, "qkv_site.artifacts.tasks:task", args, source=FILE)`` to it early and places
   the result (``Result.folder``) later, as ``explorer.py`` does; an instance added in
   ``ArtifactsPlugin._kinds``.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from mkdocs.plugins import BasePlugin

from qkv_site.artifacts.config import ArtifactsConfig
from qkv_site.artifacts.csp import ContentSecurityPolicy
from qkv_site.artifacts.explorer import Explorer
from qkv_site.artifacts.figures import Figures
from qkv_site.artifacts.notebook import Notebooks
from qkv_site.artifacts.pages import PageInputs
from qkv_site.artifacts.runner import Runner
from qkv_site.artifacts.snippets import Snippets

log = logging.getLogger("mkdocs.plugins.qkv-artifacts")


class _NotTheDirtyWarning(logging.Filter):
    def filter(self, record):
        return "'dirty' build is being performed" not in record.getMessage()


class ArtifactsPlugin(BasePlugin[ArtifactsConfig]):
    def __init__(self):
        self.runner: Runner | None = None
        self._python = ""  # the snippet_python the runner was made with
        self.kinds: list = []
        self.serving = False

    def on_startup(self, *, command, dirty):
        self.serving = command == "serve"
        # Defining on_startup keeps this plugin (and its worker processes) across the rebuilds
        # of `mkdocs serve`. A dirty serve is what ./dev serve runs on purpose (PageInputs
        # rebuilds the pages an edit touches); its warning about it would fail --strict.
        if dirty:
            logging.getLogger("mkdocs.commands.build").addFilter(_NotTheDirtyWarning())

    def _chain(self, event: str, value, *args):
        """Hand ``value`` through every kind's handler of ``event``, in order; each gets what
        the one before returned (None: unchanged), as MkDocs hands it from plugin to plugin."""
        for kind in self.kinds:
            if handler := getattr(kind, event, None):
                result = handler(value, *args)
                value = value if result is None else result
        return value

    def on_config(self, config):
        root = Path(config.config_file_path or ".").resolve().parent
        cache = Path(self.config.cache_dir)
        cache = cache if cache.is_absolute() else root / cache
        python = self.config.snippet_python
        made_for = (root, cache, python)
        if self.runner is None or (self.runner.root, self.runner.cache_dir, self._python) != made_for:
            if self.runner is not None:
                self.on_shutdown()
            self.runner = Runner(root, cache, self.config.concurrency, snippet_python=python)
            self._python = python
            self.kinds = self._kinds(self.runner)
        return self._chain("on_config", config)

    def _kinds(self, runner: Runner) -> list:
        """Each kind given what it needs: the runner and the settings, never the plugin."""
        enabled = self.config.enabled
        page_inputs = PageInputs(runner)  # for `mkdocs serve --dirty`
        kinds = [
            page_inputs,
            Explorer(runner, enabled),
            Notebooks(runner, enabled),
            Snippets(runner, enabled, serving=self.serving, used=page_inputs.used),
            Figures(runner, enabled),
        ]  # jobs are started in this order: the longest (the trained model's data, the notebook) first
        # `mkdocs serve` puts an inline script of its own into every page it serves (the live
        # reload, different for each request): no policy there
        if self.config.content_security_policy and not self.serving:
            kinds.append(ContentSecurityPolicy())  # last: after the pages are made
        return kinds

    def on_pre_build(self, config):
        self.started = time.perf_counter()
        self.runner.start_build()
        self._chain("on_pre_build", config)

    def on_files(self, files, config):
        return self._chain("on_files", files, config)

    def on_page_read_source(self, page, config):
        for kind in self.kinds:  # the first kind that knows the page gives its source
            if source := getattr(kind, "on_page_read_source", lambda *_: None)(page, config):
                return source
        return None

    def on_page_markdown(self, markdown, page, config, files):
        return self._chain("on_page_markdown", markdown, page, config, files)

    def on_page_content(self, html, page, config, files):
        return self._chain("on_page_content", html, page, config, files)

    def on_env(self, env, config, files):
        return self._chain("on_env", env, config, files)

    def on_post_page(self, output, page, config):
        return self._chain("on_post_page", output, page, config)

    def on_post_template(self, output, template_name, config):
        return self._chain("on_post_template", output, template_name, config)

    def on_post_build(self, config):
        computed = self.runner.computed
        by_kind = {}
        for job in computed:
            by_kind[job.kind] = by_kind.get(job.kind, 0) + 1
        log.info(
            f"artifacts: {len(computed)} computed "
            f"({', '.join(f'{n} {k}' for k, n in sorted(by_kind.items())) or 'none'}), "
            f"{self.runner.from_cache()} from the cache, in "
            f"{time.perf_counter() - self.started:.1f} s of build"
        )
        if self.config.timings:
            rows = [
                {"kind": job.kind, "source": job.source, "cpu_s": seconds}
                for job, seconds in self.runner.cpu_seconds
            ]
            Path(self.config.timings).write_text(json.dumps(rows, indent=1), encoding="utf-8")
        self._chain("on_post_build", config)
        # Only `mkdocs build` cleans the cache. Under `mkdocs serve --dirty` a rebuild renders
        # the pages an edit touched and uses only their entries; every other entry would look
        # unused. (Serve's first build is not special-cased: it can be cut short by an edit.)
        if not self.serving:
            self.runner.forget_unused()

    def on_shutdown(self):
        for kind in self.kinds:
            if handler := getattr(kind, "on_shutdown", None):
                handler()
        if self.runner is not None:
            self.runner.close()
