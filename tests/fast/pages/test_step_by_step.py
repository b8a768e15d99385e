"""Chapter 5, from scores to output one array at a time (docs/step-by-step.md): every claim
the page makes, checked (its deep dive's are in test_step_by_step_in_depth.py).

Each test derives the fact itself, from the random toy of ``qkv.toy`` projected with the
matrices written out here (``X @ W``) and softmax written out with ``np.exp``, or from its
own seeded examples, and then checks that what the page prints under its blocks agrees,
to the rounding the page prints.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prose import check_prose
from support import ROOT, numbers, values_after
from support import softmax_by_hand as softmax

import qkv
from qkv import toy
from qkv.exercises import check_attention

T = len(toy.SENTENCE)
SHE, FROM, CUP = (toy.SENTENCE.index(w) for w in ("she", "from", "cup"))


@pytest.fixture(scope="module")
def qkv_toy():
    """The chapter's Q, K, V: the random toy projected with d_k = 8 and d_v = 4."""
    x, p = toy.embeddings(), toy.projections(d_k=toy.D_K, d_v=toy.D_V)
    return x, x @ p.w_q, x @ p.w_k, x @ p.w_v


@pytest.fixture(scope="module")
def weights(qkv_toy):
    _, q, k, _ = qkv_toy
    return softmax(q @ k.T / np.sqrt(toy.D_K))


@pytest.fixture(scope="module")
def shown(page_output):
    return page_output("step-by-step.md")


def weight_table(text: str) -> np.ndarray:
    """The printed table of weights: one row per query word, in sentence order."""
    rows = {
        ln.split()[0]: numbers(ln)
        for ln in text.splitlines()
        if ln.split() and ln.split()[0] in toy.SENTENCE and numbers(ln)
    }
    assert list(rows) == list(toy.SENTENCE)
    return np.array([rows[w] for w in toy.SENTENCE])


sizes = st.integers(min_value=1, max_value=9)


@pytest.mark.claim("steps-shapes")
@settings(max_examples=40, deadline=None)
@given(t_q=sizes, t_k=sizes, d_k=sizes, d_v=sizes, seed=st.integers(0, 2**16))
def test_shapes_at_every_step(t_q, t_k, d_k, d_v, seed):
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(t_q, d_k)), rng.normal(size=(t_k, d_k))
    v = rng.normal(size=(t_k, d_v))
    scores = q @ k.T
    assert scores.shape == (t_q, t_k)  # d_k is summed away
    assert (scores / np.sqrt(d_k)).shape == (t_q, t_k)
    weights, output = qkv.attention(q, k, v)
    assert weights.shape == (t_q, t_k)  # independent of d_k and d_v
    assert output.shape == (t_q, d_v)  # d_v appears only here


@pytest.mark.claim("steps-shapes")
def test_the_page_prints_the_shape_of_every_step(shown):
    check_prose("steps-shapes", ..., ...)  # "steps 1 and 4" are labels
    d, dk, dv = toy.D_MODEL, toy.D_K, toy.D_V
    assert shown.line("step_by_step.py:inputs", "X") == f"X {(T, d)} -> Q {(T, dk)}  K {(T, dk)}  V {(T, dv)}"
    assert (
        shown.line("step_by_step.py:scores", "scores = Q @ K.T:")
        == f"scores = Q @ K.T: {(T, dk)} @ {(dk, T)} -> {(T, T)}"
    )
    assert (
        shown.line("step_by_step.py:softmax", "weights = softmax(scaled):")
        == f"weights = softmax(scaled): {(T, T)}"
    )
    assert (
        shown.line("step_by_step.py:mix", "output = weights @ V:")
        == f"output = weights @ V: {(T, T)} @ {(T, dv)} -> {(T, dv)}"
    )


@pytest.mark.claim("steps-scale-keeps-order")
def test_dividing_by_sqrt_d_k_keeps_shape_and_order_within_each_row(qkv_toy, shown):
    _, q, k, _ = qkv_toy
    scores = q @ k.T
    scaled = scores / np.sqrt(toy.D_K)
    assert scaled.shape == scores.shape
    check_prose("steps-scale-keeps-order", toy.D_K, np.sqrt(toy.D_K))
    np.testing.assert_array_equal(np.argsort(scaled, axis=-1), np.argsort(scores, axis=-1))
    # and the page shows the shrinking: its typical sizes are those of these scores
    text = shown["step_by_step.py:scale"]
    assert (
        shown.line("step_by_step.py:scale", "scaled = scores / sqrt(d_k):")
        == f"scaled = scores / sqrt(d_k): {scores.shape}"
    )
    (raw_std,) = values_after(shown["step_by_step.py:scores"], "typical size (std) of a raw score:")
    (scaled_std,) = values_after(text, "typical size (std) of a scaled score:")
    assert abs(raw_std - scores.std()) <= 0.005 + 1e-9
    assert abs(scaled_std - scaled.std()) <= 0.005 + 1e-9
    assert scaled_std < raw_std


@pytest.mark.claim("steps-rows-are-distributions")
def test_row_i_is_token_i_distribution_over_the_keys(qkv_toy, weights, shown):
    _, q, k, v = qkv_toy
    assert (weights >= 0).all()
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=0, atol=1e-12)
    for i in range(T):  # row i depends on token i's query alone
        other_queries = np.random.default_rng(i).normal(size=q.shape)
        other_queries[i] = q[i]  # every other query replaced: row i must not move
        moved = qkv.attention(other_queries, k, v).weights[i]
        np.testing.assert_allclose(moved, weights[i], rtol=1e-12)
    # the page's table is these weights, and its rows sum to 1
    text = shown["step_by_step.py:softmax"]
    np.testing.assert_allclose(weight_table(text), weights, rtol=0, atol=0.0005 + 1e-9)
    assert values_after(text, "row sums:") == [1.0] * T
    check_prose("steps-rows-are-distributions", weights.sum(axis=-1).max())


@pytest.mark.claim("steps-columns-need-not-sum-to-one")
def test_columns_share_one_unit_per_query_but_not_one_each(weights, shown):
    columns = weights.sum(axis=0)
    assert np.isclose(columns.sum(), T)  # T rows of total weight 1 each
    assert columns[FROM] > 1 > columns[SHE]
    check_prose("steps-columns-need-not-sum-to-one", columns.sum(), columns[FROM], columns[SHE])
    printed_columns = values_after(shown["step_by_step.py:softmax"], "column sums:")
    np.testing.assert_allclose(printed_columns, columns, rtol=0, atol=0.0005 + 1e-9)


@pytest.mark.claim("steps-output-is-mixture")
def test_each_output_row_is_a_convex_mixture_of_value_rows(qkv_toy, weights, shown):
    _, q, k, v = qkv_toy
    output = qkv.attention(q, k, v).output
    for i in range(T):
        mixture = sum(weights[i, j] * v[j] for j in range(T))
        np.testing.assert_allclose(output[i], mixture, rtol=1e-12, atol=1e-12)
    # non-negative weights summing to 1: every coordinate lies within the values' range
    assert (output >= v.min(axis=0) - 1e-12).all()
    assert (output <= v.max(axis=0) + 1e-12).all()
    assert output.shape == (T, toy.D_V)
    check_prose("steps-output-is-mixture", weights.sum(axis=-1).max())
    assert (
        shown.line("step_by_step.py:mix", "output for 'milk'")
        == "output for 'milk' equals its weighted sum of value rows: True"
    )


@pytest.mark.claim("steps-residual-add")
def test_the_output_is_projected_back_and_added_to_x(qkv_toy, weights, shown):
    x, _, _, v = qkv_toy
    output = weights @ v
    w_o = np.random.default_rng(3).normal(size=(toy.D_V, toy.D_MODEL))  # any W_O
    x_next = x + output @ w_o
    assert output.shape == (T, toy.D_V) and x_next.shape == x.shape == (T, toy.D_MODEL)
    assert not np.allclose(x_next, output @ w_o)  # the token's own vector is still in it
    check_prose("steps-residual-add", output.shape[1], x_next.shape[1])
    assert (
        shown.line("step_by_step.py:residual", "output")
        == f"output {output.shape} @ W_O {w_o.shape} -> {(T, toy.D_MODEL)}"
    )
    assert shown.line("step_by_step.py:residual", "X_next") == f"X_next = X + output @ W_O: {x.shape}"


@pytest.mark.claim("steps-ex-shapes")
def test_three_queries_against_ten_keys_give_3_by_10_weights_and_a_3_by_d_v_output(shown):
    rng = np.random.default_rng(0)
    for d_k in (1, 8, 64):  # "d_k is summed away": the shapes do not depend on it
        q, k, v = rng.normal(size=(3, d_k)), rng.normal(size=(10, d_k)), rng.normal(size=(10, 4))
        w, out = qkv.attention(q, k, v)
        assert w.shape == (3, 10) and out.shape == (3, 4)
    check_prose("steps-ex-shapes", 3, 10, 3, 4)
    assert numbers(shown["step_by_step.py:exercise_shapes"]) == [3, 10, 3, 4]


def section_code(name: str) -> str:
    text = (ROOT / "snippets" / "step_by_step.py").read_text(encoding="utf-8")
    return text.split(f"# --8<-- [start:{name}]\n", 1)[1].split(f"# --8<-- [end:{name}]", 1)[0]


@pytest.mark.claim("steps-ex-write-attention")
def test_the_attention_solution_passes_and_k_dot_t_and_a_late_mask_do_not(shown):
    passed = str(check_attention(qkv.attention))
    assert shown["step_by_step.py:write_attention"].startswith(passed + "\n")

    def scores(q, k):
        return q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])

    def with_k_dot_t(q, k, v, mask):  # "transposing only the last two axes of k"
        w = qkv.softmax(np.where(mask, q @ k.T / np.sqrt(q.shape[-1]), -np.inf))
        return w, w @ v

    def mask_after_softmax(q, k, v, mask):  # "hiding the masked scores before softmax"
        w = qkv.softmax(scores(q, k)) * mask
        return w, w @ v

    assert not check_attention(with_k_dot_t).ok
    assert not check_attention(mask_after_softmax).ok
