"""Guards for the claims of docs/where-qkv-come-from.md, "Making queries, keys and values".

Each test derives its fact itself, from qkv's public API applied to ``qkv.toy`` data, from
hand-written NumPy or from algebra, and then checks that what the page prints under its
executed blocks (``page_output``) agrees with it, to the printed rounding. No expected value
is copied from the printed output, and no test reads a name a snippet defines.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from pages_support import (
    DRANK,
    DRANK_ON_MILK,
    DRANK_ON_OTHER,
    DRANK_ON_SHE,
    MILK,
    SHE,
    WORDS,
    assert_printed,
    line_of,
    named_numbers,
    reference_attention,
    stated,
)
from prose import check_prose
from support import numbers

import qkv
from qkv import dot_product, toy

# ---- 2. Where Q, K and V come from -----------------------------------------------------


@pytest.fixture(scope="module")
def shown_where(page_output):
    return page_output("where-qkv-come-from.md")


@pytest.mark.claim("proj-attention-no-weights")
def test_attention_takes_only_its_inputs_and_holds_no_arrays(page_output, random_toy):
    signature = inspect.signature(qkv.attention)
    assert list(signature.parameters) == ["q", "k", "v", "mask", "scale"]
    held = [name for name, value in vars(dot_product).items() if isinstance(value, np.ndarray)]
    assert held == []
    _, _, q, k, v = random_toy
    weights, output = reference_attention(q, k, v)  # the formula, and only it
    result = qkv.attention(q, k, v)
    np.testing.assert_allclose(result.weights, weights, rtol=1e-12)
    np.testing.assert_allclose(result.output, output, rtol=1e-12)
    # the signature is printed on the depth page, in its count of the learned numbers
    shown_depth = page_output("where-qkv-come-from-in-depth.md")
    assert (
        shown_depth.line("where_qkv_come_from.py:parameters", "qkv.attention takes:")
        == f"qkv.attention takes: {signature}"
    )


# ---- 2. The hand-built toy (qkv.toy.feature_embeddings, hand_built_projections) -------


def nonzero_names(row, names):
    """The non-zero entries of ``row`` as words: ['liquid', '8'], or ['-'] if none."""
    return [token for n, x in zip(names, row, strict=True) if x for token in (n, f"{x:g}")] or ["-"]


@pytest.mark.claim("hand-roles")
def test_milks_three_vectors_look_for_a_verb_show_liquid_and_hand_over_dairy(shown_where, hand_built):
    q, k, v, _ = hand_built
    assert nonzero_names(q[MILK], toy.FEATURES) == ["verb", "4"]
    assert nonzero_names(k[MILK], toy.FEATURES) == ["liquid", "1"]
    assert nonzero_names(v[MILK], toy.VALUE_COLUMNS) == ["dairy", "1"]
    # queries and keys share one column per feature, and no key (nor query) shows "dairy"
    assert not k[:, toy.FEATURES.index("dairy")].any() and not q[:, toy.FEATURES.index("dairy")].any()
    text = shown_where["hand_built.py:roles"]
    for i, word in enumerate(WORDS):  # the table, row by row
        expected = [
            word,
            *nonzero_names(q[i], toy.FEATURES),
            *nonzero_names(k[i], toy.FEATURES),
            *nonzero_names(v[i], toy.VALUE_COLUMNS),
        ]
        # a vector's entries are printed 'person 4, liquid 8'
        assert line_of(text, f"{word} ").replace(",", " ").split() == expected
    assert text.count("dairy") == 1  # only milk's value


@pytest.fixture(scope="module")
def hand_weights_block(shown_where):
    # the table of every row (folded) and drank's own lines, printed by two blocks in turn
    return shown_where["hand_built.py:weights"] + "\n" + shown_where["hand_built.py:drank"]


@pytest.mark.claim("hand-drank-finds-milk")
def test_drank_gives_milk_the_weight_its_hand_written_score_predicts(hand_weights_block, hand_built):
    q, k, _, result = hand_built
    scores = [4 / np.sqrt(8), 0, 8 / np.sqrt(8), 0, 0, 0]
    np.testing.assert_allclose(q[DRANK] @ k.T / np.sqrt(toy.D_K), scores, rtol=1e-12, atol=1e-15)
    expected = [DRANK_ON_SHE, DRANK_ON_OTHER, DRANK_ON_MILK] + [DRANK_ON_OTHER] * 3
    np.testing.assert_allclose(result.weights[DRANK], expected, rtol=1e-12)
    raw = q[DRANK] @ k.T
    liquid = toy.FEATURES.index("liquid")
    others = np.delete(scores, [SHE, MILK])
    assert (others == 0).all() and k[:, liquid].nonzero()[0].tolist() == [MILK]
    check_prose(
        "hand-drank-finds-milk",
        result.weights[DRANK, MILK],
        q[DRANK, liquid],
        raw[MILK],
        toy.D_K,
        scores[MILK],
        raw[SHE],
        toy.D_K,
        scores[SHE],
        others.max(),
    )
    assert_printed(line_of(hand_weights_block, "drank's scaled scores:"), scores, 2)
    assert_printed(line_of(hand_weights_block, "drank -> milk"), [DRANK_ON_MILK, DRANK_ON_SHE], 2)
    table = {
        ln.split()[0]: ln.split()[1:]
        for ln in hand_weights_block.splitlines()
        if ln.split() and ln.split()[0] in WORDS and len(ln.split()) == len(WORDS) + 1
    }
    assert_printed(" ".join(table["drank"]), expected, 2)
    for word, row in zip(WORDS, result.weights, strict=True):  # and every other row of the table
        assert_printed(" ".join(table[word]), row, 2)


@pytest.mark.claim("hand-drank-receives-dairy")
def test_what_drank_receives_is_mostly_dairy(hand_weights_block, hand_built):
    out = hand_built[3].output[DRANK]
    # each value hands over one column: she person, drank verb, milk dairy, cup container
    received = {
        "person": DRANK_ON_SHE,
        "verb": DRANK_ON_OTHER,
        "dairy": DRANK_ON_MILK,
        "container": DRANK_ON_OTHER,
    }
    np.testing.assert_allclose(out, [received[c] for c in toy.VALUE_COLUMNS], rtol=1e-12)
    assert toy.VALUE_COLUMNS[out.argmax()] == "dairy"
    check_prose("hand-drank-receives-dairy", out[toy.VALUE_COLUMNS.index("dairy")])
    printed = named_numbers(line_of(hand_weights_block, "drank's output:"))
    assert printed == {c: pytest.approx(x, abs=5e-3) for c, x in received.items()}
    assert max(printed, key=printed.get) == "dairy"


# ---- exercises of chapter 2 ----------------------------------------------------------------


@pytest.mark.claim("proj-ex-params")
def test_one_head_of_the_exercise_has_d_model_times_3_d_k_numbers(shown_where):
    d_head, d_model = stated("proj-ex-params")[:2]  # the exercise's givens, as the answer repeats them
    d_head, d_model = int(d_head), int(d_model)
    learned = 3 * d_model * d_head  # W_Q, W_K and W_V, each d_model x d_head
    check_prose("proj-ex-params", d_head, d_model, learned, d_model, d_head)
    text = shown_where["where_qkv_come_from.py:exercise_params"]
    assert numbers(line_of(text, "W_Q, W_K, W_V:")) == [d_model, d_head] * 3
    assert numbers(line_of(text, "learned numbers:")) == [learned]


@pytest.mark.claim("proj-ex-write-step")
def test_the_gradient_step_solution_passes_and_brings_drank_back_to_milk(shown_where):
    from qkv.exercises import check_gradient_step
    from qkv.exercises.learning import toy_start

    def step(w_q, w_k, x, i, j, lr):  # the chain rule written here, independently of the page
        k = x @ w_k
        c = 1 / np.sqrt(w_k.shape[1])
        weights = qkv.softmax((x[i] @ w_q) @ k.T * c)
        return w_q - lr * np.outer(x[i], k.T @ (weights - np.eye(len(weights))[j]) * c)

    result = check_gradient_step(step)
    assert result.ok, result.message
    printed = shown_where["where_qkv_come_from.py:write_step"]
    assert printed.strip() == str(result).strip()
    # the numbers the sentence states: drank's weight on milk before and after ten steps
    hand = toy.hand_built_projections()
    x = toy.feature_embeddings()
    w_q = toy_start()
    before = qkv.self_attention(x, qkv.Projections(w_q, hand.w_k, hand.w_v)).weights[DRANK, MILK]
    for _ in range(10):
        w_q = step(w_q, hand.w_k, x, DRANK, MILK, 3.0)
    after = qkv.self_attention(x, qkv.Projections(w_q, hand.w_k, hand.w_v)).weights[DRANK]
    assert WORDS[after.argmax()] == "milk"
    check_prose("proj-ex-write-step", before, after[MILK])
    # the usual mistakes are refused: uphill, and the gradient without the softmax's part
    uphill = check_gradient_step(lambda w_q, w_k, x, i, j, lr: 2 * w_q - step(w_q, w_k, x, i, j, lr))
    assert not uphill.ok and "goes up the gradient" in uphill.message


# ---- the query of "it" in the trained model (figure trained-it-query) ----------------------

SENTENCE = "The cat sat on the mat because it was warm"


def _it_row(text, layer, head):
    from support import model_trace

    trace = model_trace(text)
    words = [p.strip() for p in trace.pieces]
    i = words.index("it")
    return words, trace.weights[layer, head, i].astype(np.float64)


@pytest.mark.model
@pytest.mark.claim("it-query-cat")
def test_the_head_that_looks_hardest_at_the_nouns_from_it_picks_cat():
    from qkv_site.figures import trained_it_query
    from support import model_trace

    trace = model_trace(SENTENCE)
    words = [p.strip() for p in trace.pieces]
    it, cat, mat = (words.index(w) for w in ("it", "cat", "mat"))
    on_nouns = trace.weights[:, :, it, cat].astype(np.float64) + trace.weights[:, :, it, mat]
    layer, head = np.unravel_index(np.argmax(on_nouns), on_nouns.shape)
    assert trained_it_query.data().head == (layer, head)
    w = trace.weights[layer, head, it].astype(np.float64)
    assert w[cat] > 10 * w[mat]  # the reading: cat, by far
    check_prose("it-query-cat", layer + 1, head + 1, w[cat], w[mat])


@pytest.mark.model
@pytest.mark.claim("it-query-ending")
def test_another_ending_leaves_every_heads_weights_of_it_unchanged():
    from support import model_trace

    warm, hungry = model_trace(SENTENCE), model_trace(SENTENCE.replace("warm", "hungry"))
    it = [p.strip() for p in warm.pieces].index("it")
    assert warm.ids[-1] != hungry.ids[-1] and list(warm.ids[: it + 1]) == list(hungry.ids[: it + 1])
    np.testing.assert_allclose(warm.weights[:, :, it], hungry.weights[:, :, it], atol=1e-5)
    n_layers, n_heads = warm.weights.shape[:2]
    check_prose("it-query-ending", n_layers * n_heads)


@pytest.mark.model
@pytest.mark.claim("it-query-subject")
def test_with_the_mat_as_the_subject_the_head_looks_at_mat():
    from qkv_site.figures import trained_it_query

    layer, head = trained_it_query.data().head
    words, w = _it_row("The mat was under the cat because it was warm", layer, head)
    on_mat, on_cat = w[words.index("mat")], w[words.index("cat")]
    assert on_mat > 1.5 * on_cat  # the subject, not the word cat
    # ... and not the first noun: with the cat the subject but named second, still the cat
    words, w = _it_row("On the mat sat the cat because it was warm", layer, head)
    assert words.index("cat") > words.index("mat") and w[words.index("cat")] > 2 * w[words.index("mat")]
    check_prose("it-query-subject", on_mat, on_cat)
