"""Chapter 5, the computation step by step: every claim the page makes, checked."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import qkv
from qkv import toy


@pytest.fixture(scope="module")
def page(page_code):
    """What the code of docs/step-by-step.md defines, run in page order (its exercises too)."""
    return page_code("step-by-step.md", exercises=True)


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


@pytest.mark.claim("steps-rows-are-distributions")
def test_row_i_is_token_i_distribution_over_the_keys(page):
    weights, Q, K, V = page["weights"], page["Q"], page["K"], page["V"]
    assert (weights >= 0).all()
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=0, atol=1e-12)
    for i in range(len(page["words"])):  # row i depends on token i's query alone
        alone = qkv.attention(Q[i : i + 1], K, V).weights[0]
        np.testing.assert_allclose(weights[i], alone, rtol=1e-12)
        other_queries = np.random.default_rng(i).normal(size=Q.shape)
        other_queries[i] = Q[i]  # every other query replaced: row i must not move
        moved = qkv.attention(other_queries, K, V).weights[i]
        np.testing.assert_allclose(moved, weights[i], rtol=1e-12)


@pytest.mark.claim("steps-columns-need-not-sum-to-one")
def test_columns_share_one_unit_per_query_but_not_one_each(page):
    words, weights = page["words"], page["weights"]
    columns = weights.sum(axis=0)
    assert np.isclose(columns.sum(), len(words))  # T rows of total weight 1 each
    assert columns[words.index("from")] > 1.3  # "more than 1.3"
    assert 0.65 < columns[words.index("she")] < 0.75  # "about 0.7"


@pytest.mark.claim("steps-output-is-mixture")
def test_each_output_row_is_a_convex_mixture_of_value_rows(page):
    weights, V, output = page["weights"], page["V"], page["output"]
    for i in range(len(page["words"])):
        mixture = sum(weights[i, j] * V[j] for j in range(V.shape[0]))
        np.testing.assert_allclose(output[i], mixture, rtol=1e-12, atol=1e-12)
    # non-negative weights summing to 1: every coordinate lies within the values' range
    assert (output >= V.min(axis=0) - 1e-12).all()
    assert (output <= V.max(axis=0) + 1e-12).all()
    assert output.shape == (len(page["words"]), V.shape[1])


@pytest.mark.claim("steps-scale-before-product")
def test_scaling_q_first_gives_the_same_scores():
    rng = np.random.default_rng(5)
    q, k = rng.normal(size=(6, 64)), rng.normal(size=(7, 64))
    factor = qkv.scale_factor(True, 64)
    np.testing.assert_allclose((q * factor) @ k.T, (q @ k.T) / np.sqrt(64), rtol=1e-13)
    weights = qkv.attention(q, k, rng.normal(size=(7, 3))).weights
    np.testing.assert_allclose(weights, qkv.softmax((q @ k.T) / np.sqrt(64)), rtol=1e-12)


@pytest.mark.claim("steps-attention-equals-steps")
def test_one_call_equals_the_four_steps(page):
    Q, K, V = page["Q"], page["K"], page["V"]
    scaled = (Q @ K.T) / np.sqrt(K.shape[-1])
    e = np.exp(scaled - scaled.max(axis=-1, keepdims=True))  # softmax written out here
    weights = e / e.sum(axis=-1, keepdims=True)
    result = qkv.attention(Q, K, V)
    np.testing.assert_allclose(result.weights, weights, rtol=1e-12)
    np.testing.assert_allclose(result.output, weights @ V, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(page["result"].output, result.output, rtol=0, atol=0)


@pytest.mark.claim("steps-sdpa-agrees")
def test_torch_sdpa_agrees_on_the_page_inputs_and_on_random_ones(page):
    got = page["torch_output"].numpy()
    assert page["torch_output"].dtype == torch.float64
    assert np.abs(got - page["result"].output).max() < 1e-12
    rng = np.random.default_rng(11)
    for shape_q, shape_k, d_v in [((5, 64), (5, 64), 64), ((2, 3, 4, 16), (2, 3, 9, 16), 7)]:
        q, k = rng.normal(size=shape_q), rng.normal(size=shape_k)
        v = rng.normal(size=(*shape_k[:-1], d_v))
        want = F.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v)))
        assert np.abs(want.numpy() - qkv.attention(q, k, v).output).max() < 1e-12


@pytest.mark.claim("steps-batched")
def test_leading_axes_are_independent_attentions():
    rng = np.random.default_rng(3)
    q, k, v = (rng.normal(size=(2, 3, 4, 8)) for _ in range(3))  # (batch, heads, T, d)
    together = qkv.attention(q, k, v)
    for b in range(2):
        for h in range(3):
            alone = qkv.attention(q[b, h], k[b, h], v[b, h])
            np.testing.assert_allclose(together.weights[b, h], alone.weights, rtol=1e-12)
            np.testing.assert_allclose(together.output[b, h], alone.output, rtol=1e-12)


@pytest.mark.claim("steps-scale-keeps-order")
def test_dividing_by_sqrt_d_k_keeps_shape_and_order_within_each_row(page):
    scores, scaled, d_k = page["scores"], page["scaled"], page["d_k"]
    assert d_k == toy.D_K == 8 and page["V"].shape[-1] == toy.D_V == 4  # the one toy configuration
    assert scaled.shape == scores.shape
    np.testing.assert_array_equal(np.argsort(scaled, axis=-1), np.argsort(scores, axis=-1))
    np.testing.assert_allclose(scaled * np.sqrt(8), scores, rtol=1e-14)


@pytest.mark.claim("steps-spread-matches-theory")
def test_score_spread_over_many_draws_is_sqrt_d_k_raw_and_one_scaled(page):
    raw, d_k = page["raw"], page["d_k"]
    draws = 2000
    assert raw.size == 60_000 == draws * 30  # 30 pairs of different tokens per draw
    # Theory (chapter 6): E[s^2] = d_k for a query and another token's key, with mean 0.
    # Draws are independent, the 30 scores of one draw are not: take the standard error
    # from the spread of the per-draw mean square.
    per_draw = (raw**2).reshape(draws, 30).mean(axis=1)
    se = per_draw.std(ddof=1) / np.sqrt(draws)
    assert abs(per_draw.mean() - d_k) < 5 * se
    assert abs(raw.mean()) < 5 * raw.reshape(draws, 30).mean(axis=1).std(ddof=1) / np.sqrt(draws)
    scaled = raw / np.sqrt(d_k)
    assert abs((scaled**2).mean() - 1) < 5 * se / d_k


@pytest.mark.claim("steps-residual-add")
def test_the_output_is_projected_back_and_added_to_x(page):
    X, output, W_O, X_next = page["X"], page["output"], page["W_O"], page["X_next"]
    assert output.shape == (6, 4) and W_O.shape == (4, 16) and X.shape == X_next.shape == (6, 16)
    scaled = page["Q"] @ page["K"].T / np.sqrt(8)
    e = np.exp(scaled - scaled.max(axis=-1, keepdims=True))  # softmax written out here
    reference = (e / e.sum(axis=-1, keepdims=True)) @ page["V"]
    np.testing.assert_allclose(X_next, X + reference @ W_O, rtol=1e-12)
    assert not np.allclose(X_next, output @ W_O)  # the token's own vector is still in it


@pytest.mark.claim("steps-ex-by-hand")
def test_the_three_token_exercise_matches_the_hand_calculation(page):
    e = np.array([np.e**2, 1.0, np.e])  # exp of the scaled scores 2, 0, 1
    weights = e / e.sum()
    output = weights @ np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    np.testing.assert_allclose(page["w"][0], weights, rtol=1e-12)
    np.testing.assert_allclose(page["out"][0], output, rtol=1e-12)
    np.testing.assert_array_equal(weights.round(3), [0.665, 0.090, 0.245])  # as the page works out
    np.testing.assert_array_equal(output.round(3), [0.910, 0.335])


@pytest.mark.claim("steps-ex-wrong-axis")
def test_softmax_over_the_queries_normalises_columns_and_couples_rows(page):
    scaled = page["Q"] @ page["K"].T / np.sqrt(8)
    e = np.exp(scaled - scaled.max(axis=0, keepdims=True))
    by_column = e / e.sum(axis=0, keepdims=True)  # written out here
    np.testing.assert_allclose(page["by_column"], by_column, rtol=1e-12)
    np.testing.assert_allclose(by_column.sum(axis=0), 1.0, rtol=1e-12)
    assert np.abs(by_column.sum(axis=-1) - 1).max() > 0.1
    assert not np.allclose(page["moved"][0], by_column[0])


@pytest.mark.claim("steps-ex-order-kept")
def test_scaling_keeps_every_rows_ranking_but_sharpens_without_it(page):
    scores = page["Q"] @ page["K"].T
    np.testing.assert_array_equal(np.argsort(scores, axis=-1),
                                  np.argsort(scores / np.sqrt(8), axis=-1))
    raw, scaled = qkv.softmax(scores), qkv.softmax(scores / np.sqrt(8))
    assert (raw.max(axis=-1) > scaled.max(axis=-1)).all()
