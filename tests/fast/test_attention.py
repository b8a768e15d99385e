"""The qkv API contract: shapes, scale options, masks, and a clear error for every bad input."""

from __future__ import annotations

import numpy as np
import pytest

import qkv


def rand(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape)


# ---- softmax ------------------------------------------------------------------------------


def test_softmax_matches_definition_on_small_input():
    z = np.array([0.5, -1.0, 2.0])
    expected = np.exp(z) / np.exp(z).sum()  # the textbook definition, no shift
    np.testing.assert_allclose(qkv.softmax(z), expected, rtol=1e-15)


def test_softmax_does_not_overflow_on_huge_scores():
    w = qkv.softmax(np.array([1e4, 1e4 - 1.0, 0.0]))
    assert np.isfinite(w).all()
    # Shift invariance: the same as softmax([1, 0, -1e4]).
    np.testing.assert_allclose(w[:2], np.exp([0.0, -1.0]) / (1 + np.exp(-1.0)), rtol=1e-12)


def test_softmax_gives_exact_zero_for_minus_inf():
    w = qkv.softmax(np.array([[0.0, -np.inf, 1.0]]))
    assert w[0, 1] == 0.0


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_softmax_rejects_nan_and_plus_inf_naming_the_row(bad):
    z = np.zeros((3, 4))
    z[2, 1] = bad
    with pytest.raises(ValueError, match=r"row \(2, 0\)"):
        qkv.softmax(z)


def test_softmax_rejects_a_row_with_no_finite_score():
    z = np.array([[0.0, 1.0], [-np.inf, -np.inf]])
    with pytest.raises(ValueError, match=r"row \(1, 0\)"):
        qkv.softmax(z)


def test_softmax_along_another_axis():
    z = rand(3, 4)
    np.testing.assert_allclose(qkv.softmax(z, axis=0).sum(axis=0), 1.0, rtol=1e-12)


def test_softmax_keeps_float32():
    assert qkv.softmax(np.ones(3, dtype=np.float32)).dtype == np.float32


# ---- attention: shapes and options -------------------------------------------------------


def test_attention_returns_named_weights_and_output():
    q, k, v = rand(2, 3, 5, 4, seed=1), rand(2, 3, 7, 4, seed=2), rand(2, 3, 7, 6, seed=3)
    result = qkv.attention(q, k, v)
    assert isinstance(result, qkv.Attention)
    assert result.weights.shape == (2, 3, 5, 7)
    assert result.output.shape == (2, 3, 5, 6)
    np.testing.assert_allclose(result.output, result.weights @ v, rtol=1e-12)


def test_attention_is_the_formula():
    q, k, v = rand(4, 8, seed=1), rand(6, 8, seed=2), rand(6, 3, seed=3)
    scores = q @ k.T / np.sqrt(8)
    expected = np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True)
    weights, output = qkv.attention(q, k, v)
    np.testing.assert_allclose(weights, expected, rtol=1e-12)
    np.testing.assert_allclose(output, expected @ v, rtol=1e-12)


def test_leading_dimensions_broadcast_like_pytorch():
    q = rand(2, 1, 5, 4, seed=1)  # (batch, 1, Tq, d)
    k = rand(3, 6, 4, seed=2)  # (heads, Tk, d)
    v = rand(3, 6, 2, seed=3)
    weights, output = qkv.attention(q, k, v)
    assert weights.shape == (2, 3, 5, 6)
    assert output.shape == (2, 3, 5, 2)
    one = qkv.attention(q[1, 0], k[2], v[2])
    np.testing.assert_allclose(weights[1, 2], one.weights, rtol=1e-12)


@pytest.mark.parametrize(("scale", "factor"), [(True, 1 / np.sqrt(16)), (False, 1.0), (0.3, 0.3)])
def test_scale_options(scale, factor):
    q, k, v = rand(3, 16, seed=1), rand(4, 16, seed=2), rand(4, 2, seed=3)
    expected = qkv.softmax(q @ k.T * factor)
    np.testing.assert_allclose(qkv.attention(q, k, v, scale=scale).weights, expected, rtol=1e-12)


@pytest.mark.parametrize("scale", ["yes", np.nan, None])
def test_bad_scale_is_refused(scale):
    with pytest.raises(ValueError, match="scale must be"):
        qkv.attention(rand(2, 2), rand(2, 2), rand(2, 2), scale=scale)


def test_float32_in_float32_out():
    q, k, v = (rand(3, 4, seed=s).astype(np.float32) for s in (1, 2, 3))
    weights, output = qkv.attention(q, k, v)
    assert weights.dtype == np.float32 and output.dtype == np.float32


def test_integer_inputs_are_promoted_to_float():
    weights, _ = qkv.attention([[1, 0]], [[1, 0], [0, 1]], [[1], [2]])
    assert weights.dtype == np.float64


# ---- masks ----------------------------------------------------------------------------------


def test_causal_mask_shape_and_offset():
    assert qkv.causal_mask(4).sum() == 4 * 5 // 2
    m = qkv.causal_mask(2, 5)
    assert m.shape == (2, 5)
    assert m[0].tolist() == [True, True, True, True, False]
    assert m[1].all()


@pytest.mark.parametrize(("t_q", "t_k"), [(0, None), (3, 2)])
def test_causal_mask_refuses_impossible_sizes(t_q, t_k):
    with pytest.raises(ValueError, match="t_q"):
        qkv.causal_mask(t_q, t_k)


def test_padding_mask_hides_positions_past_each_length():
    m = qkv.padding_mask([1, 3], 3)
    assert m.shape == (2, 1, 3)
    assert m[:, 0].tolist() == [[True, False, False], [True, True, True]]


@pytest.mark.parametrize("lengths", [[0, 2], [4], [1.5]])
def test_padding_mask_refuses_bad_lengths(lengths):
    with pytest.raises(ValueError, match="length"):
        qkv.padding_mask(lengths, 3)


def test_padding_mask_broadcasts_over_queries_in_attention():
    q, k, v = rand(2, 3, 4, seed=1), rand(2, 5, 4, seed=2), rand(2, 5, 2, seed=3)
    weights = qkv.attention(q, k, v, mask=qkv.padding_mask([2, 5], 5)).weights
    assert (weights[0, :, 2:] == 0).all()
    assert (weights[1] > 0).all()


def test_mask_with_more_leading_dims_than_scores_broadcasts():
    mask = np.stack([qkv.causal_mask(3), np.ones((3, 3), bool)])  # (2, 3, 3)
    weights = qkv.attention(rand(3, 4), rand(3, 4, seed=1), rand(3, 2), mask=mask).weights
    assert weights.shape == (2, 3, 3)
    assert weights[0, 0, 1] == 0.0 and weights[1, 0, 1] > 0


# ---- errors name what was wrong --------------------------------------------------------------


def test_d_k_mismatch_names_both_shapes():
    with pytest.raises(ValueError, match=r"q \(3, 4\) and k \(5, 6\)"):
        qkv.attention(rand(3, 4), rand(5, 6), rand(5, 6))


def test_tk_mismatch_names_both_shapes():
    with pytest.raises(ValueError, match=r"k \(5, 4\) and v \(6, 2\)"):
        qkv.attention(rand(3, 4), rand(5, 4), rand(6, 2))


def test_mask_that_does_not_broadcast_names_shapes():
    with pytest.raises(ValueError, match=r"mask of shape \(3, 4\).*\(3, 5\)"):
        qkv.attention(rand(3, 4), rand(5, 4), rand(5, 2), mask=np.ones((3, 4), bool))


def test_non_boolean_mask_is_refused():
    with pytest.raises(ValueError, match="boolean"):
        qkv.attention(rand(3, 4), rand(3, 4), rand(3, 2), mask=np.ones((3, 3)))


@pytest.mark.parametrize("name", ["q", "k", "v"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_or_inf_input_is_refused_naming_the_tensor(name, bad):
    arrays = {"q": rand(3, 4), "k": rand(3, 4, seed=1), "v": rand(3, 2, seed=2)}
    arrays[name][1, 1] = bad
    with pytest.raises(ValueError, match=rf"^{name} contains NaN or inf \(first at index \(1, 1\)\)"):
        qkv.attention(**arrays)


def test_a_query_row_with_no_allowed_key_is_named():
    mask = np.ones((2, 3, 4), bool)
    mask[1, 2] = False
    with pytest.raises(ValueError, match=r"query row \(1, 2\)"):
        qkv.attention(rand(2, 3, 4), rand(2, 4, 4, seed=1), rand(2, 4, 2), mask=mask)


def test_one_dimensional_inputs_are_refused():
    with pytest.raises(ValueError, match=r"q must have at least 2 dimensions.*\(4,\)"):
        qkv.attention(np.ones(4), rand(3, 4), rand(3, 4))


def test_non_numeric_input_is_refused():
    with pytest.raises(ValueError, match="must hold numbers"):
        qkv.attention([["a", "b"]], rand(3, 2), rand(3, 2))


# ---- projections, heads, cache -----------------------------------------------------------


def test_projections_make_three_different_matrices_with_independent_d_v():
    rng = np.random.default_rng(0)
    p = qkv.Projections.random(rng, d_model=8, d_k=3, d_v=5)
    q, k, v = qkv.project(rand(4, 8), p)
    assert (q.shape, k.shape, v.shape) == ((4, 3), (4, 3), (4, 5))
    assert qkv.self_attention(rand(4, 8), p).output.shape == (4, 5)


def test_projections_refuse_mismatched_shapes():
    with pytest.raises(ValueError, match=r"w_q and w_k .* \(8, 3\) and \(8, 4\)"):
        qkv.Projections(np.ones((8, 3)), np.ones((8, 4)), np.ones((8, 2)))
    with pytest.raises(ValueError, match=r"x has d_model=7"):
        qkv.project(rand(2, 7), qkv.Projections.random(np.random.default_rng(0), 8, 3))


def test_cross_attention_is_rectangular():
    p = qkv.Projections.random(np.random.default_rng(0), 8, 4, 2)
    weights, output = qkv.cross_attention(rand(3, 8), rand(7, 8, seed=1), p)
    assert weights.shape == (3, 7) and output.shape == (3, 2)
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-12)


def test_multi_head_weights_refuse_inconsistent_shapes():
    with pytest.raises(ValueError, match="multiple of n_kv_heads"):
        qkv.MultiHeadWeights.random(np.random.default_rng(0), d_model=8, n_heads=4, n_kv_heads=3)
    with pytest.raises(ValueError, match=r"w_o must have shape \(8, 8\)"):
        qkv.MultiHeadWeights(
            np.ones((8, 8)), np.ones((8, 8)), np.ones((8, 8)), np.ones((4, 8)), n_heads=2, n_kv_heads=2
        )


def test_split_heads_refuses_indivisible_width():
    with pytest.raises(ValueError, match="not divisible by n_heads=3"):
        qkv.split_heads(np.zeros((2, 5, 8)), 3)


def test_cache_append_refuses_wrong_shapes():
    cache = qkv.KVCache.empty(n_kv_heads=2, d_head=4)
    with pytest.raises(ValueError, match=r"\(n_kv_heads, t_new, d_head\) = \(2, t_new, 4\)"):
        cache.append(np.zeros((2, 1, 3)), np.zeros((2, 1, 3)))
    cache.append(np.zeros((2, 3, 4)), np.ones((2, 3, 4)))
    assert len(cache) == 3 and cache.nbytes() == 2 * 2 * 3 * 4 * 8


def test_decode_refuses_a_batch():
    w = qkv.MultiHeadWeights.random(np.random.default_rng(0), d_model=8, n_heads=2)
    with pytest.raises(ValueError, match=r"x must be \(T, d_model=8\)"):
        qkv.decode_with_cache(np.zeros((2, 3, 8)), w)


# ---- diagnostics and cost --------------------------------------------------------------------


def test_entropy_bounds():
    assert qkv.entropy(np.eye(4)[0]) == 0.0
    np.testing.assert_allclose(qkv.entropy(np.full(8, 1 / 8)), np.log(8), rtol=1e-12)


def test_entropy_refuses_rows_that_are_not_distributions():
    with pytest.raises(ValueError, match="sum to 1"):
        qkv.entropy([0.5, 0.6])


def test_softmax_jacobian_matches_finite_differences():
    z = rand(5, seed=3)
    eps = 1e-6
    numeric = np.stack(
        [(qkv.softmax(z + eps * e) - qkv.softmax(z - eps * e)) / (2 * eps) for e in np.eye(5)],
        axis=1,
    )
    np.testing.assert_allclose(qkv.softmax_jacobian(qkv.softmax(z)), numeric, atol=1e-9)


def test_model_kinds_follow_their_kv_heads():
    kinds = {m.name: m.kind for m in qkv.MODELS}
    assert kinds["Llama 2 7B"] == "multi-head"
    assert kinds["Llama 3 8B"] == "grouped-query"
    assert kinds["Falcon 7B"] == "multi-query"


@pytest.mark.claim("lookup-score-is-dot-product")
def test_a_score_is_one_number_the_sum_of_matching_entries_multiplied():
    # Not an entry-by-entry product (that is a vector of width d_k): its sum, one number per
    # query-key pair, which is why a query and a key must share d_k.
    q, k, v = rand(1, 3, seed=1), rand(4, 3, seed=2), rand(4, 5, seed=3)
    weights = qkv.attention(q, k, v).weights
    by_hand = np.array([sum(q[0, i] * key[i] for i in range(3)) for key in k])
    np.testing.assert_allclose(weights[0], qkv.softmax(by_hand / np.sqrt(3)), rtol=1e-12)
    assert (q[0] * k[0]).shape == (3,) and weights.shape == (1, 4)
    with pytest.raises(ValueError):
        qkv.attention(q, rand(4, 2), v)  # a key of another width has no score


@pytest.mark.claim("kv-sep-within-one-layer")
def test_a_changed_value_keeps_its_layers_weights_and_moves_the_next_layers():
    # Two layers with a residual stream, X <- X + attention(X W_Q, X W_K, X W_V) W_O each:
    # editing one value row of layer 1 leaves layer 1's weights and moves layer 2's.
    rng = np.random.default_rng(5)
    x = rng.normal(size=(5, 6))
    layers = [qkv.Projections.random(rng, 6, 4, 4) for _ in range(2)]
    w_o = [rng.normal(size=(4, 6)) for _ in range(2)]

    def run(edit):
        stream, weights = x, []
        for n, (p, out) in enumerate(zip(layers, w_o, strict=True)):
            q, k, v = qkv.project(stream, p)
            if n == 0:
                v = edit(v)
            result = qkv.attention(q, k, v)
            weights.append(result.weights)
            stream = stream + result.output @ out
        return weights

    def new_value(v):
        v = v.copy()
        v[2] += 1.0  # one word's value
        return v

    before, after = run(lambda v: v), run(new_value)
    np.testing.assert_array_equal(after[0], before[0])  # its own layer: bit for bit
    assert np.abs(after[1] - before[1]).max() > 1e-3  # the next layer's weights move
