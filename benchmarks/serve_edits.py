"""Time from saving an edit to seeing it in the browser, with ``./dev serve`` running.

Serves a copy of the repository (so the tree is never edited) with the options of
``./dev serve``, opens a chapter in headless Chromium and measures, in this one run:

1. chapter: a sentence appended to the chapter's Markdown, until the reloaded page shows it;
2. snippet: a ``print`` added to the snippet section that chapter runs, until its output shows.

The copy shares this tree's artifact cache (``.cache/artifacts``), so the first build is a
warm one, as it is for a contributor. Goals on the 2-core machine: chapter <= 2 s, snippet
<= 3 s. Each is the best of ``--repeat`` edits (default 3); the load average is printed.

    python benchmarks/serve_edits.py [--repeat N] [--page why-scale]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "sitebuild"))
from qkv_site.artifacts.config import cache_dir  # noqa: E402
from qkv_site.local import chromium, clean_env, copy_project, dev_serve_watch_options, serve  # noqa: E402  # noqa: E402

CHAPTER_GOAL_S, SNIPPET_GOAL_S = 2.0, 3.0
EXEC_BLOCK = re.compile(r'^```python exec="on"[^\n]*\n--8<-- "([^":]+):([^"]+)"', re.M)


def first_snippet_section(markdown: str) -> tuple[str, str]:
    match = EXEC_BLOCK.search(markdown)
    if not match:
        sys.exit("the page runs no snippet section")
    return match.group(1), match.group(2)


def add_print(script: Path, section: str, text: str) -> None:
    """Insert ``print(text)`` as the last line of ``section`` in ``script``."""
    source = script.read_text(encoding="utf-8")
    end = re.search(rf"^([ \t]*)# --8<-- \[end:{re.escape(section)}\]", source, re.M)
    line = f'{end.group(1)}print("{text}")\n'
    script.write_text(source[: end.start()] + line + source[end.start() :], encoding="utf-8")


def seconds_until_shown(browser_page, text: str, edit) -> float:
    start = time.perf_counter()
    edit()
    browser_page.get_by_text(text).first.wait_for(timeout=120_000)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--page", default="why-scale")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="qkv-serve-edits-") as tmp:
        root = copy_project(Path(tmp) / "qkv")
        chapter = root / "docs" / f"{args.page}.md"
        script_name, section = first_snippet_section(chapter.read_text(encoding="utf-8"))
        script = root / script_name if (root / script_name).is_file() else root / "snippets" / script_name
        env = clean_env(PYTHONPATH=str(root), QKV_CACHE=str(cache_dir(ROOT)))
        chapter_s, snippet_s = [], []
        with serve(root, *dev_serve_watch_options(), env=env) as served, chromium() as browser:
            page = browser.new_page()
            page.goto(served.url + f"{args.page}/")
            run = uuid.uuid4().hex[:8]  # edits no earlier run made: the cache cannot know them
            for n in range(args.repeat):
                marker = f"Edit number {n} of the chapter ({run})."
                chapter_s.append(
                    seconds_until_shown(
                        page,
                        marker,
                        lambda m=marker: chapter.write_text(
                            chapter.read_text(encoding="utf-8") + f"\n\n{m}\n", encoding="utf-8"
                        ),
                    )
                )
                marker = f"snippet-edit-{n}-{run}"
                snippet_s.append(
                    seconds_until_shown(page, marker, lambda m=marker: add_print(script, section, m))
                )
            builds = re.findall(r"Documentation built in ([\d.]+) seconds", "".join(served.lines))

    print(
        f"serve: edit saved -> visible in Chromium, best of {args.repeat}; cores "
        f"{os.cpu_count()}, load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"  chapter docs/{args.page}.md: {min(chapter_s):4.2f} s (all: "
        f"{', '.join(f'{s:.2f}' for s in chapter_s)})   goal <= {CHAPTER_GOAL_S:.0f} s   "
        f"{'ok' if min(chapter_s) <= CHAPTER_GOAL_S else 'MISSED'}"
    )
    print(
        f"  snippet {script.relative_to(root)}:{section}: {min(snippet_s):4.2f} s (all: "
        f"{', '.join(f'{s:.2f}' for s in snippet_s)})   goal <= {SNIPPET_GOAL_S:.0f} s   "
        f"{'ok' if min(snippet_s) <= SNIPPET_GOAL_S else 'MISSED'}"
    )
    print(
        f"  rebuilds logged by mkdocs: {', '.join(builds)} s (the first is the initial build; "
        "mkdocs logs a time equal to an earlier one only once)"
    )


if __name__ == "__main__":
    main()
