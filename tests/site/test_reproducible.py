"""Two clean builds of the same tree produce byte-identical sites.

Each build runs in its own fresh copy of one snapshot of the repository (tests/checkout.py),
so neither sees the other's caches. Both set ``SOURCE_DATE_EPOCH`` to the last commit's time,
as ``./dev build`` does, and the site address, as the publishing workflow does. Every file is
compared: pages, figures, the search index, the notebook page and the gzipped sitemap. This
is slow (two full builds) and does exactly two.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from datetime import UTC, datetime

import pytest
from checkout import clean_env, copy_project
from support import ROOT, build_site


# Build as the publishing workflow does: with a site address, the sitemap lists every page
# with a date, which is what SOURCE_DATE_EPOCH has to pin.
SITE_URL = "https://qkv.example/docs/"


def build_date() -> str:
    """The last commit's time, as ./dev build uses it (a fixed date before the first commit)."""
    done = subprocess.run(["git", "log", "-1", "--format=%ct"], cwd=ROOT,
                          capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else "1700000000"


def build(root, site, epoch: str) -> dict[str, bytes]:
    """Build the tree at ``root`` into ``site``; every file of the site by its path."""
    done = build_site(site, cwd=root, env=clean_env(PYTHONPATH=str(root),
                                                    SOURCE_DATE_EPOCH=epoch,
                                                    QKV_SITE_URL=SITE_URL))
    assert done.returncode == 0, f"build failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return {p.relative_to(site).as_posix(): p.read_bytes() for p in site.rglob("*") if p.is_file()}


def first_difference(a: bytes, b: bytes) -> str:
    at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return f"at byte {at}: {a[max(0, at - 60):at + 60]!r} != {b[max(0, at - 60):at + 60]!r}"


def test_two_clean_builds_are_byte_identical(tmp_path):
    epoch = build_date()
    # One snapshot of the tree, copied before either build: the working tree may change
    # meanwhile, and the builds must start from the same sources with no cache at all.
    tree = copy_project(tmp_path / "first" / "qkv")
    shutil.copytree(tree, tmp_path / "second" / "qkv")
    first = build(tmp_path / "first" / "qkv", tmp_path / "first" / "site", epoch)
    second = build(tmp_path / "second" / "qkv", tmp_path / "second" / "site", epoch)

    for must in ("index.html", "notebook/index.html", "notebook/notebook.ipynb",
                 "search/search_index.json", "sitemap.xml", "sitemap.xml.gz", "404.html"):
        assert must in first, f"{must} is missing from the build"
    assert any(name.endswith(".svg") for name in first), "no figure was built"
    assert sorted(first) == sorted(second)
    differing = [f"{name} {first_difference(first[name], second[name])}"
                 for name in sorted(first) if first[name] != second[name]]
    assert differing == [], "\n".join(differing[:10])
    print(f"{len(first)} files, {sum(map(len, first.values()))} bytes, identical")
    day = datetime.fromtimestamp(int(epoch), UTC).strftime("%Y-%m-%d")
    sitemap = first["sitemap.xml"].decode()
    assert sitemap.count("<url>") >= 14 and f"{SITE_URL}notebook/" in sitemap
    assert set(re.findall(r"<lastmod>(.*?)</lastmod>", sitemap)) == {day}  # the commit's day


def test_dev_dates_builds_and_serves_by_the_last_commit():
    dev = (ROOT / "dev").read_text(encoding="utf-8")
    for command in ("serve", "build"):
        block = re.search(rf"^  {command}\)\n(.*?);;", dev, re.M | re.S).group(1)
        assert block.index("build_date") < block.index("exec "), command
    function = re.search(r"^build_date\(\) \{.*?^\}", dev, re.M | re.S).group(0)
    done = subprocess.run(["bash", "-c", f"{function}\nbuild_date; echo $SOURCE_DATE_EPOCH"],
                          cwd=ROOT, env=clean_env(), capture_output=True, text=True)
    assert done.stdout.strip() == build_date()
