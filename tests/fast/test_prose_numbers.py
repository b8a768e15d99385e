"""Every number a guarded sentence writes is compared, by its test, with what the test computes
(``check_prose``, tests/prose.py), so prose and tests cannot drift apart unseen."""

from __future__ import annotations

import ast

import pytest
from prose import check_prose, written_numbers
from qkv_site.claims import find_claims
from support import ROOT

# Guarded sentences with numbers whose tests do not call check_prose yet. This set only
# shrinks: an id leaves it when its test calls check_prose; it must be empty.
PENDING: set[str] = {
    "cache-batch-64gib", "cache-bytes-formula", "cache-decode-equal",
    "cache-earlier-kv-unchanged", "cache-exercise-scores", "cache-exercise-size",
    "cache-gqa-same-scores", "cache-gqa-shrink", "cache-growth-orders",
    "cache-memory-table", "cache-projections-closed-form", "cache-scores-closed-form",
    "cache-table-last-token", "explorer-dv-four",
    "faq-cosine-bounded",
    "faq-cosine-ceiling", "faq-cosine-temperature", "faq-cross-shapes", "faq-dk-models",
    "faq-head-weights-columns", "faq-scale-per-head", "faq-sharper-query-lookup",
    "faq-weights-count", "hand-drank-finds-milk", "hand-drank-receives-dairy",
    "heads-1gib-maps", "heads-exercise-gpt2", "heads-exercise-grouped", "heads-flops-equal",
    "heads-mask-broadcast", "heads-merge-inverts-split", "heads-order-blind",
    "heads-padding-no-leak", "heads-params-equal", "heads-softmax-small",
    "heads-split-shapes", "heads-steps-equal-layer", "heads-torch-agrees",
    "heads-weights-memory-8x", "home-is-the-formula", "home-shapes",
    "kinds-causal-renormalised", "kinds-causal-zeros", "kinds-cross-shape",
    "kinds-exercise-causal-count", "kinds-exercise-cross-shapes",
    "kinds-exercise-end-padding", "kinds-fully-masked-torch", "kinds-mask-broadcast",
    "kinds-mask-convention", "kinds-padding-zeros", "kinds-torch-agrees",
    "kv-sep-key-changes-asking-rows", "kv-sep-key-moves-weights",
    "kv-sep-value-changes-output", "lookup-every-key-weighted", "lookup-ex-factor",
    "lookup-ex-never-pure", "lookup-nudge", "lookup-scores-are-warmth",
    "lookup-sharpen-never-exact", "lookup-sharpen-to-hard",
    "pos-offset-only", "pos-permutation-equivariant",
    "proj-dv-free", "proj-ex-params", "proj-ex-she-milk", "proj-key-bias-cancels",
    "proj-param-count", "proj-shapes", "recap-blend", "recap-cross", "recap-gqa-shrink",
    "recap-heads-cost", "recap-masks-zero", "recap-scale", "rows-sum-to-one",
    "scale-assumes-unit-variance", "scale-d1-no-difference", "scale-derived-variance",
    "scale-ex-d16", "scale-ex-sigma", "scale-fourth-moment-gaussian",
    "scale-init-unit-variance", "scale-jacobian-vanishes", "scale-query-gradient-64",
    "scale-query-gradient-collapses", "scale-standard-error", "scale-std-ratio-eight",
    "scale-unscaled-low-entropy", "scale-unscaled-majority-copies",
    "scale-unscaled-near-one-hot", "scale-variance-near-one",
    "steps-columns-need-not-sum-to-one", "steps-ex-wrong-axis", "steps-output-is-mixture",
    "steps-residual-add", "steps-rows-are-distributions", "steps-scale-before-product",
    "steps-scale-keeps-order", "steps-sdpa-agrees", "steps-shapes",
    "steps-spread-matches-theory", "three-dk-dv-shapes", "three-hand-one-way",
    "three-head-sizes", "three-tie-kv-output-changes", "three-tie-kv-weights-unchanged",
    "traps-exercise-left-padding", "traps-exercise-wrong-axis", "traps-float-mask",
    "traps-forgot-values", "traps-nan-spreads", "traps-no-scaling-gradient",
    "traps-wrong-axis", "try-close-scores-split", "try-default-state",
    "try-dk1-drank-like-she", "try-dk1-identical", "try-dk1-one-ranking", "try-dk4-halves",
    "try-drank-reranks", "try-gradient-vanishes", "try-near-tie-ratio",
    "try-output-is-blend", "try-query-gradient-measured", "try-scaled-spread",
    "try-stages-keep-order", "try-unscaled-collapses", "try-unscaled-eight-times",
}


def checked_ids() -> set[str]:
    """The claim ids that a test guarding that claim (``@pytest.mark.claim(id)``) passes, as a
    literal, to ``check_prose``."""
    ids = set()
    for path in (ROOT / "tests").rglob("test_*.py"):
        for test in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(test, ast.FunctionDef):
                continue
            guarded = {arg.value for d in test.decorator_list if isinstance(d, ast.Call)
                       and ast.unparse(d.func) == "pytest.mark.claim"
                       for arg in d.args if isinstance(arg, ast.Constant)}
            for node in ast.walk(test):
                if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "check_prose"
                        and node.args and isinstance(node.args[0], ast.Constant)
                        and node.args[0].value in guarded):
                    ids.add(node.args[0].value)
    return ids


def test_every_number_in_a_guarded_sentence_is_checked_by_its_test():
    claims = find_claims(ROOT / "docs")
    with_numbers = {c.id for c in claims if written_numbers(c.sentence)}
    checked = checked_ids()
    unchecked = sorted(with_numbers - checked - PENDING)
    assert not unchecked, ("these guarded sentences write numbers that no test compares with "
                           "check_prose: " + ", ".join(unchecked))
    assert not checked - {c.id for c in claims}, "check_prose names claims no page makes"
    stale = sorted(PENDING & checked) + sorted(PENDING - with_numbers)
    assert not stale, f"remove from PENDING (checked now, or without numbers): {stale}"


@pytest.mark.parametrize(("sentence", "texts"), [
    ("Llama 2 7B keeps 524,288 bytes, 512 KiB", ["2", "524,288", "512"]),
    ("SmolLM2-135M-Instruct in Q4_1 and float32, GPT-2's d_k = 64", ["64"]),
    ("a spread of 27.3, and 3.4; -0.5 and −1.25 and 0.12-0.18", ["27.3", "3.4", "-0.5", "-1.25",
                                                                 "0.12", "0.18"]),
    (r"within $10^{-4}$ and 10⁻³⁰, ranks 7th of 8, 71% of rows", ["10^{-4}", "10^{-30}", "7th",
                                                                   "8", "71%"]),
])
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
    sentence_numbers = written_numbers(next(c.sentence for c in find_claims(ROOT / "docs")
                                            if c.id == "home-shapes"))
    values = [w.value for w in sentence_numbers]
    check_prose("home-shapes", *values)
    with pytest.raises(AssertionError, match="writes numbers the test does not compute"):
        check_prose("home-shapes", *values[:-1], values[-1] + 1)
    with pytest.raises(AssertionError, match="the test passed"):
        check_prose("home-shapes", *values[:-1])
