"""The GitHub Pages workflow builds with the README's command and deploys what it builds.

The workflow cannot run here; this checks what can be checked without GitHub: the command,
the folder it uploads, and the permissions and job order deployment needs.
"""

from __future__ import annotations

import yaml
from support import ROOT

WORKFLOW = ROOT / ".github" / "workflows" / "pages.yml"


def load() -> dict:
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


def steps(job: dict) -> list[dict]:
    return job["steps"]


def uses(step: dict, action: str) -> bool:
    return step.get("uses", "").split("@")[0] == action


def test_builds_with_the_readme_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    runs = [s["run"].strip() for s in steps(load()["jobs"]["build"]) if "run" in s]
    assert runs == ["./dev build"]
    assert "./dev build" in readme


def test_uploads_the_built_site_and_deploys_it():
    workflow = load()
    build, deploy = workflow["jobs"]["build"], workflow["jobs"]["deploy"]
    upload = [s for s in steps(build) if uses(s, "actions/upload-pages-artifact")]
    assert len(upload) == 1 and upload[0]["with"]["path"] == "site"  # mkdocs.yml site_dir
    assert "site_dir: site" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert deploy["needs"] == "build"
    assert [s for s in steps(deploy) if uses(s, "actions/deploy-pages")]
    assert deploy["environment"]["name"] == "github-pages"
    # Each job gets only what it needs: the build reads, the deployment writes to Pages.
    assert workflow["permissions"] == {}
    assert build["permissions"] == {"contents": "read"}
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}


def test_passes_the_pages_address_to_the_build():
    build = load()["jobs"]["build"]
    step = next(s for s in steps(build) if s.get("run", "").strip() == "./dev build")
    assert step["env"]["QKV_SITE_URL"] == "${{ steps.pages.outputs.base_url }}"
    assert [s for s in steps(build) if uses(s, "actions/configure-pages") and s["id"] == "pages"]
    assert "site_url: !ENV [QKV_SITE_URL, null]" in (ROOT / "mkdocs.yml").read_text()
