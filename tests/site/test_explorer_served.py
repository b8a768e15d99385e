"""The built site serves the explorer data that ``qkv_site.explorer_data`` and
``qkv_site.smollm2_data`` export, gzip-compressed where the page inflates it."""

from __future__ import annotations

import gzip
import json

from qkv_site.explorer_data import explorer_json
from qkv_site.smollm2_data import SENTENCES, smollm2_files


def test_built_site_serves_exactly_this_data(built_site):
    served = json.loads(gzip.decompress((built_site / "explorer" / "data.json.gz").read_bytes()))
    assert served == json.loads(explorer_json())
    assert not (built_site.parent / "docs" / "explorer").exists()  # nothing written to docs/


def test_built_site_serves_the_trained_models_files(built_site):
    folder = built_site / "explorer" / "smollm2"
    want = smollm2_files()
    assert sorted(p.name for p in folder.iterdir()) == sorted(want)
    assert len(want) == len(SENTENCES) + 1  # an index and one file per sentence
    for name, content in want.items():
        assert (folder / name).read_bytes() == content, name  # same numbers, same bytes
