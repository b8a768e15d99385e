"""``./dev new-chapter SLUG "Title"`` (qkv_site.new_chapter) refuses what it cannot write,
saying why, with a non-zero exit and nothing written; what it writes is read back as written.

That the chapter it writes passes the tests and the strict build is
tests/site/test_new_chapter_builds.py's to show: it runs them in a copy of the repository.
"""

from __future__ import annotations

import pytest
import yaml
from checkout import copy_project
from qkv_site import new_chapter


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A copy of the repository that the refusals below must leave as it is."""
    return copy_project(tmp_path_factory.mktemp("new-chapter") / "qkv")


def snapshot(root):
    """Every file of the copy and its bytes."""
    return {path: path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def run(root, monkeypatch, *args):
    monkeypatch.chdir(root)
    return new_chapter.main(["--", *args])  # "--": a slug such as "-sinks" is no option


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
        ("recap", "docs/recap.md and tests/fast/test_chapter_recap.py exist already"),
        ("first-attention", "snippets/first_attention.py exists already"),  # a snippet of chapter 1
        ("masks", "sitebuild/qkv_site/figures/masks.py exists already"),  # a figure's name
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
        ("The mechanism on one page", "taken by a chapter already"),  # chapter 17's
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


def nav_part(root, part="The explanation"):
    loader = type("Loader", (yaml.SafeLoader,), {})
    loader.add_constructor("!ENV", lambda *_: None)
    config = yaml.load((root / "mkdocs.yml").read_text(encoding="utf-8"), Loader=loader)
    (entries,) = [item[part] for item in config["nav"] if isinstance(item, dict) and part in item]
    return [next(iter(entry.items())) for entry in entries]


def test_the_title_reads_back_from_the_nav_and_front_matter_and_a_second_run_is_refused(
    tmp_path, monkeypatch, capsys
):
    root = copy_project(tmp_path / "qkv")
    chapters = nav_part(root)
    title = 'Sinks: "where" # the weight goes'  # a colon, quotes and a hash: YAML needs quotes
    assert run(root, monkeypatch, "attention-sinks", title) == 0
    number = len(chapters) + 1
    assert nav_part(root) == [*chapters, (f"{number}. {title}", "attention-sinks.md")]
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
        "nav:\n  - Home: index.md\n  - The explanation:\n      - 1. One: one.md\n"
        '      # a comment\n\n      - "2. Two: a colon": two.md\n  - Explorer: explorer.md\n'
    )
    chapters, end = new_chapter.explanation(nav)
    assert chapters == [(1, "One", "one.md"), (2, "Two: a colon", "two.md")]
    assert nav.splitlines()[end - 1].endswith("two.md")  # the next chapter goes after it
    with pytest.raises(ValueError, match=r"'Explorer' is not 'N\. Title'"):
        new_chapter.explanation(nav.replace("  - Explorer", "      - Explorer"))
