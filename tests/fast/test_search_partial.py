"""overrides/partials/search.html is Material's search partial plus one thing: a name for
the search dialog (axe-core's aria-dialog-name). When Material changes its partial, this
fails, so the copy never drifts into an old version of the search box."""

from __future__ import annotations

from pathlib import Path

import material
from support import ROOT

NAMED = 'role="dialog" aria-label="{{ lang.t(\'search\') }}"'


def _body(template: str) -> str:
    """The template without its leading Jinja comment."""
    return template.split("-#}\n", 1)[1]


def test_search_override_is_materials_partial_with_a_named_dialog():
    original = Path(material.__file__).parent / "templates" / "partials" / "search.html"
    ours = (ROOT / "overrides" / "partials" / "search.html").read_text(encoding="utf-8")
    assert NAMED in ours
    assert _body(ours).replace(NAMED, 'role="dialog"', 1) == _body(original.read_text("utf-8"))
