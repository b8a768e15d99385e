"""Guards for the claims of docs/recap.md (chapter 14).

The recap restates what the chapters prove; each step is checked again here, directly
against qkv, so the recap cannot drift from the code. (Steps about the heads and the
cache also share guards with chapters 11 and 12.)
"""

from __future__ import annotations

import inspect
import tracemalloc

import numpy as np
import pytest
import torch
from prose import check_prose

import qkv
from qkv import smollm2


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.mark.claim("recap-blend")
def test_weights_are_positive_where_seen_zero_where_masked_and_blend_the_seen_values(rng):
    q, k, v = rng.normal(size=(4, 8)), rng.normal(size=(6, 8)), rng.normal(size=(6, 3))
    unmasked = qkv.attention(q, k, v)
    assert np.all(unmasked.weights > 0)  # no mask: every key gets a positive weight
    mask = qkv.causal_mask(4, 6) & qkv.padding_mask([5], 6)[0]  # (4, 6): two kinds of hidden key
    weights, out = qkv.attention(q, k, v, mask=mask)
    assert np.all(weights[mask] > 0)  # positive on every key a query may see
    assert np.all(weights[~mask] == 0.0)  # exactly 0, not small, on the masked ones
    assert np.allclose(weights.sum(axis=-1), 1.0, rtol=0, atol=1e-12)
    assert np.allclose(out, weights @ v, rtol=0, atol=1e-12)
    # each row averages only the values it may see: changing a hidden value changes nothing
    hidden_key = int(np.flatnonzero(~mask[0])[0])
    v_changed = v.copy()
    v_changed[hidden_key] += 100.0
    changed = qkv.attention(q, k, v_changed, mask=mask).output
    assert np.array_equal(changed[~mask[:, hidden_key]], out[~mask[:, hidden_key]])
    check_prose("recap-blend", weights[~mask].max(), weights.sum(axis=-1).max())


@pytest.mark.claim("recap-no-params")
def test_the_parameters_live_in_the_projections_not_in_attention(rng):
    assert list(inspect.signature(qkv.attention).parameters) == ["q", "k", "v", "mask", "scale"]
    x = rng.normal(size=(5, 8))
    p = qkv.Projections.random(rng, d_model=8, d_k=4, d_v=3)
    q, k, v = x @ p.w_q, x @ p.w_k, x @ p.w_v
    assert np.array_equal(qkv.self_attention(x, p).output, qkv.attention(q, k, v).output)
    check_prose("recap-no-params")  # the line writes no number


@pytest.mark.claim("recap-tying", "recap-two-products")
def test_tying_query_and_key_symmetrises_tying_key_and_value_changes_only_the_output(rng):
    x = rng.normal(size=(6, 8))
    p = qkv.Projections.random(rng, d_model=8, d_k=8)

    def cycle_sums(weights):
        # log w_ij = s_ij / sqrt(d_k) - log Z_i. Around any cycle i->j->k->i the row totals Z
        # cancel in (log W - log W^T), leaving the cycle sum of s_ij - s_ji: zero for every
        # triple exactly when the scores qkv computed are symmetric (up to rounding).
        a = np.log(weights) - np.log(weights).T  # (T, T)
        return a[:, :, None] + a[None, :, :] + a.T[:, None, :]  # [i, j, k]: a_ij + a_jk + a_ki

    tied = qkv.self_attention(x, qkv.Projections(p.w_k, p.w_k, p.w_v))  # W_Q = W_K
    separate = qkv.self_attention(x, p)
    assert np.abs(cycle_sums(tied.weights)).max() < 1e-9
    assert np.abs(cycle_sums(separate.weights)).max() > 1e-3
    q, k, v = qkv.project(x, p)
    # "RoPE keeps them so; a bias on the queries alone does not", on the scores themselves
    # (a query bias adds b.k_j, which cancels around a cycle, so cycle_sums cannot see it)
    k_tied = x @ p.w_k
    rotated = qkv.rope(k_tied, np.arange(6))
    assert np.allclose(rotated @ rotated.T, (rotated @ rotated.T).T, rtol=0, atol=1e-12)
    biased = (k_tied + rng.normal(size=8)) @ k_tied.T
    assert np.abs(biased - biased.T).max() > 1e-3
    full = qkv.attention(q, k, v)
    kv_tied = qkv.attention(q, k, k)  # W_V = W_K
    assert np.array_equal(kv_tied.weights, full.weights)
    assert not np.allclose(kv_tied.output, full.output, atol=1e-3)


@pytest.mark.claim("recap-two-products")
def test_only_the_query_key_and_value_output_products_matter(rng):
    d_model, d_k, d_v = 8, 4, 3
    x = rng.normal(size=(6, d_model))
    w_q, w_k = rng.normal(size=(2, d_model, d_k))
    w_v, w_o = rng.normal(size=(d_model, d_v)), rng.normal(size=(d_v, d_model))
    m, n = rng.normal(size=(d_k, d_k)), rng.normal(size=(d_v, d_v))  # invertible (random)
    # other matrices with the same two products: W_Q M and W_K M^-T, W_V N and N^-1 W_O
    w_q2, w_k2 = w_q @ m, w_k @ np.linalg.inv(m).T
    w_v2, w_o2 = w_v @ n, np.linalg.inv(n) @ w_o
    np.testing.assert_allclose(w_q2 @ w_k2.T, w_q @ w_k.T, rtol=0, atol=1e-9)
    np.testing.assert_allclose(w_v2 @ w_o2, w_v @ w_o, rtol=0, atol=1e-9)
    assert not np.allclose(w_q2, w_q, atol=1e-3) and not np.allclose(w_v2, w_v, atol=1e-3)

    def layer(wq, wk, wv, wo):  # scaled by the same 1/sqrt(d_k), so only the scores can differ
        return qkv.self_attention(x, qkv.Projections(wq, wk, wv)).output @ wo

    np.testing.assert_allclose(layer(w_q2, w_k2, w_v2, w_o2), layer(w_q, w_k, w_v, w_o), rtol=0, atol=1e-9)
    # and a change to either product changes the layer
    assert not np.allclose(layer(w_q2, w_k, w_v, w_o), layer(w_q, w_k, w_v, w_o), atol=1e-3)
    assert not np.allclose(layer(w_q, w_k, w_v2, w_o), layer(w_q, w_k, w_v, w_o), atol=1e-3)


@pytest.mark.claim("recap-two-products")
def test_the_query_key_product_alone_sets_the_weights_only_without_bias_rope_or_qk_norm(rng):
    """Two pairs of matrices with one product W_Q W_Kᵀ (W_Q M and W_K M⁻ᵀ) give the same
    weights in a plain head, and different ones once queries carry a bias, RoPE turns them
    or QK-norm rescales them: there the scores see W_Q and W_K apart. (A key bias alone
    adds q_i · b to a whole row, which softmax ignores.)"""
    x = rng.normal(size=(6, 8))
    w_q, w_k = rng.normal(size=(2, 8, 4))
    m = rng.normal(size=(4, 4))  # invertible (random)
    w_q2, w_k2 = w_q @ m, w_k @ np.linalg.inv(m).T
    np.testing.assert_allclose(w_q2 @ w_k2.T, w_q @ w_k.T, rtol=0, atol=1e-9)
    b_q, b_k = rng.normal(size=(2, 4))

    def unit(a):  # QK-norm: each query and key scaled to length 1 (RMSNorm up to a constant)
        return a / np.linalg.norm(a, axis=-1, keepdims=True)

    heads = {
        "plain": lambda q, k: (q, k),
        "key bias": lambda q, k: (q, k + b_k),
        "query bias": lambda q, k: (q + b_q, k),
        "RoPE": lambda q, k: (qkv.rope(q), qkv.rope(k)),
        "QK-norm": lambda q, k: (unit(q), unit(k)),
    }
    gaps = {}
    for name, head in heads.items():
        one, other = (qkv.attention(*head(x @ a, x @ b), x).weights for a, b in ((w_q, w_k), (w_q2, w_k2)))
        gaps[name] = np.abs(one - other).max()
    assert gaps["plain"] < 1e-9 and gaps["key bias"] < 1e-9
    assert min(gaps["query bias"], gaps["RoPE"], gaps["QK-norm"]) > 1e-3


@pytest.mark.claim("recap-shapes")
@pytest.mark.parametrize(("t_q", "t_k", "d_k", "d_v"), [(4, 4, 64, 64), (3, 7, 5, 2)])
def test_shapes_of_scores_weights_and_output(t_q, t_k, d_k, d_v, rng):
    q, k, v = rng.normal(size=(t_q, d_k)), rng.normal(size=(t_k, d_k)), rng.normal(size=(t_k, d_v))
    assert (q @ k.T).shape == (t_q, t_k)
    weights, out = qkv.attention(q, k, v)
    assert weights.shape == (t_q, t_k)
    assert out.shape == (t_q, d_v)


@pytest.mark.claim("recap-position")
def test_without_positions_order_is_invisible_with_rope_only_the_offset_counts(rng):
    x = rng.normal(size=(6, 8))
    p = qkv.Projections.random(rng, d_model=8, d_k=8, d_v=4)
    order = rng.permutation(6)
    plain, shuffled = qkv.self_attention(x, p), qkv.self_attention(x[order], p)
    assert np.allclose(shuffled.output, plain.output[order], rtol=0, atol=1e-12)
    q, k, v = qkv.project(x, p)
    positions = np.arange(6)
    scores = qkv.rope(q, positions) @ qkv.rope(k, positions).T
    shifted = qkv.rope(q, positions + 37) @ qkv.rope(k, positions + 37).T  # same offsets
    assert np.allclose(shifted, scores, rtol=0, atol=1e-9)
    # "the signed offset": one query and one key, the key 3 before and 3 after (one distance)
    pair = np.random.default_rng(1).normal(size=(2, 1, 8))
    plus = (qkv.rope(pair[0], [10]) @ qkv.rope(pair[1], [7]).T).item()  # key 3 before
    minus = (qkv.rope(pair[0], [7]) @ qkv.rope(pair[1], [10]).T).item()  # key 3 after
    assert abs(plus - minus) > 1e-3
    weights, out = qkv.attention(qkv.rope(q, positions), qkv.rope(k, positions), v)
    assert np.allclose(out, weights @ v, rtol=0, atol=1e-12)  # the values are not rotated
    assert not np.allclose(weights, qkv.attention(q, k, v).weights, atol=1e-3)
    # "without a mask": under a causal mask a shuffle changes more than the order
    causal = qkv.causal_mask(6)
    masked = qkv.self_attention(x, p, mask=causal).output
    assert not np.allclose(qkv.self_attention(x[order], p, mask=causal).output, masked[order], atol=1e-3)


@pytest.mark.claim("recap-residual")
def test_the_output_is_projected_to_the_width_of_x_and_added(rng):
    x = rng.normal(size=(6, 16))
    p = qkv.Projections.random(rng, d_model=16, d_k=8, d_v=4)
    w_o = rng.normal(size=(4, 16))
    out = qkv.self_attention(x, p).output  # (6, 4)
    # Reference: the layer written from scratch, softmax by hand, plus the skip connection.
    q, k, v = x @ p.w_q, x @ p.w_k, x @ p.w_v
    s = q @ k.T / np.sqrt(8)
    a = np.exp(s - s.max(axis=1, keepdims=True))
    a /= a.sum(axis=1, keepdims=True)
    x_next = x + out @ w_o
    assert x_next.shape == x.shape
    assert np.allclose(x_next, x + a @ v @ w_o, rtol=0, atol=1e-12)
    assert np.allclose(x_next - out @ w_o, x, rtol=0, atol=1e-12)  # x is kept, not replaced


@pytest.mark.claim("recap-scale")
def test_scores_grow_like_sqrt_d_k_and_scaling_brings_them_back(rng):
    n = 40_000
    std, scaled_var = {}, {}
    narrow, wide = 1, 64
    for d_k in (narrow, wide):
        q, k = rng.normal(size=(n, d_k)), rng.normal(size=(n, d_k))
        raw = np.einsum("nd,nd->n", q, k)
        std[d_k] = raw.std()
        scaled_var[d_k] = (raw / np.sqrt(d_k)).var()
        assert abs(scaled_var[d_k] - 1) < 0.05
    ratio = std[wide] / std[narrow]
    assert abs(ratio - np.sqrt(wide / narrow)) < 0.5
    # "(8 in a head of 64); ... variance back to 1"
    check_prose("recap-scale", std[wide], wide, scaled_var[wide])


@pytest.mark.claim("recap-masks-zero")
def test_masked_weights_are_exactly_zero(rng):
    q = k = v = rng.normal(size=(7, 4))
    causal = qkv.causal_mask(7)
    hidden_causal = qkv.attention(q, k, v, mask=causal).weights[~causal]
    pad = qkv.padding_mask(np.array([3]), 7)
    hidden_pad = qkv.attention(q, k, v, mask=pad).weights[..., 3:]
    assert np.all(hidden_causal == 0.0) and np.all(hidden_pad == 0.0)
    check_prose("recap-masks-zero", max(hidden_causal.max(), hidden_pad.max()))


@pytest.mark.claim("recap-cross")
def test_cross_attention_weights_are_tq_by_tk_rows_summing_to_one(rng):
    p = qkv.Projections.random(rng, d_model=8, d_k=4)
    weights, _ = qkv.cross_attention(rng.normal(size=(3, 8)), rng.normal(size=(10, 8)), p)
    assert weights.shape == (3, 10)
    assert np.allclose(weights.sum(axis=-1), 1.0, rtol=0, atol=1e-12)
    check_prose("recap-cross", weights.sum(axis=-1).max())


@pytest.mark.claim("recap-traps-silent")
def test_three_traps_run_without_error_and_give_wrong_numbers(rng):
    q, k, v = (rng.normal(size=(6, 64)) for _ in range(3))
    # Dropping the scale at d_k = 64: runs, and the weights move far from the right ones.
    right = qkv.attention(q, k, v)
    unscaled = qkv.attention(q, k, v, scale=False)
    assert np.abs(unscaled.weights - right.weights).max() > 0.1
    # Softmax over the queries: runs, and the rows no longer sum to 1.
    scores = q @ k.T / 8
    assert not np.allclose(qkv.softmax(scores, axis=0).sum(axis=-1), 1.0, atol=0.05)
    # A True = may-attend mask handed to nn.MultiheadAttention, which reads True = blocked:
    # runs, and its output differs from what the right mask gives.
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(64, 4, batch_first=True, dtype=torch.float64)
    x = torch.from_numpy(q)[None]
    causal = torch.from_numpy(qkv.causal_mask(6))
    with torch.no_grad():
        wrong, _ = mha(x, x, x, attn_mask=causal)
        good, _ = mha(x, x, x, attn_mask=~causal)
    assert not torch.isnan(good).any()
    rows = slice(0, 5)  # the last row of the wrong one is NaN: it may see nothing
    assert (wrong[0, rows] - good[0, rows]).abs().max() > 0.1


@pytest.mark.claim("recap-heads-cost")
def test_eight_heads_cost_what_one_wide_head_costs_and_store_eight_maps(rng):
    d_model, heads = 512, 8
    eight = qkv.MultiHeadWeights.random(rng, d_model=d_model, n_heads=heads)
    one = qkv.MultiHeadWeights.random(rng, d_model=d_model, n_heads=1)
    t = 6
    x = rng.normal(size=(t, d_model))
    flops = {w.n_heads: qkv.attention_flops(t, t, w.d_head, w.d_head, w.n_heads) for w in (eight, one)}
    params = {w.n_heads: sum(m.size for m in (w.w_q, w.w_k, w.w_v, w.w_o)) for w in (eight, one)}
    maps = {w.n_heads: qkv.multi_head_attention(x, x, w).weights for w in (eight, one)}
    assert flops[heads] == flops[1] and params[heads] == params[1]  # the matrix products
    # the softmax is not: one exponential per score, eight maps of scores against one
    exponentials = {n: m.size for n, m in maps.items()}
    assert exponentials[heads] == heads * exponentials[1] == heads * t * t
    rows_per_token = {n: m.shape[0] for n, m in maps.items()}  # one row of weights per head
    # "8 heads of 64 give every token 8 rows ... where one head of 512 gives 1 ... the softmax
    # runs over 8 times the scores ... 8 times the memory"
    check_prose(
        "recap-heads-cost",
        heads,
        eight.d_head,
        rows_per_token[heads],
        one.d_head,
        rows_per_token[1],
        exponentials[heads] / exponentials[1],
        maps[heads].nbytes / maps[1].nbytes,
    )


@pytest.mark.claim("recap-gqa-shrink")
def test_the_cache_per_token_and_what_sharing_divides_it_by():
    by_name = {m.name: m for m in qkv.MODELS}
    llama3, falcon = by_name["Llama 3 8B"], by_name["Falcon 7B"]
    per_token = qkv.kv_cache_bytes(
        llama3.n_layers, llama3.n_kv_heads, llama3.d_head, 1, bytes_per_value=1
    )  # numbers, not bytes
    tensors = per_token / (llama3.n_layers * llama3.n_kv_heads * llama3.d_head)  # K and V

    def shrink(m):
        return qkv.kv_cache_bytes(m.n_layers, m.n_heads, m.d_head, 1) / qkv.kv_cache_bytes(
            m.n_layers, m.n_kv_heads, m.d_head, 1
        )

    check_prose("recap-gqa-shrink", tensors, shrink(llama3), ..., shrink(falcon))  # ...: "3"


def _random_layer(rng, d_model=16, n_heads=4, n_kv_heads=2, d_mlp=24):
    """A small Llama layer with random weights, in qkv.smollm2's own types."""
    config = smollm2.Config(
        n_layers=1,
        d_model=d_model,
        n_heads=n_heads,
        n_kv_heads=n_kv_heads,
        d_head=d_model // n_heads,
        d_mlp=d_mlp,
        vocab_size=10,
        rope_base=10_000.0,
        norm_eps=1e-5,
        context_length=32,
    )
    layer = smollm2.Layer(
        attn_norm=rng.uniform(0.5, 1.5, d_model),
        attention=qkv.MultiHeadWeights.random(rng, d_model, n_heads, n_kv_heads),
        mlp_norm=rng.uniform(0.5, 1.5, d_model),
        w_gate=rng.normal(size=(d_model, d_mlp)) / 4,
        w_up=rng.normal(size=(d_model, d_mlp)) / 4,
        w_down=rng.normal(size=(d_mlp, d_model)) / 4,
    )
    return config, layer


@pytest.mark.claim("recap-prenorm")
def test_the_layer_adds_attention_of_the_normalised_input_then_an_mlp_of_it(rng):
    config, layer = _random_layer(rng)
    x = 3 * rng.normal(size=(5, config.d_model)) + 1  # rows far from unit size

    def norm(v, gain):  # RMSNorm, written here
        return v / np.sqrt((v * v).mean(axis=-1, keepdims=True) + config.norm_eps) * gain

    def attn(h):  # grouped-query attention with RoPE and a causal mask, from qkv's parts
        w = layer.attention
        q = qkv.rope(qkv.split_heads(h @ w.w_q, w.n_heads), None, config.rope_base)
        k = qkv.rope(qkv.split_heads(h @ w.w_k, w.n_kv_heads), None, config.rope_base)
        v = qkv.split_heads(h @ w.w_v, w.n_kv_heads)
        group = w.n_heads // w.n_kv_heads
        k, v = np.repeat(k, group, axis=0), np.repeat(v, group, axis=0)
        _, heads = qkv.attention(q, k, v, mask=qkv.causal_mask(len(h)))
        return qkv.merge_heads(heads) @ w.w_o

    def mlp(h):  # SwiGLU
        gate = h @ layer.w_gate
        return (gate / (1 + np.exp(-gate)) * (h @ layer.w_up)) @ layer.w_down

    after_attention = x + attn(norm(x, layer.attn_norm))
    want = after_attention + mlp(norm(after_attention, layer.mlp_norm))
    got, _ = smollm2.decoder_layer(x, layer, config, positions=range(len(x)))
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    # and reading X instead of Norm(X) would give another layer
    post = x + attn(x)
    assert not np.allclose(post + mlp(norm(post, layer.mlp_norm)), got, atol=1e-3)


@pytest.mark.claim("recap-tiled")
def test_tiled_attention_gives_attentions_output_one_block_of_scores_at_a_time(rng):
    q, k, v = rng.normal(size=(3, 40, 8))
    mask = qkv.causal_mask(40)
    want = qkv.attention(q, k, v, mask=mask).output
    got = qkv.tiled_attention(q, k, v, mask, block_q=6, block_k=7).output
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    # never the T × T weights: at T = 1,024 its peak is well under one such matrix
    big = rng.normal(size=(3, 1024, 16))
    tracemalloc.start()
    try:
        qkv.tiled_attention(*big, block_q=128, block_k=128)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1024 * 1024 * 8 / 4
