"""The built site serves the explorer data that ``qkv_site.explorer_data`` exports."""

from __future__ import annotations

import json

from qkv_site.explorer_data import explorer_json


def test_built_site_serves_exactly_this_data(built_site):
    served = json.loads((built_site / "explorer" / "data.json").read_text(encoding="utf-8"))
    assert served == json.loads(explorer_json())
    assert not (built_site.parent / "docs" / "explorer").exists()  # nothing written to docs/
