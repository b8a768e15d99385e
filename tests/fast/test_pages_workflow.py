"""The test workflow runs the README's test command on every push and pull request, and the
GitHub Pages workflow deploys, with the README's build command, only what passed it.

The workflows cannot run here; this checks what can be checked without GitHub: the commands,
the triggers, the caches, the folder uploaded, and the permissions and job order.
"""

from __future__ import annotations

import re
import tomllib

import yaml
from support import ROOT, mkdocs_config

WORKFLOW = ROOT / ".github" / "workflows" / "pages.yml"
TESTS = ROOT / ".github" / "workflows" / "tests.yml"


def load(path=WORKFLOW) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


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
    assert len(upload) == 1 and upload[0]["with"]["path"] == mkdocs_config()["site_dir"]
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
    (name,) = [n for n, value in step["env"].items() if value == "${{ steps.pages.outputs.base_url }}"]
    assert [s for s in steps(build) if uses(s, "actions/configure-pages") and s["id"] == "pages"]
    # the variable the step sets is the one mkdocs.yml takes the site's address from
    address = "https://owner.github.io/project/"
    assert mkdocs_config({name: address})["site_url"] == address


def test_the_tests_run_the_readme_command_on_every_push_and_pull_request():
    workflow = load(TESTS)
    on = workflow[True]  # YAML 1.1 reads the key `on` as True
    assert set(on) == {"push", "pull_request", "workflow_call"}
    assert on["push"] == {"branches-ignore": ["main"]}  # main: through pages.yml, below
    assert "pull_request" in on and not on["pull_request"]  # every pull request
    jobs = workflow["jobs"]
    assert set(jobs) == {"test", "fast"}
    runs = {name: [s["run"].strip() for s in steps(job) if "run" in s] for name, job in jobs.items()}
    assert runs == {"test": ["./dev test"], "fast": ["./dev check"]}  # the whole suite once
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "./dev test" in readme and "./dev check" in readme
    assert workflow["permissions"] == {}
    assert all(job["permissions"] == {"contents": "read"} for job in jobs.values())


def test_the_fast_tier_runs_on_the_oldest_and_the_newest_python():
    jobs = load(TESTS)["jobs"]
    python = {
        name: next(s for s in steps(job) if uses(s, "actions/setup-python"))["with"]["python-version"]
        for name, job in jobs.items()
    }
    assert python == {"test": "3.11", "fast": "3.13"}  # ./dev test runs the fast tier too
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["project"]["requires-python"] == f">={python['test']}"  # the oldest supported


def test_a_pull_request_from_a_branch_of_this_repository_runs_once():
    # such a branch's push runs the workflow already; only a fork's pull request needs it
    for job in load(TESTS)["jobs"].values():
        assert job["if"] == (
            "github.event_name != 'pull_request' || "
            "github.event.pull_request.head.repo.full_name != github.repository"
        )


def test_the_tests_install_cpu_torch_and_find_a_browser():
    job = next(iter(load(TESTS)["jobs"].values()))
    assert job["env"]["QKV_TORCH_INDEX"] == "https://download.pytorch.org/whl/cpu"
    assert job["env"]["QKV_CHROMIUM"].startswith("/usr/bin/")
    # what ./dev does with the two: tests/fast/test_dev.py


def test_the_tests_cache_pips_downloads_and_the_artifact_cache():
    job = next(iter(load(TESTS)["jobs"].values()))
    python = next(s for s in steps(job) if uses(s, "actions/setup-python"))
    assert python["with"]["cache"] == "pip"
    assert "requirements/*.txt" in python["with"]["cache-dependency-path"].split()
    cache = next(s for s in steps(job) if uses(s, "actions/cache"))
    (artifacts,) = [p["qkv-artifacts"] for p in mkdocs_config()["plugins"] if "qkv-artifacts" in p]
    assert cache["with"]["path"] == artifacts["cache_dir"]  # the folder the build fills
    assert cache["with"]["restore-keys"]  # an older cache is a good start: entries check themselves
    (hashed,) = re.findall(r"hashFiles\(([^)]*)\)", cache["with"]["key"])
    hashed = {word.strip().strip("'") for word in hashed.split(",")}
    # what the cached artifacts are made from
    assert {"requirements/*.txt", "qkv/**", "sitebuild/**", "snippets/**", "docs/**"} <= hashed
    # the Pages build starts from the cache the tests filled: the same step, the same key
    pages = next(s for s in steps(load()["jobs"]["build"]) if uses(s, "actions/cache"))
    assert pages["with"] == cache["with"]


def test_the_site_is_deployed_only_after_the_tests_pass():
    jobs = load()["jobs"]
    assert jobs["tests"]["uses"] == "./.github/workflows/tests.yml"
    assert jobs["build"]["needs"] == "tests" and jobs["deploy"]["needs"] == "build"
    assert jobs["tests"]["permissions"] == {"contents": "read"}
