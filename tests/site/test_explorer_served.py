"""The built site serves the explorer data that ``qkv_site.explorer_data`` and
``qkv_site.smollm2_data`` export, gzip-compressed where the page inflates it, the model file
the page runs on a reader's text, and a first load of the explorer under 150 KB."""

from __future__ import annotations

import gzip
import json

from qkv_site.explorer_data import explorer_json
from qkv_site.smollm2_data import DEFAULTS, LAYERS_PER_FILE, SENTENCES, model_licence, smollm2_files

from qkv import smollm2

FIRST_LOAD_BUDGET = 150_000  # bytes: the page, the explorer's script and style, the data shown


def test_built_site_serves_exactly_this_data(built_site):
    served = json.loads(gzip.decompress((built_site / "explorer" / "data.json.gz").read_bytes()))
    assert served == json.loads(explorer_json())
    assert not (built_site.parent / "docs" / "explorer").exists()  # nothing written to docs/


def test_built_site_serves_the_trained_models_files(built_site):
    folder = built_site / "explorer" / "smollm2"
    want = smollm2_files()
    model = smollm2.gguf_path()
    assert sorted(p.name for p in folder.iterdir()) == sorted([*want, model.name, "LICENSE.txt"])
    assert len(want) == 5 * len(SENTENCES) + 2  # per sentence 5 blocks of layers; the index; the probes
    assert (folder / "LICENSE.txt").read_bytes() == model_licence()  # the model's, beside it
    for name, content in want.items():
        assert (folder / name).read_bytes() == content, name  # same numbers, same bytes
    assert (folder / model.name).read_bytes() == model.read_bytes()  # the file qkv reads


def test_the_model_code_and_its_licences_are_served(built_site):
    folder = built_site / "assets" / "explorer"
    for name in (
        "trained.js",
        "lab.js",
        "lab.css",
        "headcards.js",
        "missions.js",
        "missions.css",
        "model/worker.js",
        "model/pool.js",
        "model/patch.js",
        "model/gguf.js",
        "model/smollm2.js",
        "model/kernel.js",
        "model/matmul.wasm",
        "model/tokenizer.js",
        "model/vendor/tokenizers.js",
        "model/vendor/tokenizers.LICENSE.txt",
        "model/vendor/PINNED.txt",
    ):
        assert (folder / name).is_file(), name
    assert "Apache License" in (folder / "model/vendor/tokenizers.LICENSE.txt").read_text()


def first_load(built_site, mode: str) -> dict[str, int]:
    """The bytes a first visit to the explorer fetches from this site, beyond what any page
    of the site loads (Material's CSS and JS, the maths font)."""
    files = ["explorer/index.html", "assets/explorer/explorer.css", "assets/explorer/explorer.js"]
    if mode == "toy":
        files.append("explorer/data.json.gz")
    else:
        index = json.loads((built_site / "explorer/smollm2/index.json").read_bytes())
        block = index["sentences"][DEFAULTS["sentence"] - 1]["files"][
            (DEFAULTS["layer"] - 1) // LAYERS_PER_FILE
        ]
        # lab.js and lab.css come only with the reader's own text, missions.js and .css with a mission
        files += ["assets/explorer/trained.js", "explorer/smollm2/index.json", f"explorer/smollm2/{block}"]
    return {name: (built_site / name).stat().st_size for name in files}


def test_a_first_load_of_either_mode_stays_under_150_kb(built_site):
    for mode in ("toy", "trained"):
        sizes = first_load(built_site, mode)
        assert sum(sizes.values()) < FIRST_LOAD_BUDGET, (mode, sizes)
