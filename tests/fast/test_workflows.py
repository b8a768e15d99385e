"""The GitHub workflows are valid and hardened, checked offline with the tools GitHub users
run: GitHub's workflow schema (check-jsonschema's vendored copy) and zizmor's audits.

Whether a pinned commit really is the release its comment names cannot be checked offline;
the pins were taken from each action's release tags (see the comments in the workflows).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml
from support import HANG, ROOT

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
BIN = Path(sys.executable).parent


def zizmor(*paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "zizmor"), "--offline", "--no-progress", *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=HANG,
    )


def schema_check(*paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.github-workflows", *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=HANG,
    )


def test_workflows_match_githubs_schema():
    done = schema_check(*WORKFLOWS)
    assert done.returncode == 0, done.stdout + done.stderr


def test_zizmor_finds_nothing():
    done = zizmor(*WORKFLOWS)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_linters_do_fail_on_a_broken_workflow(tmp_path):
    bad = tmp_path / "bad.yml"
    text = (ROOT / ".github" / "workflows" / "pages.yml").read_text(encoding="utf-8")
    unpinned = re.sub(r"actions/checkout@[0-9a-f]{40}", "actions/checkout@v7", text)
    bad.write_text(unpinned, encoding="utf-8")
    assert zizmor(bad).returncode != 0  # an action pinned by a movable tag
    bad.write_text(text.replace("runs-on:", "runs_on:", 1), encoding="utf-8")
    assert schema_check(bad).returncode != 0  # a misspelt key


def actions_used(workflow: dict) -> list[str]:
    """Every ``uses:`` of a parsed workflow: its jobs' (a called workflow) and their steps'."""
    jobs = workflow["jobs"].values()
    return [job["uses"] for job in jobs if "uses" in job] + [
        step["uses"] for job in jobs for step in job.get("steps", []) if "uses" in step
    ]


def test_every_action_is_pinned_to_one_commit_in_every_workflow():
    """A commit cannot be moved, a tag can (zizmor refuses a tag: the test above); and one
    action is the same code in every workflow."""
    commits: dict[str, set[str]] = {}
    for path in WORKFLOWS:
        for used in actions_used(yaml.safe_load(path.read_text(encoding="utf-8"))):
            if used.startswith("./"):
                continue  # a workflow of this repository, at this commit
            action, _, ref = used.partition("@")
            assert re.fullmatch(r"[0-9a-f]{40}", ref), f"{path.name}: {used} is not pinned by commit"
            commits.setdefault(action, set()).add(ref)
    assert commits, "no action found: the workflows were not read"
    assert {a: c for a, c in commits.items() if len(c) > 1} == {}, "an action pinned to two commits"


def test_release_publishes_on_a_version_tag_with_trusted_publishing():
    release = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yml").read_text())
    on = release[True]  # YAML 1.1 reads the key `on` as True
    assert on == {"push": {"tags": ["v*"]}, "pull_request": None}  # a pull request: a dry run
    assert release["permissions"] == {}
    build, publish = release["jobs"]["build"], release["jobs"]["publish"]
    assert publish["if"] == "github.event_name == 'push' && startsWith(github.ref, 'refs/tags/v')"
    script = "\n".join(s.get("run", "") for s in build["steps"])
    assert "python -m build" in script and "twine check --strict dist/*" in script
    assert publish["needs"] == "build"
    assert publish["environment"]["name"] == "pypi"
    assert publish["permissions"] == {"id-token": "write"}  # and no token or password
    publish_step = publish["steps"][-1]
    assert publish_step["uses"].startswith("pypa/gh-action-pypi-publish@")
    assert "with" not in publish_step or "password" not in publish_step["with"]


def test_the_pages_build_installs_no_torch():
    def pins(name: str) -> set[str]:  # the packages a lock file of requirements/ installs
        text = (ROOT / "requirements" / name).read_text(encoding="utf-8")
        return {m.lower() for m in re.findall(r"^([A-Za-z0-9][\w.-]*)==", text, re.M)}

    docs, test = pins("docs.txt"), pins("test.txt")
    assert {"mkdocs", "mkdocs-material", "matplotlib"} <= docs <= test
    assert not docs & {"torch", "transformers", "accelerate", "pytest"}, docs
    assert {"transformers", "pytest"} <= test and pins("torch.txt") == {"torch"}
    # that ./dev build installs the docs lock alone: tests/fast/test_dev.py


def test_the_fast_job_runs_under_another_blas_kernel_with_one_thread():
    # docs/contributing.md, "Numbers that depend on the machine": a claim quoting one
    # machine's rounding fails in this job
    tests = yaml.safe_load((ROOT / ".github" / "workflows" / "tests.yml").read_text())
    fast = tests["jobs"]["fast"]
    assert fast["env"]["OPENBLAS_CORETYPE"] == "Haswell" and str(fast["env"]["OPENBLAS_NUM_THREADS"]) == "1"
    assert any(step.get("run", "").strip() == "./dev check" for step in fast["steps"])
    assert "OPENBLAS_CORETYPE" not in tests["jobs"]["test"].get("env", {})  # the other job: the runner's own
