"""A clean build of the same tree gives the site byte for byte.

The run's site (``built_site``) is built in this tree, from its artifact cache when the
cache holds what is needed; ``clean_site`` is built from a snapshot of the same tree with no
cache at all, so everything (figures, snippet output, explorer data, the notebook) is
computed again, by other processes at another time. When this tree's cache is empty (a fresh
clone, CI), the run's build waits for the clean one and starts from the cache it filled, so
a build without a cache is still compared with a build from one (tests/conftest.py). Both
are dated by the last commit (``SOURCE_DATE_EPOCH``), as ``./dev build`` dates a build, and
addressed as published (the sitemap then lists every page with that date). Every file is
compared: pages, figures, the search index, the notebook page and the gzipped sitemap. So
the cache cannot change what is published, and the same commit gives the same bytes.
"""

from __future__ import annotations

import re
import subprocess
from datetime import UTC, datetime

from checkout import clean_env
from support import PUBLISHED_URL, ROOT, last_commit_time, nav_paths


def files(site) -> dict[str, bytes]:
    return {p.relative_to(site).as_posix(): p.read_bytes() for p in site.rglob("*") if p.is_file()}


def first_difference(a: bytes, b: bytes) -> str:
    at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return f"at byte {at}: {a[max(0, at - 60) : at + 60]!r} != {b[max(0, at - 60) : at + 60]!r}"


def test_a_clean_build_is_byte_identical_to_the_site(built_site, clean_site):
    first, second = files(built_site), files(clean_site)
    for must in (
        "index.html",
        "notebook/index.html",
        "notebook/notebook.ipynb",
        "search/search_index.json",
        "sitemap.xml",
        "sitemap.xml.gz",
        "404.html",
    ):
        assert must in first, f"{must} is missing from the build"
    assert any(name.endswith(".svg") for name in first), "no figure was built"
    assert sorted(first) == sorted(second)
    differing = [
        f"{name} {first_difference(first[name], second[name])}"
        for name in sorted(first)
        if first[name] != second[name]
    ]
    assert differing == [], "\n".join(differing[:10])
    day = datetime.fromtimestamp(int(last_commit_time()), UTC).strftime("%Y-%m-%d")
    sitemap = first["sitemap.xml"].decode()
    listed = re.findall(r"<loc>(.*?)</loc>", sitemap)
    assert sorted(listed) == sorted(f"{PUBLISHED_URL}{path}" for path in nav_paths())  # each page
    assert set(re.findall(r"<lastmod>(.*?)</lastmod>", sitemap)) == {day}  # the commit's day


def test_dev_dates_builds_and_serves_by_the_last_commit():
    dev = (ROOT / "dev").read_text(encoding="utf-8")
    for command in ("serve", "build"):
        block = re.search(rf"^  {command}\)\n(.*?);;", dev, re.M | re.S).group(1)
        assert block.index("build_date") < block.index("exec "), command
    function = re.search(r"^build_date\(\) \{.*?^\}", dev, re.M | re.S).group(0)
    done = subprocess.run(
        ["bash", "-c", f"{function}\nbuild_date; echo $SOURCE_DATE_EPOCH"],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
    )
    assert done.stdout.strip() == last_commit_time()
