"""Export the attention explorer's numbers from qkv while the site builds.

The explorer page (``docs/explorer.md``, URL ``explorer/``) only renders; every number it
shows comes from ``qkv_site.explorer_data.explorer_json()``, written here gzip-compressed
to ``explorer/data.json.gz`` (the page inflates it) through MkDocs' file API (never into
``docs/``, which would make ``mkdocs serve`` loop).

The trained mode's files (``qkv_site.smollm2_data``: SmolLM2-135M's attention on a few
sentences) go to ``explorer/smollm2/``, fetched by the page only when a reader asks for them.

The exports run in a fresh interpreter so that ``mkdocs serve -w qkv`` picks up edits to
``qkv``: modules imported into the server process would otherwise stay stale.
"""

from __future__ import annotations

import gzip
import subprocess
import sys
import tempfile
from pathlib import Path

from mkdocs.structure.files import File
from mkdocs.utils import get_relative_url

ROOT = Path(__file__).resolve().parent.parent
DATA_URI = "explorer/data.json.gz"  # gzip: the page inflates it (DecompressionStream)
PAGE = "explorer.md"
_EXPORT = "import sys; from qkv_site.explorer_data import explorer_json; sys.stdout.write(explorer_json())"


def export_json() -> str:
    """The explorer data as JSON text, computed by qkv in a subprocess."""
    done = subprocess.run([sys.executable, "-c", _EXPORT], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"exporting the explorer data failed:\n{done.stderr}")
    return done.stdout


TRAINED_DIR = "explorer/smollm2"
_EXPORT_TRAINED = "import sys; from qkv_site.smollm2_data import write_files; write_files(sys.argv[1])"


def export_trained() -> dict[str, bytes]:
    """The trained mode's files, ``{name: bytes}``, computed by qkv in a subprocess."""
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run([sys.executable, "-c", _EXPORT_TRAINED, tmp], cwd=ROOT,
                              capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"exporting the explorer's trained-model data failed:\n{done.stderr}")
        return {path.name: path.read_bytes() for path in sorted(Path(tmp).iterdir())}


def on_files(files, config):
    files.append(File.generated(config, DATA_URI, content=gzip.compress(export_json().encode(), mtime=0)))
    for name, content in export_trained().items():
        files.append(File.generated(config, f"{TRAINED_DIR}/{name}", content=content))
    return files


def on_page_content(html, page, config, files):
    # The page names its data relative to itself; the URL depends on use_directory_urls.
    if page.file.src_uri == PAGE:
        html = html.replace('data-src="data.json.gz"',
                            f'data-src="{get_relative_url(DATA_URI, page.url)}"', 1)
        html = html.replace('data-trained-src="smollm2/index.json"', 'data-trained-src="'
                            f'{get_relative_url(TRAINED_DIR + "/index.json", page.url)}"', 1)
    return html
