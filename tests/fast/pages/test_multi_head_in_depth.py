"""Guards for the claims of docs/multi-head-in-depth.md, the deep dive of chapter 11 (the
shape at every step, the costs, the padded batch, the PyTorch layer and the exercise on a
grouped-query layer); the chapter's own are in test_multi_head.py.

Each fact is derived here, from qkv's public API on the test's own seeded layers (and from
PyTorch, for the PyTorch section), and the page's printed output (``page_output``) is checked
against it: what a reader sees under each block, never the names the page's snippets define.
The PyTorch tab's own ``>>>`` session is run and checked by Sybil (the root conftest.py).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch  # pinned in the test extra: a missing torch fails here, it is not skipped
import torch.nn.functional as F
from pages_support import EXACT, _layer, _n_params, above
from prose import check_prose
from support import attention_product_flops, numbers, shapes

import qkv


@pytest.fixture(scope="module")
def shown_in_depth(page_output):
    return page_output("multi-head-in-depth.md")


@pytest.mark.claim("heads-exercise-grouped")
def test_grouped_query_layer_shapes_and_weight_count(shown_in_depth):
    d_model, n_heads, n_kv = 768, 12, 4  # as the exercise gives them
    g = qkv.MultiHeadWeights.random(
        np.random.default_rng(5), d_model=d_model, n_heads=n_heads, n_kv_heads=n_kv
    )
    d_head = d_model // n_heads
    shapes = {
        "w_q": (d_model, d_model),
        "w_k": (d_model, n_kv * d_head),
        "w_v": (d_model, n_kv * d_head),
        "w_o": (d_model, d_model),
    }
    assert {name: getattr(g, name).shape for name in shapes} == shapes
    count = sum(m.size for m in (g.w_q, g.w_k, g.w_v, g.w_o))
    assert count == 2 * d_model**2 + 2 * d_model * n_kv * d_head
    assert 1 - count / (4 * d_model**2) == pytest.approx(1 / 3)  # "a third fewer"
    square = np.log(g.w_q.size) / np.log(d_model)
    # "keep 768 × 768; ... 4 heads of 64, ... 768 × 256, ... 2 × 768^2 + 2 × 768 × 256 = ..."
    check_prose(
        "heads-exercise-grouped",
        *g.w_q.shape,
        n_kv,
        d_head,
        *g.w_k.shape,
        len(("w_q", "w_o")),
        d_model,
        square,
        len(("w_k", "w_v")),
        *g.w_k.shape,
        count,
    )
    section = "multi_head_exercises.py:grouped_shapes"
    for name, shape in shapes.items():
        assert shown_in_depth.line(section, f"{name} ") == f"{name} {shape}"
    assert shown_in_depth.values(section, "weights in the layer:") == [count]


@pytest.mark.claim("heads-split-shapes")
@pytest.mark.parametrize("t", [1, 6, 13])
def test_shapes_at_each_step(t):
    w, x = _layer(t=t)
    q = qkv.split_heads(x @ w.w_q, 8)
    assert (x @ w.w_q).shape == (t, 512)
    assert q.shape == (8, t, 64)
    weights, per_head = qkv.attention(q, q, q)
    assert weights.shape == (8, t, t)
    assert per_head.shape == (8, t, 64)
    assert qkv.merge_heads(per_head).shape == (t, 512)
    # Head h is the h-th block of d_head columns: split_heads cuts, it does not shuffle.
    for h in range(8):
        assert np.array_equal(q[h], (x @ w.w_q)[:, h * 64 : (h + 1) * 64])


@pytest.mark.claim("heads-split-shapes")
def test_the_page_shows_the_shape_at_each_step(shown_in_depth):
    printed = {
        line[:20].strip(): shapes(line)[0]
        for line in shown_in_depth["multi_head.py:shapes"].splitlines()
        if shapes(line)
    }
    t = printed["x"][0]
    assert t == 6  # the six tokens of the running example
    w, x = _layer(t=t)
    q = qkv.split_heads(x @ w.w_q, w.n_heads)
    weights, per_head = qkv.attention(q, q, q)
    merged = qkv.merge_heads(per_head)
    assert printed == {
        "x": x.shape,
        "x @ W_Q": (x @ w.w_q).shape,
        "split_heads -> q": q.shape,
        "weights": weights.shape,
        "weights @ v": per_head.shape,
        "merge_heads": merged.shape,
        "@ W_O -> output": (merged @ w.w_o).shape,
    }
    # (T, 512); (8, T, 64), width 64; (8, T, T); (8, T, 64); (T, 512)
    check_prose(
        "heads-split-shapes",
        x.shape[1],
        q.shape[0],
        q.shape[2],
        q.shape[2],
        weights.shape[0],
        per_head.shape[0],
        per_head.shape[2],
        merged.shape[1],
    )


@pytest.mark.claim("heads-steps-equal-layer")
def test_the_shown_steps_are_what_multi_head_attention_computes(shown_in_depth):
    w, x = _layer()  # the page's sizes: exactly equal
    q, k, v = (qkv.split_heads(x @ m, 8) for m in (w.w_q, w.w_k, w.w_v))
    steps = qkv.merge_heads(qkv.attention(q, k, v).output) @ w.w_o
    assert np.array_equal(steps, qkv.multi_head_attention(x, x, w).output)
    check_prose("heads-steps-equal-layer", np.abs(steps - qkv.multi_head_attention(x, x, w).output).max())
    assert numbers(shown_in_depth.line("multi_head.py:shapes", "steps above vs"), thousands=True) == [0.0]
    # and the same holds for other sizes, batches and grouped-query weights
    for n_heads, n_kv in ((4, 4), (4, 2), (4, 1)):
        w, x = _layer(seed=n_kv, d_model=32, n_heads=n_heads, n_kv_heads=n_kv, batch=(2,))
        k = np.repeat(qkv.split_heads(x @ w.w_k, n_kv), n_heads // n_kv, axis=-3)
        v = np.repeat(qkv.split_heads(x @ w.w_v, n_kv), n_heads // n_kv, axis=-3)
        _, per_head = qkv.attention(qkv.split_heads(x @ w.w_q, n_heads), k, v)
        steps = qkv.merge_heads(per_head) @ w.w_o
        assert np.allclose(steps, qkv.multi_head_attention(x, x, w).output, rtol=0, atol=1e-12)


@pytest.mark.claim("heads-flops-equal", "recap-heads-cost")
@pytest.mark.parametrize("t", [1, 7, 512, 1024, 8192])
def test_eight_heads_of_64_cost_what_one_head_of_512_costs(t):
    eight = qkv.attention_flops(t, t, d_k=64, d_v=64, n_heads=8)
    one = qkv.attention_flops(t, t, d_k=512, d_v=512, n_heads=1)
    assert eight == one
    # Derived by hand: Q K^T and weights @ V are each 2 * t * t * 512 flops in total.
    assert one == 2 * (2 * t * t * 512)
    if t <= 512:  # and counted on the arrays attention computes (8192 tokens: 4 GiB of weights)
        assert eight == attention_product_flops(t, t, 64, 64, n_heads=8)
        assert one == attention_product_flops(t, t, 512, 512)


def _growth_exponent(flops) -> float:
    """How the count grows with T: log2 of the ratio when T doubles (2 for T squared)."""
    return float(np.log2(flops(2048) / flops(1024)))


@pytest.mark.claim("heads-flops-equal")
def test_the_flops_sentence_states_the_counts_computed():
    w = _layer()[0]
    exponent = _growth_exponent(lambda t: qkv.attention_flops(t, t, w.d_head, w.d_head, 8))
    # the factor 2 of a dot product: flops of Q K^T per (query, key, coordinate)
    per_coordinate = qkv.attention_flops(10, 10, w.d_head, 0) / (10 * 10 * w.d_head)
    assert per_coordinate == 2  # d multiply-adds, each counted as two flops
    # "T^2 dot products ... 2 T^2 d_head flops ... 8 heads of 64 do 8 · 4T^2 · 64 = 4T^2 · 512
    # flops, ... one head of 512"
    check_prose(
        "heads-flops-equal",
        exponent,
        per_coordinate,
        exponent,
        w.n_heads,
        w.d_head,
        w.n_heads,
        exponent,
        w.d_head,
        exponent,
        w.d_model,
        w.d_model,
    )


@pytest.mark.claim("heads-params-equal", "recap-heads-cost")
def test_parameter_count_does_not_depend_on_the_number_of_heads():
    counts = {
        n: _n_params(qkv.MultiHeadWeights.random(np.random.default_rng(0), 512, n)) for n in (1, 2, 4, 8, 16)
    }
    (count,) = set(counts.values())  # the same for every head count
    w = _layer()[0]  # the page's layer
    matrices = (w.w_q, w.w_k, w.w_v, w.w_o)
    assert {m.shape for m in matrices} == {(w.d_model, w.d_model)}
    assert count == len(matrices) * w.d_model**2
    exponent = np.log(w.w_q.size) / np.log(w.d_model)  # d x d holds d^2 weights
    # "512 × 512 ... 4 · 512^2 = 1,048,576 weights with 1 head or 8 (16 too)"
    check_prose(
        "heads-params-equal",
        *w.w_q.shape,
        len(matrices),
        w.d_model,
        exponent,
        count,
        *[n for n in counts if n in (1, w.n_heads, 2 * w.n_heads)],
    )


@pytest.mark.claim("heads-weights-memory-8x", "recap-heads-cost")
@pytest.mark.parametrize("t", [6, 100])
def test_eight_heads_store_eight_weight_maps(t):
    w8, x = _layer(t=t)
    w1 = qkv.MultiHeadWeights.random(np.random.default_rng(1), 512, 1)
    maps8 = qkv.multi_head_attention(x, x, w8).weights
    maps1 = qkv.multi_head_attention(x, x, w1).weights
    assert maps8.shape == (8, t, t) and maps1.shape == (1, t, t)
    assert maps8.nbytes == 8 * maps1.nbytes
    check_prose("heads-weights-memory-8x", maps8.nbytes / maps1.nbytes)


@pytest.mark.claim("heads-mask-shared-alibi-not")
def test_a_causal_or_padding_mask_is_the_same_in_every_head_alibi_is_not():
    """Give every head the same queries and keys, so only what is added per head can make
    their weights differ: a causal and padding mask leaves the eight heads' maps identical,
    ALiBi's bias (a slope per head) makes every one of them different."""
    rng = np.random.default_rng(0)
    t, heads = 6, 8
    q, k, v = (np.broadcast_to(rng.normal(size=(t, 64)), (heads, t, 64)) for _ in range(3))
    mask = qkv.causal_mask(t) & qkv.padding_mask([4], t)[0]  # (6, 6), shared by the heads
    masked = qkv.attention(q, k, v, mask=mask).weights  # (8, 6, 6)
    assert all(np.array_equal(masked[h], masked[0]) for h in range(heads))
    bias = qkv.alibi_bias(t, heads)  # (8, 6, 6): -slope_h * |i - j|
    slopes = -bias[:, 0, 1]
    assert len(set(slopes.tolist())) == heads  # a slope of its own in each head
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(64) + bias
    with_alibi = qkv.softmax(np.where(mask, scores, -np.inf))
    for a in range(heads):
        for b in range(a + 1, heads):
            assert np.abs(with_alibi[a] - with_alibi[b]).max() > 1e-6
    check_prose("heads-mask-shared-alibi-not")  # the sentence writes no number


@pytest.mark.claim("heads-flops-equal", "heads-params-equal", "heads-weights-memory-8x")
def test_the_cost_table_shows_equal_flops_and_parameters_and_8x_the_maps(shown_in_depth):
    t = 1024  # the table's column
    expected = {  # label: flops, parameters, weight maps for 6 tokens (float64) and their bytes
        "8 heads": [2 * (2 * t * t * 512), 4 * 512**2, 8, 6, 6, 8 * 6 * 6 * 8],
        "1 head": [2 * (2 * t * t * 512), 4 * 512**2, 1, 6, 6, 1 * 6 * 6 * 8],
    }
    for label, row in expected.items():
        assert numbers(shown_in_depth.line("multi_head.py:cost", label)[len(label) :], thousands=True) == row


@pytest.mark.claim("heads-softmax-small")
@pytest.mark.parametrize("t", [6, 1024, 4096])
def test_softmax_work_is_one_per_256_flops_of_the_products(t):
    exponentials = 8 * t * t  # one per entry of the eight T x T score maps
    flops = qkv.attention_flops(t, t, 64, 64, n_heads=8)
    assert flops == 256 * exponentials
    if t <= 1024:  # the products counted on the arrays attention computes
        assert attention_product_flops(t, t, 64, 64, n_heads=8) == flops
    exponent = _growth_exponent(lambda n: 8 * n * n)
    # "8T^2 exponentials, against 2048 T^2 flops ... one exponential per 256 flops"
    check_prose("heads-softmax-small", exponent, flops / (t * t), exponent, flops / exponentials)


@pytest.mark.claim("heads-1gib-maps")
def test_eight_float16_maps_at_8192_tokens_take_one_gib():
    t, maps, dtype = 8192, 8, np.float16
    one_map = np.empty((t, t), dtype=dtype).nbytes
    assert maps * one_map == 2**30  # exactly
    check_prose("heads-1gib-maps", t, maps, np.dtype(dtype).itemsize * 8, maps * one_map / 2**30)


def _sdpa_largest_allocation(backend, q, k, v) -> int:
    """The most bytes any one operation allocates (net of what it frees) during one
    ``scaled_dot_product_attention`` call restricted to ``backend``, as PyTorch's profiler
    counts them on the CPU."""
    from torch.nn.attention import sdpa_kernel
    from torch.profiler import ProfilerActivity, profile

    with sdpa_kernel(backend):
        F.scaled_dot_product_attention(q, k, v)  # warm-up, outside the count
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            F.scaled_dot_product_attention(q, k, v)
    ops = [e for e in prof.events() if e.name.startswith("aten::")]
    assert any(e.name == "aten::scaled_dot_product_attention" for e in ops)  # the call was seen
    return max(e.self_cpu_memory_usage for e in ops)


@pytest.mark.claim("heads-sdpa-tiles-or-not")
def test_pytorch_sdpa_tiles_with_its_fused_kernel_and_holds_the_map_in_its_math_fallback():
    from torch.nn.attention import SDPBackend

    t, d = 2048, 64
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 1, t, d, dtype=torch.float32) for _ in range(3))
    one_map = t * t * 4  # bytes of one float32 T × T map
    fused = _sdpa_largest_allocation(SDPBackend.FLASH_ATTENTION, q, k, v)
    math_fallback = _sdpa_largest_allocation(SDPBackend.MATH, q, k, v)
    assert 0 < fused < one_map / 4, (fused, one_map)
    assert math_fallback >= one_map, (math_fallback, one_map)
    check_prose("heads-sdpa-tiles-or-not", t)


def test_causal_mask_zeroes_every_later_key_in_every_head():
    for seed in range(5):
        w, x = _layer(seed=seed, t=9)
        causal = qkv.causal_mask(9)
        weights = qkv.multi_head_attention(x, x, w, mask=causal).weights
        assert np.all(weights[:, ~causal] == 0.0)  # exactly zero, not merely small
        assert np.all(weights[:, causal] > 0.0)
        assert np.allclose(weights.sum(axis=-1), 1.0, rtol=0, atol=1e-12)


@pytest.mark.claim("heads-mask-broadcast")
def test_padding_and_causal_masks_combine_and_broadcast_over_heads(shown_in_depth):
    pad = qkv.padding_mask(np.array([4, 6]), 6)
    both = pad & qkv.causal_mask(6)
    assert pad.shape == (2, 1, 6) and both.shape == (2, 6, 6)
    w, batch = _layer(t=6, batch=(2,))
    result = qkv.multi_head_attention(batch, batch, w, mask=both)
    assert result.weights.shape == (2, 8, 6, 6)
    for h in range(8):  # every head obeys the same mask
        assert np.array_equal(result.weights[:, h] > 0, both)
    check_prose(
        "heads-mask-broadcast", *pad.shape, *qkv.causal_mask(6).shape, *both.shape, result.weights.shape[1]
    )
    assert shapes(shown_in_depth.line("multi_head.py:padding", "mask")) == [
        both.shape,
        result.weights.shape,
        result.output.shape,
    ]


def test_padding_keys_get_exactly_zero_weight(shown_in_depth):
    assert numbers(shown_in_depth.line("multi_head.py:padding", "largest weight on a padding key")) == [0]
    w, batch = _layer(seed=3, t=10, batch=(3,))
    lengths = np.array([3, 10, 7])
    weights = qkv.multi_head_attention(batch, batch, w, mask=qkv.padding_mask(lengths, 10)).weights
    for b, length in enumerate(lengths):
        assert np.all(weights[b, :, :, length:] == 0.0)
        assert np.all(weights[b, :, :, :length] > 0.0)


@pytest.mark.claim("heads-padding-no-leak")
def test_real_tokens_of_a_padded_sequence_match_the_sequence_alone(shown_in_depth):
    w, batch = _layer(seed=4, t=6, batch=(2,))  # the page's batch: lengths 4 and 6
    allowed = qkv.padding_mask(np.array([4, 6]), 6) & qkv.causal_mask(6)
    padded = qkv.multi_head_attention(batch, batch, w, mask=allowed)
    alone = qkv.multi_head_attention(batch[0, :4], batch[0, :4], w, mask=qkv.causal_mask(4))
    assert np.allclose(padded.output[0, :4], alone.output, rtol=0, atol=1e-12)
    # Changing what sits in the padding changes nothing for the real tokens.
    garbage = batch.copy()
    garbage[0, 4:] = 1e3
    again = qkv.multi_head_attention(garbage, garbage, w, mask=allowed)
    assert np.allclose(again.output[0, :4], padded.output[0, :4], rtol=0, atol=1e-12)
    gap = numbers(
        shown_in_depth.line("multi_head.py:padding", "short sequence, padded vs alone"), thousands=True
    )
    assert gap[-1] <= EXACT
    check_prose("heads-padding-no-leak", EXACT)


def _sdpa_layer(w, x, mask=None):
    """Multi-head self-attention around F.scaled_dot_product_attention, as the PyTorch tab
    builds it (written out here with reshapes): the mask is True where a query may attend."""
    t = torch.from_numpy
    d_head = w.w_q.shape[1] // w.n_heads

    def heads(m):  # (..., T, n_heads * d_head) -> (..., n_heads, T, d_head)
        y = t(x) @ t(m)
        return y.reshape(*y.shape[:-1], w.n_heads, d_head).transpose(-3, -2)

    attn_mask = None if mask is None else t(np.ascontiguousarray(mask))[..., None, :, :]
    out = F.scaled_dot_product_attention(heads(w.w_q), heads(w.w_k), heads(w.w_v), attn_mask=attn_mask)
    return (out.transpose(-3, -2).reshape(*x.shape[:-1], -1) @ t(w.w_o)).numpy()


@pytest.mark.claim("heads-torch-agrees")
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("batch", [(), (3,)])
def test_a_layer_around_torch_sdpa_agrees_with_qkv(masked, batch):
    w, x = _layer(seed=7, t=6, batch=batch)
    mask = None
    if masked:
        mask = qkv.causal_mask(6)
        if batch:
            mask = qkv.padding_mask(np.array([2, 6, 4]), 6) & mask
    theirs = _sdpa_layer(w, x, mask)
    ours = qkv.multi_head_attention(x, x, w, mask=mask).output
    assert theirs.shape == ours.shape
    assert np.allclose(theirs, ours, rtol=0, atol=EXACT)
    check_prose("heads-torch-agrees", EXACT)


@pytest.mark.claim("heads-torch-mha-mask-inverted")
def test_nn_multiheadattention_wants_the_mask_inverted():
    w, x = _layer(seed=2, t=6, batch=(1,))
    layer = torch.nn.MultiheadAttention(512, 8, bias=False, batch_first=True, dtype=torch.float64)
    with torch.no_grad():  # copy our weights in: torch stores W transposed, Q/K/V stacked
        layer.in_proj_weight.copy_(torch.from_numpy(np.concatenate([w.w_q, w.w_k, w.w_v], 1).T))
        layer.out_proj.weight.copy_(torch.from_numpy(w.w_o.T))
        causal = qkv.causal_mask(6)
        xt = torch.from_numpy(x)
        right, right_weights = layer(
            xt, xt, xt, attn_mask=torch.from_numpy(~causal), average_attn_weights=False
        )
        wrong, _ = layer(xt, xt, xt, attn_mask=torch.from_numpy(causal))
    ours = qkv.multi_head_attention(x, x, w, mask=causal)
    assert np.allclose(right.numpy(), ours.output, rtol=0, atol=1e-12)
    assert np.allclose(right_weights.numpy(), ours.weights, rtol=0, atol=1e-12)
    wrong = wrong.numpy()
    # Given our mask as is, each query attends only to the keys it must not see ...
    flipped = ~causal
    flipped[5] = True  # (qkv refuses a row with no key; the last row is checked below)
    only_later = qkv.multi_head_attention(x, x, w, mask=flipped).output
    assert np.allclose(wrong[:, :5], only_later[:, :5], rtol=0, atol=1e-12)
    # ... and the last query, left with no key at all, comes out as NaN.
    assert np.isnan(wrong[:, 5]).all()
    check_prose("heads-torch-mha-mask-inverted", layer.num_heads)


# ---- moved from test_trained_model.py: this page's trained-model note, on the model --


@pytest.mark.claim("note-multi-head-trained")
def test_note_heads_specialise(induction_losses, kinds):
    loss, controls = induction_losses
    assert loss[1] > 2 * loss[3:].max()
    check_prose(
        "note-multi-head-trained",
        30 * 9,
        len(above(kinds["previous"][0])),
        len(above(kinds["induction"][0])),
        len(above(kinds["induction"][0])),
        loss[0],
        loss[1],
        len(controls[0]),
        loss[3:].max(),
    )
