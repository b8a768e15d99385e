"""Chapter 5, from scores to output one array at a time, and its deep dive
(docs/step-by-step-in-depth.md): every claim the two pages make, checked.

Each test derives the fact itself, from the random toy of ``qkv.toy`` projected with the
matrices written out here (``X @ W``) and softmax written out with ``np.exp``, or from its
own seeded examples, and then checks that what the page prints under its blocks agrees,
to the rounding the page prints. The PyTorch tab is a ``pycon`` session that Sybil runs as a
doctest; here sdpa is compared with qkv on the same toy inputs.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from prose import check_prose, claim_sentence, written_numbers
from support import numbers, values_after
from support import softmax_by_hand as softmax

import qkv
from qkv import smollm2, toy

Z = 5  # standard errors allowed for a sampled statistic
T = len(toy.SENTENCE)
SHE, FROM, CUP = (toy.SENTENCE.index(w) for w in ("she", "from", "cup"))


@pytest.fixture(scope="module")
def shown(page_output):
    return page_output("step-by-step.md")


@pytest.fixture(scope="module")
def in_depth(page_output):
    """Its deep dive: the spread over many draws and the two further exercises."""
    return page_output("step-by-step-in-depth.md")


@pytest.fixture(scope="module")
def qkv_toy():
    """The chapter's Q, K, V: the random toy projected with d_k = 8 and d_v = 4."""
    x, p = toy.embeddings(), toy.projections(d_k=toy.D_K, d_v=toy.D_V)
    return x, x @ p.w_q, x @ p.w_k, x @ p.w_v


@pytest.fixture(scope="module")
def weights(qkv_toy):
    _, q, k, _ = qkv_toy
    return softmax(q @ k.T / np.sqrt(toy.D_K))


def stated(claim_id):
    """The numbers a guarded sentence writes, in order (for a bound the test then uses)."""
    return [w.value for w in written_numbers(claim_sentence(claim_id))]


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
    assert values_after(text, "sqrt(d_k) =") == [round(np.sqrt(8), 2)]
    assert (
        shown.line("step_by_step.py:scale", "scaled = scores / sqrt(d_k):")
        == f"scaled = scores / sqrt(d_k): {scores.shape}"
    )
    (raw_std,) = values_after(shown["step_by_step.py:scores"], "typical size (std) of a raw score:")
    (scaled_std,) = values_after(text, "typical size (std) of a scaled score:")
    assert abs(raw_std - scores.std()) <= 0.005 + 1e-9
    assert abs(scaled_std - scaled.std()) <= 0.005 + 1e-9
    assert scaled_std < raw_std


@pytest.mark.claim("steps-spread-matches-theory")
def test_score_spread_over_many_draws_is_sqrt_d_k_raw_and_one_scaled(in_depth):
    # The page's experiment, redone with other draws: six unit-variance embeddings and
    # fresh projections per draw, the 30 scores of a query with another token's key.
    draws, pairs = 2000, T * (T - 1)
    rng = np.random.default_rng(2024)
    other = ~np.eye(T, dtype=bool)
    raw = []
    for _ in range(draws):
        x = rng.normal(size=(T, toy.D_MODEL))
        p = qkv.Projections.random(rng, toy.D_MODEL, toy.D_K, toy.D_V)
        raw.append((x @ p.w_q @ (x @ p.w_k).T)[other])
    raw = np.array(raw)  # (draws, 30)
    # Theory (chapter 7): mean 0 and E[s^2] = d_k. Draws are independent, the 30 scores
    # of one draw are not: take the standard error from the spread of per-draw means.
    per_draw = (raw**2).mean(axis=1)
    se = per_draw.std(ddof=1) / np.sqrt(draws)
    assert abs(per_draw.mean() - toy.D_K) < Z * se
    assert abs(raw.mean()) < Z * raw.mean(axis=1).std(ddof=1) / np.sqrt(draws)
    # The page's numbers: its std is sqrt(mean square), so its relative error is half that
    # of the mean square; plus the printed rounding.
    prefix = f"{draws * pairs:,} scores: std raw"
    raw_std, _, theory, scaled_std, _ = values_after(in_depth["step_by_step.py:spread"], prefix)
    rel = Z * se / toy.D_K / 2
    assert theory == round(np.sqrt(8), 2)
    assert abs(raw_std / np.sqrt(8) - 1) < rel + 0.005 / np.sqrt(8)
    assert abs(scaled_std - 1) < rel + 0.005
    assert abs(scaled_std - raw_std / np.sqrt(8)) < 0.01
    # and the page's own draws (the snippet's seed, 0), whose spreads the sentence states
    rng = np.random.default_rng(0)
    page_raw = []
    for _ in range(draws):
        x = rng.normal(size=(T, toy.D_MODEL))
        q, k, _ = qkv.project(x, qkv.Projections.random(rng, toy.D_MODEL, toy.D_K, toy.D_V))
        page_raw.append((q @ k.T)[other])
    page_raw = np.concatenate(page_raw)
    assert abs(page_raw.std() / np.sqrt(8) - 1) < rel and abs(page_raw.std() - raw_std) <= 0.005
    check_prose(
        "steps-spread-matches-theory",
        page_raw.size,
        page_raw.std(),
        toy.D_K,
        (page_raw / np.sqrt(toy.D_K)).std(),
    )


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


@pytest.mark.claim("steps-scale-before-product")
def test_scaling_q_first_gives_the_same_scores():
    rng = np.random.default_rng(5)
    q, k = rng.normal(size=(6, 64)), rng.normal(size=(7, 64))
    factor = qkv.scale_factor(True, 64)
    assert factor == 1 / np.sqrt(64)
    check_prose("steps-scale-before-product", ...)  # the 1 of 1/√d_k is notation
    np.testing.assert_allclose((q * factor) @ k.T, (q @ k.T) / np.sqrt(64), rtol=1e-13)
    weights = qkv.attention(q, k, rng.normal(size=(7, 3))).weights
    np.testing.assert_allclose(weights, softmax((q @ k.T) / np.sqrt(64)), rtol=1e-12)


@pytest.mark.claim("steps-attention-equals-steps")
def test_one_call_equals_the_four_steps(qkv_toy, weights, shown):
    _, q, k, v = qkv_toy
    result = qkv.attention(q, k, v)
    np.testing.assert_allclose(result.weights, weights, rtol=1e-12)
    np.testing.assert_allclose(result.output, weights @ v, rtol=1e-12, atol=1e-14)
    assert shown["step_by_step.py:numpy"].splitlines() == [
        "weights match the steps above: True",
        "output matches the steps above: True",
    ]


@pytest.mark.claim("steps-sdpa-agrees")
def test_torch_sdpa_agrees_on_the_page_inputs_and_on_random_ones(qkv_toy):
    (bound,) = stated("steps-sdpa-agrees")
    check_prose("steps-sdpa-agrees", bound)
    assert bound <= 1e-10  # float64 rounding, nothing looser
    _, q, k, v = qkv_toy
    got = F.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v)))
    assert got.dtype == torch.float64 and got.shape == (T, toy.D_V)
    assert np.abs(got.numpy() - qkv.attention(q, k, v).output).max() < bound
    rng = np.random.default_rng(11)
    for shape_q, shape_k, d_v in [((5, 64), (5, 64), 64), ((2, 3, 4, 16), (2, 3, 9, 16), 7)]:
        q, k = rng.normal(size=shape_q), rng.normal(size=shape_k)
        v = rng.normal(size=(*shape_k[:-1], d_v))
        want = F.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v)))
        assert np.abs(want.numpy() - qkv.attention(q, k, v).output).max() < bound


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


@pytest.mark.claim("steps-ex-by-hand")
def test_the_three_token_exercise_matches_the_hand_calculation(shown):
    # the exercise as the page states it: q = (2, 0, 2, 0), three keys, three values
    q = np.array([[2.0, 0, 2, 0]])
    k = np.array([[1.0, 0, 1, 0], [0, 1, 0, 1], [1, 0, 0, 0]])
    v = np.array([[1.0, 0], [0, 1], [1, 1]])
    e = np.array([np.e**2, 1.0, np.e])  # exp of the scaled scores 2, 0, 1
    weights = e / e.sum()
    output = weights @ v
    np.testing.assert_array_equal(weights.round(3), [0.665, 0.090, 0.245])  # the solution's
    np.testing.assert_array_equal(output.round(3), [0.910, 0.335])
    result = qkv.attention(q, k, v)
    np.testing.assert_allclose(result.weights[0], weights, rtol=1e-12)
    np.testing.assert_allclose(result.output[0], output, rtol=1e-12)
    text = shown["step_by_step.py:exercise_by_hand"]
    assert values_after(text, "scaled scores:") == [2.0, 0.0, 1.0]
    np.testing.assert_allclose(values_after(text, "weights:"), weights, rtol=0, atol=0.0005 + 1e-9)
    np.testing.assert_allclose(values_after(text, "output:"), output, rtol=0, atol=0.0005 + 1e-9)


@pytest.mark.claim("steps-ex-wrong-axis")
def test_softmax_over_the_queries_normalises_columns_and_couples_rows(qkv_toy, in_depth):
    _, q, k, _ = qkv_toy
    by_column = softmax(q @ k.T / np.sqrt(8), axis=0)
    np.testing.assert_allclose(by_column.sum(axis=0), 1.0, rtol=1e-12)
    check_prose("steps-ex-wrong-axis", by_column.sum(axis=0).max())
    assert np.abs(by_column.sum(axis=-1) - 1).max() > 0.1
    other = q.copy()
    other[CUP] *= 3  # only cup's query changes
    moved = softmax(other @ k.T / np.sqrt(8), axis=0)
    assert np.abs(moved[SHE] - by_column[SHE]).max() > 0.01
    text = in_depth["step_by_step.py:exercise_wrong_axis"]
    np.testing.assert_allclose(values_after(text, "row sums:"), by_column.sum(axis=-1), atol=0.0005 + 1e-9)
    assert values_after(text, "column sums:") == [1.0] * T
    assert (
        in_depth.line("step_by_step.py:exercise_wrong_axis", "she's row moves")
        == "she's row moves when cup's query changes: True"
    )


@pytest.mark.claim("steps-ex-order-kept")
def test_scaling_keeps_every_rows_ranking_but_sharpens_without_it(qkv_toy, in_depth):
    _, q, k, _ = qkv_toy
    scores = q @ k.T
    np.testing.assert_array_equal(np.argsort(scores, axis=-1), np.argsort(scores / np.sqrt(8), axis=-1))
    raw, scaled = softmax(scores).max(axis=-1), softmax(scores / np.sqrt(8)).max(axis=-1)
    assert (raw > scaled).all()
    text = in_depth["step_by_step.py:exercise_order"]
    assert (
        in_depth.line("step_by_step.py:exercise_order", "each row ranks")
        == "each row ranks the keys the same, raw or scaled: True"
    )
    in_depth_raw = values_after(text, "largest weight per row, raw:")
    in_depth_scaled = values_after(text, "largest weight per row, scaled:")
    np.testing.assert_allclose(in_depth_raw, raw, rtol=0, atol=0.005 + 1e-9)
    np.testing.assert_allclose(in_depth_scaled, scaled, rtol=0, atol=0.005 + 1e-9)


# ---- the whole layer: a norm before, an MLP after (qkv.smollm2.decoder_layer) ---------------


def tiny_layer(seed, *, no_mlp=False, no_attention=False, eps=1e-5):
    """A SmolLM2-shaped layer small enough to check by hand: d_model 8, two query heads of
    width 4 sharing one key/value head, an MLP of width 16; random weights and gains."""
    rng = np.random.default_rng(seed)
    config = smollm2.Config(
        n_layers=1,
        d_model=8,
        n_heads=2,
        n_kv_heads=1,
        d_head=4,
        d_mlp=16,
        vocab_size=10,
        rope_base=1e4,
        norm_eps=eps,
        context_length=32,
    )
    w_o = np.zeros((8, 8)) if no_attention else rng.normal(size=(8, 8)) / 3
    attention = qkv.MultiHeadWeights(
        rng.normal(size=(8, 8)) / 3,
        rng.normal(size=(8, 4)) / 3,
        rng.normal(size=(8, 4)) / 3,
        w_o,
        n_heads=2,
        n_kv_heads=1,
    )
    w_down = np.zeros((16, 8)) if no_mlp else rng.normal(size=(16, 8)) / 4
    layer = smollm2.Layer(
        attn_norm=1 + rng.random(8),
        attention=attention,
        mlp_norm=1 + rng.random(8),
        w_gate=rng.normal(size=(8, 16)) / 3,
        w_up=rng.normal(size=(8, 16)) / 3,
        w_down=w_down,
    )
    return layer, config


def pre_norm_reference(x, layer, config, normalise=True):
    """X + Attn(Norm(X)), then X + MLP(Norm(X)), written here from qkv's public functions
    (with ``normalise=False``, the same layer with Norm left out)."""

    def norm(x, gain):
        if not normalise:
            return x
        return x / np.sqrt((x**2).mean(axis=-1, keepdims=True) + config.norm_eps) * gain

    def attn(h):
        w, t = layer.attention, len(h)
        q = qkv.rope(qkv.split_heads(h @ w.w_q, w.n_heads), np.arange(t), config.rope_base)
        k = qkv.rope(qkv.split_heads(h @ w.w_k, w.n_kv_heads), np.arange(t), config.rope_base)
        v = qkv.split_heads(h @ w.w_v, w.n_kv_heads)
        heads = qkv.grouped_attention(q, k, v, mask=qkv.causal_mask(t)).output
        return qkv.merge_heads(heads) @ w.w_o

    def mlp(h):
        gate = h @ layer.w_gate
        return (gate / (1 + np.exp(-gate)) * (h @ layer.w_up)) @ layer.w_down

    x = x + attn(norm(x, layer.attn_norm))
    return x + mlp(norm(x, layer.mlp_norm))


def run_layer(x, layer, config):
    return smollm2.decoder_layer(x, layer, config, np.arange(len(x)))[0]


@pytest.mark.claim("steps-smollm2-pre-norm")
@pytest.mark.parametrize("seed", range(3))
def test_smollm2_layer_is_x_plus_attn_of_norm_then_x_plus_mlp_of_norm(seed):
    layer, config = tiny_layer(seed)
    x = np.random.default_rng(seed + 100).normal(size=(5, 8)) * 3
    got = run_layer(x, layer, config)
    np.testing.assert_allclose(got, pre_norm_reference(x, layer, config), rtol=1e-10, atol=1e-12)
    # a control: the same layer with the norm left out gives something else
    assert np.abs(got - pre_norm_reference(x, layer, config, normalise=False)).max() > 1e-2


@pytest.mark.claim("steps-smollm2-pre-norm")
@pytest.mark.parametrize(
    ("half", "scale"), [("attention", 10.0), ("attention", 0.1), ("mlp", 10.0), ("mlp", 0.1)]
)
def test_each_half_reads_the_stream_only_through_its_norm(half, scale):
    # With the other half switched off, what a half adds depends on X only through Norm(X),
    # which (with eps = 0) ignores a positive factor on every row; a layer that read X
    # itself, or normalised after adding, would not.
    layer, config = tiny_layer(7, no_mlp=half == "attention", no_attention=half == "mlp", eps=0.0)
    x = np.random.default_rng(8).normal(size=(5, 8))
    added = run_layer(x, layer, config) - x
    assert np.abs(added).max() > 0.1  # the half does add something
    np.testing.assert_allclose(run_layer(scale * x, layer, config) - scale * x, added, rtol=1e-9, atol=1e-12)


@pytest.mark.claim("steps-mlp-swiglu")
def test_the_mlp_half_is_swiglu_three_matrices_with_a_gate():
    # The MLP half alone (attention switched off), with eps = 0: what it adds is
    # (SiLU(h W_gate) * h W_up) W_down of the normalised row, written here from the formula,
    # and not what the two-matrix network without the gate would add.
    layer, config = tiny_layer(11, no_attention=True, eps=0.0)
    x = np.random.default_rng(12).normal(size=(5, 8))
    h = x / np.sqrt((x**2).mean(axis=-1, keepdims=True)) * layer.mlp_norm
    gate = h @ layer.w_gate
    swiglu = (gate / (1 + np.exp(-gate)) * (h @ layer.w_up)) @ layer.w_down
    added = run_layer(x, layer, config) - x
    np.testing.assert_allclose(added, swiglu, rtol=1e-10, atol=1e-12)
    ungated = np.maximum(h @ layer.w_up, 0) @ layer.w_down  # a plain two-layer network
    assert np.abs(added - ungated).max() > 1e-2


@pytest.mark.claim("steps-mlp-swiglu")
@pytest.mark.model
def test_smollm2_mlp_holds_three_times_the_weights_of_its_attention(model):
    c = model.config
    for layer in model.layers:  # the model file's arrays, every layer
        assert layer.w_gate.shape == layer.w_up.shape == (c.d_model, c.d_mlp)
        assert layer.w_down.shape == (c.d_mlp, c.d_model)
    layer = model.layers[0]
    mlp = layer.w_gate.size + layer.w_up.size + layer.w_down.size
    a = layer.attention
    attention = a.w_q.size + a.w_k.size + a.w_v.size + a.w_o.size
    # by hand from the config: 3 * 576 * 1536 against 576 * 576 * 2 + 576 * 192 * 2
    assert mlp == 3 * c.d_model * c.d_mlp
    assert attention == 2 * c.d_model * c.n_heads * c.d_head + 2 * c.d_model * c.n_kv_heads * c.d_head
    assert mlp > 2.5 * attention  # "about three times", the direction the sentence states
    check_prose(
        "steps-mlp-swiglu",
        *layer.w_gate.shape,
        *layer.w_up.shape,
        *layer.w_down.shape,
        mlp,
        mlp / attention,
        attention,
    )
