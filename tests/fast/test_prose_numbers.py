"""Every number a guarded sentence writes is compared, by its test, with what the test computes
(``check_prose``, tests/prose.py), so prose and tests cannot drift apart unseen."""

from __future__ import annotations

import ast

import pytest
from prose import check_prose, written_numbers
from qkv_site.claims import find_claims
from support import ROOT


def checked_ids() -> set[str]:
    """The claim ids that a test guarding that claim (``@pytest.mark.claim(id)``) passes, as a
    literal, to ``check_prose``."""
    ids = set()
    for path in (ROOT / "tests").rglob("test_*.py"):
        for test in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(test, ast.FunctionDef):
                continue
            guarded = {
                arg.value
                for d in test.decorator_list
                if isinstance(d, ast.Call) and ast.unparse(d.func) == "pytest.mark.claim"
                for arg in d.args
                if isinstance(arg, ast.Constant)
            }
            for node in ast.walk(test):
                if (
                    isinstance(node, ast.Call)
                    and getattr(node.func, "id", None) == "check_prose"
                    and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and node.args[0].value in guarded
                ):
                    ids.add(node.args[0].value)
    return ids


@pytest.mark.claim("home-prose-numbers-checked")
def test_every_number_in_a_guarded_sentence_is_checked_by_its_test():
    claims = find_claims(ROOT / "docs")
    with_numbers = {c.id for c in claims if written_numbers(c.sentence)}
    checked = checked_ids()
    unchecked = sorted(with_numbers - checked)
    assert not unchecked, (
        "these guarded sentences write numbers that no test compares with "
        "check_prose: " + ", ".join(unchecked)
    )
    assert not checked - {c.id for c in claims}, "check_prose names claims no page makes"


@pytest.mark.parametrize(
    ("sentence", "texts"),
    [
        ("Llama 2 7B keeps 524,288 bytes, 512 KiB", ["2", "524,288", "512"]),
        ("SmolLM2-135M-Instruct in Q4_1 and float32, GPT-2's d_k = 64", ["64"]),
        (
            "a spread of 27.3, and 3.4; -0.5 and −1.25 and 0.12-0.18",
            ["27.3", "3.4", "-0.5", "-1.25", "0.12", "0.18"],
        ),
        (
            r"within $10^{-4}$ and 10⁻³⁰, ranks 7th of 8, 71% of rows",
            ["10^{-4}", "10^{-30}", "7th", "8", "71%"],
        ),
    ],
)
def test_numbers_are_read_as_prose_writes_them(sentence, texts):
    assert [w.text for w in written_numbers(sentence)] == texts


def test_a_number_is_matched_to_its_written_precision():
    (w,) = written_numbers("0.477")
    assert w.matches(0.4766) and w.matches(0.47749) and not w.matches(0.4776)
    (w,) = written_numbers("460,800")
    assert w.value == 460_800 and w.matches(460_800) and not w.matches(460_801)
    (w,) = written_numbers("$10^{-4}$")
    assert w.matches(1e-4) and not w.matches(1.1e-4)


def test_check_prose_fails_on_a_wrong_number_or_count():
    # a real claim of the home page: "Six words give a 6 × 6 matrix ... 4 numbers ... 8."
    sentence_numbers = written_numbers(
        next(c.sentence for c in find_claims(ROOT / "docs") if c.id == "home-shapes")
    )
    values = [w.value for w in sentence_numbers]
    check_prose("home-shapes", *values)
    with pytest.raises(AssertionError, match="writes numbers the test does not compute"):
        check_prose("home-shapes", *values[:-1], values[-1] + 1)
    with pytest.raises(AssertionError, match="the test passed"):
        check_prose("home-shapes", *values[:-1])
