"""Guards for the claims of docs/step-by-step-in-depth.md, the deep dive of "From scores to
output, one array at a time": the spread of the scores, the axis of the softmax, the
scale's effect on each row, and the trained model's layer and MLP.

Each test derives the fact itself, from the random toy of ``qkv.toy`` or from its own seeded
examples, and then checks what the page prints under its executed blocks.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from prose import check_prose, claim_sentence, written_numbers
from support import softmax_by_hand as softmax
from support import values_after

import qkv
from qkv import smollm2, toy

Z = 5  # standard errors allowed for a sampled statistic

T = len(toy.SENTENCE)

SHE, FROM, CUP = (toy.SENTENCE.index(w) for w in ("she", "from", "cup"))


def stated(claim_id):
    """The numbers a guarded sentence writes, in order (for a bound the test then uses)."""
    return [w.value for w in written_numbers(claim_sentence(claim_id))]


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


# ---- moved from the chapter: one call, PyTorch's sdpa, the exercise by hand ---------------


@pytest.mark.claim("steps-attention-equals-steps")
def test_one_call_equals_the_four_steps(qkv_toy, weights, in_depth):
    _, q, k, v = qkv_toy
    result = qkv.attention(q, k, v)
    np.testing.assert_allclose(result.weights, weights, rtol=1e-12)
    np.testing.assert_allclose(result.output, weights @ v, rtol=1e-12, atol=1e-14)
    assert in_depth["step_by_step.py:numpy"].splitlines() == [
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


@pytest.mark.claim("steps-ex-by-hand")
def test_the_three_token_exercise_matches_the_hand_calculation(in_depth):
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
    text = in_depth["step_by_step.py:exercise_by_hand"]
    assert values_after(text, "scaled scores:") == [2.0, 0.0, 1.0]
    np.testing.assert_allclose(values_after(text, "weights:"), weights, rtol=0, atol=0.0005 + 1e-9)
    np.testing.assert_allclose(values_after(text, "output:"), output, rtol=0, atol=0.0005 + 1e-9)
