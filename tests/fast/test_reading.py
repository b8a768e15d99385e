"""The reading-time estimate (``qkv_site.reading``): what it counts and at what rate.

A reader who reads the code needs time for it: prose at 200 words a minute, every line of
code or printed output that holds something at 15 lines a minute, and what is folded away at
half those times. The tests build small pages whose time is known by arithmetic.
"""

from __future__ import annotations

import math

from qkv_site.reading import FOLDED, LINES_PER_MINUTE, WORDS_PER_MINUTE, Reading, path_minutes, reading_of


def prose(words: int) -> str:
    return "<p>" + " ".join(["word"] * words) + "</p>"


def code(lines: int) -> str:
    return '<div class="highlight"><pre><code>' + "x = 1\n\n" * lines + "</code></pre></div>"


def test_prose_reads_at_200_words_and_code_at_15_lines_a_minute():
    page = prose(400) + code(30)  # blank lines between them do not count
    counted = reading_of(page)
    assert (counted.words, counted.lines) == (400, 30)
    assert counted.exact_minutes == 400 / 200 + 30 / 15 == 4.0
    assert (WORDS_PER_MINUTE, LINES_PER_MINUTE, FOLDED) == (200, 15, 0.5)


def test_a_folded_block_counts_at_half_and_an_open_one_whole():
    folded = f"<details><summary>Solution</summary>{prose(200)}{code(15)}</details>"
    opened = f'<details open="open"><summary>Note</summary>{prose(200)}{code(15)}</details>'
    f, o = reading_of(folded), reading_of(opened)
    assert (f.folded_words, f.folded_lines) == (201, 15)  # its summary is in the fold too
    assert f.exact_minutes == math.fsum([0.5 * 201 / 200, 0.5 * 1.0])
    assert (o.words, o.lines, o.folded_words) == (201, 15, 0)


def test_what_a_reader_does_not_read_is_not_counted():
    page = (
        '<h1 id="t">Title<a class="headerlink" href="#t">¶</a></h1>'
        '<p class="reading-time">About 9 minutes to read</p>'
        '<p>One fact. <a class="claim-mark" href="x">✓</a></p>'
        f'<figure><details class="qkv-figure-data"><summary>Data</summary>{prose(500)}</details></figure>'
    )
    assert reading_of(page) == Reading(words=3, lines=0, folded_words=0, folded_lines=0)


def test_display_maths_is_a_line_and_the_path_rounds_once():
    assert reading_of('<div class="arithmatex">\\[ a + b \\]</div>').lines == 1
    halves = [Reading(100, 0, 0, 0)] * 3  # half a minute each
    assert [r.minutes for r in halves] == [1, 1, 1]
    assert path_minutes(halves) == 2  # 1.5 minutes, rounded up once, not three times
