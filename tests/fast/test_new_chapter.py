"""``./dev new-chapter SLUG "Title" [--after SLUG]`` (qkv_site.new_chapter) refuses what it cannot write,
saying why, with a non-zero exit and nothing written; what it writes is read back as written.

That the chapter it writes passes the tests and the strict build is
tests/site/test_new_chapter_builds.py's to show: it runs them in a copy of the repository.
"""

from __future__ import annotations

import pytest
import yaml
from checkout import copy_project
from qkv_site import new_chapter
from qkv_site.site import Site, front_matter, number_chapters


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A copy of the repository that the refusals below must leave as it is."""
    return copy_project(tmp_path_factory.mktemp("new-chapter") / "qkv")


def snapshot(root):
    """Every file of the copy and its bytes."""
    return {path: path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def run(root, monkeypatch, *args, after=None):
    monkeypatch.chdir(root)
    options = ["--after", after] if after else []
    return new_chapter.main([*options, "--", *args])  # "--": a slug such as "-sinks" is no option


@pytest.mark.parametrize(
    ("slug", "says"),
    [
        ("Attention_Sinks", "not kebab-case"),
        ("attention--sinks", "not kebab-case"),
        ("-sinks", "not kebab-case"),
        ("1st-look", "not kebab-case"),
        ("sinks-", "not kebab-case"),
        ("a" * 41, "not kebab-case"),
        ("class", "Python keyword"),
        ("recap", "docs/recap.md"),
        ("first-attention", "snippets/first_attention.py exists already"),  # a snippet of chapter 1
        ("masks", "sitebuild/qkv_site/figures/masks.py and tests/figure_tables/masks.py exist"),  # a figure's
    ],
)
def test_a_bad_or_taken_slug_is_refused_and_nothing_is_written(project, monkeypatch, capsys, slug, says):
    before = snapshot(project)
    assert run(project, monkeypatch, slug, "A title of its own") == 2
    error = capsys.readouterr().err
    assert error.startswith("./dev new-chapter: ") and repr(slug) in error and says in error, error
    assert snapshot(project) == before


@pytest.mark.parametrize(
    ("title", "says"),
    [
        ("", "the title is empty"),
        ("   ", "the title is empty"),
        ("Two\nlines", "spans lines"),
        ("The [bracketed] word", "contains '[]'"),
        ("A *starred* word", "contains '*'"),
        ("18. Numbered", "starts with a number"),
        ("The mechanism on one page", "taken by a chapter already"),  # the recap's
        ("A {n} placeholder", "contains '{}'"),
    ],
)
def test_an_empty_or_unwritable_title_is_refused_and_nothing_is_written(
    project, monkeypatch, capsys, title, says
):
    before = snapshot(project)
    assert run(project, monkeypatch, "a-fresh-slug", title) == 2
    error = capsys.readouterr().err
    assert error.startswith("./dev new-chapter: ") and says in error, error
    assert snapshot(project) == before


def test_a_missing_argument_exits_2_with_the_usage(project, monkeypatch, capsys):
    with pytest.raises(SystemExit) as exited:
        run(project, monkeypatch, "only-a-slug")
    assert exited.value.code == 2 and "usage: ./dev new-chapter" in capsys.readouterr().err


def nav_part(root):
    """(title, file) of the chapters, as the site model reads them."""
    return [(c.title, c.file) for c in Site.read(root).chapters()]


def test_the_title_reads_back_from_the_nav_and_front_matter_and_a_second_run_is_refused(
    tmp_path, monkeypatch, capsys
):
    root = copy_project(tmp_path / "qkv")
    chapters = nav_part(root)
    title = 'Sinks: "where" # the weight goes'  # a colon, quotes and a hash: YAML needs quotes
    assert run(root, monkeypatch, "attention-sinks", title) == 0
    assert nav_part(root) == [*chapters, (title, "attention-sinks.md")]
    page = (root / "docs" / "attention-sinks.md").read_text(encoding="utf-8")
    front = yaml.safe_load(page.split("---\n")[1])
    assert front["title"] == title and title in front["description"]
    assert f"\n# {title}\n" in page
    capsys.readouterr()
    before = snapshot(root)
    assert run(root, monkeypatch, "attention-sinks", "Another title") == 2
    assert "is taken" in capsys.readouterr().err
    assert snapshot(root) == before


def test_the_nav_part_is_read_past_comments_blank_lines_and_quoted_labels():
    nav = (
        "nav:\n  - Home: index.md\n  - The explanation:\n      - One: one.md\n"
        '      # a comment\n\n      - "Two: a colon": two.md\n  - Explorer: explorer.md\n'
    )
    lines = new_chapter.nav_lines(nav)
    assert list(lines) == ["one.md", "two.md"]
    assert nav.splitlines()[lines["two.md"]].endswith("two.md")  # a chapter after it goes below


def test_after_puts_the_chapter_in_the_middle_and_every_later_chapter_moves_up_one(tmp_path, monkeypatch):
    root = copy_project(tmp_path / "qkv")
    before = Site.read(root).chapters()
    at = next(i for i, c in enumerate(before) if c.file == "why-scale.md")
    old_read_next = read_next(root, "why-scale.md")
    assert run(root, monkeypatch, "attention-sinks", "Where the spare weight goes", after="why-scale") == 0
    after = Site.read(root).chapters()
    assert [c.file for c in after] == [
        *(c.file for c in before[: at + 1]),
        "attention-sinks.md",
        *(c.file for c in before[at + 1 :]),
    ]
    new = after[at + 1]
    assert new.number == before[at].number + 1 and after[-1].number == before[-1].number + 1
    # the chapter before leads to the new one, which leads where that one led
    chapters = after
    assert read_next(root, "why-scale.md", chapters).startswith(f"[{new.label}](attention-sinks.md)")
    assert read_next(root, "attention-sinks.md", chapters) == number_chapters(old_read_next, chapters)
    # the home page lists it right after the chapter before it
    home = (root / "docs" / "index.md").read_text(encoding="utf-8")
    lines = [ln for ln in home.splitlines() if ln.startswith("1. [{title}](")]
    files = [ln.split("](", 1)[1].split(")", 1)[0] for ln in lines]
    assert files == [c.file for c in after]


def test_after_names_the_chapters_when_it_names_none_of_them(project, monkeypatch, capsys):
    before = snapshot(project)
    assert run(project, monkeypatch, "a-fresh-slug", "A title", after="masks-in-pytorch") == 2
    error = capsys.readouterr().err
    assert "'masks-in-pytorch' is not a chapter" in error and "why-scale" in error, error
    assert snapshot(project) == before


def read_next(root, page, chapters=None):
    """The text after "**Read next:** " on ``docs/PAGE``, numbered by ``chapters`` if given."""
    _, body = front_matter((root / "docs" / page).read_text(encoding="utf-8"))
    found = body.split("**Read next:** ", 1)[1].split("\n\n", 1)[0].strip()
    return number_chapters(found, chapters) if chapters else found
