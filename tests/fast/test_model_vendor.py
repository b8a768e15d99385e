"""The explorer's browser code: every third-party file is the pinned one, its licence ships
beside it, and nothing in it needs more than a strict Content-Security-Policy allows."""

from __future__ import annotations

import hashlib
import re

from support import ROOT

EXPLORER = ROOT / "docs" / "assets" / "explorer"
VENDOR = EXPLORER / "model" / "vendor"


def pins() -> list[dict[str, str]]:
    """PINNED.txt's entries: blocks of "key: value" lines that start with "file:"."""
    entries, current = [], None
    for line in (VENDOR / "PINNED.txt").read_text(encoding="utf-8").splitlines():
        match = re.match(r"^([a-z0-9-]+): (.*)$", line)
        if not match:
            continue
        key, value = match.groups()
        if key == "file":
            current = {}
            entries.append(current)
        if current is not None:
            current[key] = value
    return entries


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_every_vendored_file_is_pinned_with_its_licence():
    entries = pins()
    assert {e["file"] for e in entries} | {"PINNED.txt"} | {
        e["licence"].split(", ")[1].split(" ")[0] for e in entries
    } == {p.name for p in VENDOR.iterdir()}
    for entry in entries:
        assert re.fullmatch(r"\d+\.\d+\.\d+", entry["version"]), entry  # an exact version
        assert entry["tarball-integrity"].startswith("sha512-")
        assert sha256(VENDOR / entry["file"]) == entry["sha256"], f"{entry['file']} is not the pinned file"
        licence = VENDOR / entry["licence"].split(", ")[1].split(" ")[0]
        assert sha256(licence) == entry["licence-sha256"]
        assert "Apache License" in licence.read_text(encoding="utf-8")


def test_the_explorers_code_needs_no_unsafe_csp_source():
    """No eval or Function constructor ('unsafe-eval'), no HTML from strings or style
    attributes (inline styles), no blob: or data: workers: issue 19's policy is enough."""
    forbidden = re.compile(
        r"\beval\s*\(|new\s+Function\s*\(|\.innerHTML\b|\.outerHTML\s*=|"
        r"insertAdjacentHTML|setAttribute\(\s*[\"']style|\.cssText\b|blob:|"
        r"createObjectURL|document\.write"
    )
    scripts = sorted(EXPLORER.rglob("*.js"))
    assert len(scripts) >= 7
    found = [
        (p.relative_to(ROOT).as_posix(), m.group(0))
        for p in scripts
        for m in forbidden.finditer(p.read_text(encoding="utf-8"))
    ]
    assert found == []
