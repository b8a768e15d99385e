"""The explanation's goals, printed: words of prose and reading time per chapter, the
path's total, each lead's length and whether it quotes a number, whether a figure comes
before the first code, the claim marks, and (when ``site/`` is built) each page's weight.

    python benchmarks/explanation_goals.py [--site site]

Goals: each chapter at most 700 words of visible prose and the path at most 9,000; each
chapter at most 8 minutes of reading by the estimate the pages show (prose, code and
output, folded blocks at half: read from the built site) and the path at most 75; leads at
most 80 words with no statistic; a figure before the first code in every chapter; at least
398 claim marks; every page at most 200 KB of HTML. The counts are the tests' own
(``qkv_site.reading``).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "sitebuild")]

from qkv_site import claims, reading  # noqa: E402
from qkv_site.site import Site  # noqa: E402

GOALS = {
    "chapter": 700,
    "total": 9000,
    "lead": 80,
    "claims": 398,
    "page_kb": 200,
    "minutes": reading.CHAPTER_MINUTES,
    "path": reading.PATH_MINUTES,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=ROOT / "site", help="a built site to weigh")
    args = parser.parse_args()
    site = Site.read(ROOT)
    chapters = [c.file for c in site.chapters()]
    further = site.further()
    print(f"{'chapter':28s} {'words':>5s} {'lines':>5s} {'min':>4s} {'lead':>4s} plain figure-first")
    total, readings = 0, []
    for chapter in chapters:
        text = (ROOT / "docs" / chapter).read_text(encoding="utf-8")
        words = reading.chapter_words(ROOT, chapter)
        total += words
        built = args.site / chapter.removesuffix(".md") / "index.html"
        counted = reading.reading_of(built.read_text(encoding="utf-8")) if built.is_file() else None
        readings += [counted] if counted else []
        lines = f"{counted.lines}+{counted.folded_lines}" if counted else "?"
        shown = f"{counted.minutes:4d}" if counted else "   ?"
        lead = reading.lead(ROOT, text)
        plain = not re.search(r"[0-9%]|\bnats?\b|p-value", lead, re.I)
        print(
            f"{chapter:28s} {words:5d} {lines:>5s} {shown} {reading.word_count(lead):4d} "
            f"{'yes' if plain else 'NO':5s} {'yes' if reading.figure_comes_first(text) else 'NO'}"
        )
    path = reading.path_minutes(readings) if len(readings) == len(chapters) else "?"
    print(
        f"{'the explanation':28s} {total:5d}       {path:>4}   (goals: <= {GOALS['total']} words, "
        f"<= {GOALS['minutes']} min a chapter, <= {GOALS['path']} min in all)"
    )
    print("\nGoing further:")
    for page in further:
        print(f"  {page:28s} {reading.chapter_words(ROOT, page):5d} words")
    marks = claims.find_claims(ROOT / "docs")
    print(f"\nclaim marks: {len(marks)} (goal: >= {GOALS['claims']})")
    if args.site.is_dir():
        pages = sorted(args.site.rglob("*.html"), key=lambda p: -p.stat().st_size)
        heavy = [(p, p.stat().st_size / 1000) for p in pages if p.stat().st_size > GOALS["page_kb"] * 1000]
        print(f"pages over {GOALS['page_kb']} KB of HTML: {len(heavy)}")
        for path, kb in heavy:
            print(f"  {path.relative_to(args.site)}  {kb:.0f} KB")
    else:
        print(f"(no built site at {args.site}: page weights not measured)")


if __name__ == "__main__":
    main()
