"""Guards for the claims of docs/faq-long-answers.md, the long answers of chapter 13 that
show the code (the claims docs/faq.md itself makes are in test_faq.py).

Each fact is derived here, from qkv's public API on the test's own seeded data or from
algebra, and the long answers' printed output (``page_output``) is checked against it: what a
reader sees under each block, never the names the page's snippet defines.
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pages_support import _cosine
from prose import check_prose
from support import numbers, shapes

import qkv

finite = st.floats(-5, 5, allow_nan=False, allow_infinity=False)


@pytest.fixture(scope="module")
def shown(page_output):
    return page_output("faq-long-answers.md")  # the FAQ's code runs on its long answers


def _best_case(q):
    """Cosine scores of ``q`` with one key along it and five against it: [[1, -1, ..., -1]]."""
    return _cosine(q[None], np.vstack([q, -np.repeat(q[None], 5, axis=0)]))


@pytest.mark.claim("faq-sharper-query-lookup")
def test_the_page_shows_a_longer_query_turning_the_blend_into_one_lookup(shown):
    text = shown["faq.py:names"]
    best = int(numbers(shown.line("faq.py:names", "best-matching key:"), thousands=True)[0])
    rows = {}
    for factor in (1, 4, 16):
        *weights, miss = numbers(shown.line("faq.py:names", f"x{factor} "), thousands=True)[1:]
        rows[factor] = (np.array(weights), miss)
    assert all(len(w) == 5 and abs(w.sum() - 1) < 3e-3 for w, _ in rows.values()), text
    # softmax(s z) is softmax(z) ** s renormalised: the printed rows are one query scaled
    for factor in (4, 16):
        powered = rows[1][0] ** factor
        assert np.allclose(rows[factor][0], powered / powered.sum(), rtol=0, atol=5e-3), text
    assert rows[1][0][best] < rows[4][0][best] < rows[16][0][best]
    largest = max(rows)  # the largest factor the page prints
    assert np.array_equal(rows[largest][0], np.eye(5)[best])  # one-hot to three decimals
    within = 0.001  # the sentence's bound on the distance to the best key's value
    assert rows[largest][1] <= within
    check_prose("faq-sharper-query-lookup", largest, within)


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**16))
@pytest.mark.claim("faq-sharper-query-lookup")
def test_scaling_up_a_query_never_lowers_the_best_keys_weight(seed):
    rng = np.random.default_rng(seed)
    keys, query = rng.normal(size=(6, 8)), rng.normal(size=8)
    best = np.argmax(keys @ query)
    weights = [qkv.attention(s * query[None], keys, keys).weights[0, best] for s in (1, 2, 4, 8)]
    assert all(a <= b + 1e-15 for a, b in itertools.pairwise(weights))


@pytest.mark.claim("faq-dk-shared-dv-free")
@pytest.mark.parametrize(("t_q", "t_k", "d_k", "d_v"), [(3, 5, 4, 7), (2, 9, 16, 1), (4, 4, 3, 3)])
def test_d_v_is_free_and_the_weights_stay_tq_by_tk(t_q, t_k, d_k, d_v):
    rng = np.random.default_rng(0)
    weights, out = qkv.attention(
        rng.normal(size=(t_q, d_k)), rng.normal(size=(t_k, d_k)), rng.normal(size=(t_k, d_v))
    )
    assert weights.shape == (t_q, t_k)
    assert out.shape == (t_q, d_v)


@pytest.mark.claim("faq-dk-shared-dv-free")
def test_the_page_shows_tq_by_tk_weights_and_d_v_output_columns(shown):
    weights, out = shapes(shown.line("faq.py:sizes", "weights"))
    (t_q, d_k), (t_k, _) = shapes(shown["faq.py:sizes"].split("got", 1)[1])  # the error's q, k
    assert weights == (t_q, t_k)
    assert out[0] == t_q and out[1] > d_k  # d_v columns, wider than d_k: values are free


@pytest.mark.claim("faq-dk-mismatch-error")
def test_mismatched_d_k_raises_naming_bothshapes():
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 6)), rng.normal(size=(5, 7))
    with pytest.raises(ValueError, match=re.escape("(3, 4)")) as err:
        qkv.attention(q, k, v)
    assert "(5, 6)" in str(err.value) and "d_k" in str(err.value)


def _printed_error(text: str) -> str:
    """The ValueError a block prints (wrapped over lines), on one line."""
    return " ".join(text[text.index("ValueError:") :].split())


@pytest.mark.claim("faq-dk-mismatch-error")
def test_the_page_shows_qkvs_error_for_keys_of_another_width(shown):
    printed = _printed_error(shown["faq.py:sizes"])
    q_shape, k_shape = shapes(printed)
    assert q_shape[-1] != k_shape[-1]
    with pytest.raises(ValueError) as err:  # what qkv says for arrays of those shapes
        qkv.attention(np.zeros(q_shape), np.zeros(k_shape), np.zeros((k_shape[0], 3)))
    assert printed == f"ValueError: {err.value}"


def _layer(seed=0):
    """A layer as the page describes it: d_model 512, 8 heads of 64, six tokens."""
    rng = np.random.default_rng(seed)
    return qkv.MultiHeadWeights.random(rng, d_model=512, n_heads=8), rng.normal(size=(6, 512))


@pytest.mark.claim("faq-head-weights-columns")
def test_each_heads_matrices_are_a_block_of_columns(shown):
    w, x = _layer()
    assert w.d_head == 64
    for name in ("w_q", "w_k", "w_v"):
        wide = getattr(w, name)
        per_head = qkv.split_heads(x @ wide, w.n_heads)
        for h in range(w.n_heads):
            own = x @ wide[:, h * 64 : (h + 1) * 64]  # head 3: columns 192 to 255
            assert np.allclose(per_head[h], own, rtol=0, atol=1e-12)
    head = 3  # the page's example head
    assert (
        shown.line("faq.py:weights", f"head {head}'s queries")
        == f"head {head}'s queries == x @ its own W_Q: True"
    )
    check_prose("faq-head-weights-columns", head, head * w.d_head, (head + 1) * w.d_head - 1, w.d_head)


@pytest.mark.claim("faq-weights-count")
def test_count_of_weights_in_a_512_wide_8_head_layer(shown):
    w, _ = _layer()  # the layer the page describes: 512 wide, 8 heads
    matrices = {"w_q": w.w_q, "w_k": w.w_k, "w_v": w.w_v, "w_o": w.w_o}
    assert {m.shape for m in matrices.values()} == {(w.d_model, w.d_model)}  # square
    total = sum(m.size for m in matrices.values())
    bands = (w.w_q, w.w_k, w.w_v)
    one_head = sum(m[:, : w.d_head].size for m in bands)  # head 0's band of columns
    assert one_head == len(bands) * w.d_model * w.d_head
    assert w.n_heads * one_head + w.w_o.size == total  # the bands cover W_Q, W_K, W_V
    for name, m in matrices.items():
        assert numbers(shown.line("faq.py:weights", name + " "), thousands=True) == [*m.shape, m.size]
    assert numbers(shown.line("faq.py:weights", "of which one head's bands"), thousands=True)[-1] == one_head
    assert numbers(shown.line("faq.py:weights", "per layer:"), thousands=True) == [total]
    check_prose(
        "faq-weights-count",
        w.d_model,
        len(matrices),
        w.d_model,
        w.d_model,
        total,
        len(bands),
        w.d_model,
        w.d_head,
        one_head,
    )


def _printed_shapes(shown, name: str) -> dict[str, tuple[int, int]]:
    """The four shapes the page prints for one named layer ("W_K 576x192" -> (576, 192))."""
    line = shown.line("faq.py:weight_shapes", name)[len(name) :]
    return {m: (int(r), int(c)) for m, r, c in re.findall(r"(W_[QKVO]) (\d+)x(\d+)", line)}


@pytest.mark.claim("faq-weights-gqa-smollm2")
@pytest.mark.model
def test_smollm2_keys_and_values_are_narrower_than_its_queries(shown, model):
    c = model.config
    for layer in model.layers:  # the model file's own arrays, every layer
        a = layer.attention
        assert a.w_q.shape == (c.d_model, c.n_heads * c.d_head)
        assert a.w_k.shape == a.w_v.shape == (c.d_model, c.n_kv_heads * c.d_head)
        assert a.w_o.shape == (c.n_heads * c.d_head, c.d_model)
    a = model.layers[0].attention
    assert a.w_k.shape[1] < a.w_q.shape[1]  # not square: fewer key/value bands
    printed = _printed_shapes(shown, "SmolLM2-135M")
    assert printed == {"W_Q": a.w_q.shape, "W_K": a.w_k.shape, "W_V": a.w_v.shape, "W_O": a.w_o.shape}
    check_prose("faq-weights-gqa-smollm2", c.n_heads, c.n_kv_heads, c.d_head, *a.w_k.shape, *a.w_q.shape)


@pytest.mark.claim("faq-weights-gemma")
def test_gemma_heads_are_wider_together_than_the_model(shown):
    # Gemma 7B as its report publishes it (Gemma Team 2024, table 1): d_model 3072,
    # 16 heads, head size 256; the shapes below follow from these alone
    d_model, n_heads, d_head = 3072, 16, 256
    heads_wide = n_heads * d_head
    assert heads_wide != d_model  # the heads' widths do not add up to the model's
    printed = _printed_shapes(shown, "Gemma 7B")
    assert printed["W_Q"] == (d_model, heads_wide) and printed["W_O"] == (heads_wide, d_model)
    assert printed["W_K"] == printed["W_V"] == (d_model, heads_wide)  # 16 key/value heads
    check_prose("faq-weights-gemma", n_heads, d_head, heads_wide, d_model, heads_wide, heads_wide, d_model)


@pytest.mark.claim("faq-dk-models")
def test_head_size_of_gpt2_and_llama(shown):
    by_name = {m.name: m for m in qkv.MODELS}
    widths = {"GPT-2 (124M)": (768, 12), "Llama 2 7B": (4096, 32), "Llama 3 8B": (4096, 32)}
    published = {name: width // heads for name, (width, heads) in widths.items()}
    assert published["Llama 2 7B"] == published["Llama 3 8B"]
    check_prose(
        "faq-dk-models",
        published["GPT-2 (124M)"],
        *widths["GPT-2 (124M)"],
        published["Llama 2 7B"],
        ...,
        ...,
        *widths["Llama 3 8B"],
    )  # ...: model names
    for name, d_k in published.items():
        assert by_name[name].d_head == d_k
        printed_d_k, root = numbers(shown.line("faq.py:d_k", name)[len(name) :], thousands=True)
        assert printed_d_k == d_k and abs(root - np.sqrt(d_k)) <= 0.005


@pytest.mark.claim("faq-scale-per-head")
def test_the_layer_scales_by_the_head_size_not_the_model_width(shown):
    w, x = _layer(1)
    q = qkv.split_heads(x @ w.w_q, w.n_heads)
    k = qkv.split_heads(x @ w.w_k, w.n_heads)
    layer = qkv.multi_head_attention(x, x, w).weights
    by_head = qkv.softmax(q @ k.swapaxes(-1, -2) / np.sqrt(64))
    by_width = qkv.softmax(q @ k.swapaxes(-1, -2) / np.sqrt(512))
    assert np.allclose(layer, by_head, rtol=0, atol=1e-12)
    assert not np.allclose(layer, by_width, atol=1e-3)
    assert shown.flag("faq.py:d_k", "the 512-wide layer divides by sqrt(64):")
    check_prose(
        "faq-scale-per-head", ..., w.d_model, w.n_heads, w.d_head, np.sqrt(w.d_head), w.d_model
    )  # ...: "chapter 6"


def _gemma2_weights(query_pre_attn_scalar, head_dim=128, softcap=50.0, seed=0):
    """transformers' own Gemma 2 attention (eager, no rotation) on random inputs, with weights
    large enough that the cap matters: its weights, and the queries and keys it scored."""
    import torch
    from transformers import Gemma2Config
    from transformers.models.gemma2.modeling_gemma2 import Gemma2Attention

    torch.manual_seed(seed)
    config = Gemma2Config(
        hidden_size=64,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=head_dim,
        query_pre_attn_scalar=query_pre_attn_scalar,
        attn_logit_softcapping=softcap,
        num_hidden_layers=1,
        layer_types=["full_attention"],
    )
    config._attn_implementation = "eager"
    layer = Gemma2Attention(config, layer_idx=0).eval()
    t = 5
    with torch.no_grad():
        for weight in layer.parameters():
            weight.normal_(0.0, 3.0)
        x = torch.randn(1, t, 64)
        no_rotation = (torch.ones(1, t, head_dim), torch.zeros(1, t, head_dim))
        _, weights = layer(x, no_rotation, attention_mask=None)
        q = layer.q_proj(x).view(1, t, 2, head_dim).transpose(1, 2).double().numpy()
        k = layer.k_proj(x).view(1, t, 1, head_dim).transpose(1, 2).double().numpy()
    return weights.double().numpy(), q, k


def _softmax_rows(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _capped(s, cap=50.0):
    return cap * np.tanh(s / cap)


@pytest.mark.claim("faq-gemma2-scale")
def test_gemma2_27b_divides_by_the_root_of_its_query_pre_attn_scalar_not_of_its_head_width():
    # Gemma 2 27B as its report publishes it (Gemma Team 2024b, table 1): d_model 4608,
    # 32 heads of 128; query_pre_attn_scalar is d_model / heads
    d_model, n_heads = 4608, 32
    (gemma27,) = [m for m in qkv.WINDOWED_MODELS if m.name == "Gemma 2 27B"]
    head_dim, scalar = gemma27.d_head, d_model // n_heads
    assert scalar * n_heads == d_model and scalar != head_dim
    weights, q, k = _gemma2_weights(scalar, head_dim)
    s = q @ k.swapaxes(-1, -2)
    by_scalar = _softmax_rows(_capped(s / np.sqrt(scalar)))
    by_head_dim = _softmax_rows(_capped(s / np.sqrt(head_dim)))
    np.testing.assert_allclose(weights, by_scalar, atol=1e-5)  # transformers computes in float32
    assert np.abs(weights - by_head_dim).max() > 1e-2
    check_prose("faq-gemma2-scale", ..., head_dim, scalar, np.sqrt(scalar), d_model, n_heads)


@pytest.mark.claim("faq-gemma2-softcap")
def test_gemma2_caps_its_scaled_scores_softly_at_50():
    from transformers import Gemma2Config

    cap = Gemma2Config().attn_logit_softcapping  # the library's default, every Gemma 2's value
    weights, q, k = _gemma2_weights(256, head_dim=256)
    s = q @ k.swapaxes(-1, -2) / np.sqrt(256)
    assert np.abs(s).max() > 2 * cap  # scores large enough for the cap to matter
    np.testing.assert_allclose(weights, _softmax_rows(_capped(s, cap)), atol=1e-5)
    assert np.abs(weights - _softmax_rows(s)).max() > 1e-2
    loss = 100 * (1 - _capped(5.0, cap) / 5.0)  # percent of a score of 5 lost to the cap
    huge = np.array([60.0, 1e3, 1e300])
    assert (np.abs(_capped(huge, cap)) <= cap).all() and (np.abs(_capped(-huge, cap)) <= cap).all()
    check_prose("faq-gemma2-softcap", ..., cap, cap, 5, loss, cap)


COSINE_MAX = 1  # a cosine lies in [-1, 1]


@pytest.mark.claim("faq-cosine-bounded")
@settings(max_examples=60, deadline=None)
@given(t=st.integers(2, 12), d=st.integers(1, 16), seed=st.integers(0, 2**16))
def test_cosine_weights_can_never_be_sharp(t, d, seed):
    rng = np.random.default_rng(seed)
    scores = _cosine(rng.normal(size=(t, d)), rng.normal(size=(t, d)))
    assert np.all(np.abs(scores) <= COSINE_MAX + 1e-12)
    ceiling = np.exp(1) / (np.exp(1) + (t - 1) * np.exp(-1))  # best key +1, the rest -1
    assert np.all(qkv.softmax(scores) <= ceiling + 1e-12)
    # "within [-1, 1] ... exceeds e^2 / (e^2 + T - 1)": the interval, then the formula's
    check_prose("faq-cosine-bounded", -COSINE_MAX, COSINE_MAX, ..., ..., ...)


@given(st.lists(finite, min_size=2, max_size=8))
@pytest.mark.claim("faq-cosine-bounded")
def test_the_ceiling_holds_for_any_scores_in_minus_one_one(raw):
    scores = np.tanh(np.array(raw))  # anything in (-1, 1)
    t = len(scores)
    assert qkv.softmax(scores).max() <= np.e**2 / (np.e**2 + t - 1) + 1e-12


@pytest.mark.claim("faq-cosine-bounded")
def test_the_pages_random_cosines_lie_within_minus_one_one(shown):
    low, high, _ = numbers(shown.line("faq.py:cosine", "random vectors:"), thousands=True)
    assert -1 <= low <= high <= 1


@pytest.mark.claim("faq-cosine-ceiling")
def test_the_ceiling_for_six_keys_is_reached_and_is_0_596(shown):
    t, d = 6, 64  # the page's keys and their width
    ceiling = np.e**2 / (np.e**2 + t - 1)
    check_prose("faq-cosine-ceiling", t, ceiling, d)
    for seed in range(20):
        rng = np.random.default_rng(seed)
        q, k = rng.normal(size=(t, d)), rng.normal(size=(t, d))
        assert np.isclose(qkv.softmax(_best_case(q[0])).max(), ceiling, rtol=0, atol=1e-12)
        assert qkv.softmax(_cosine(q, k)).max() < ceiling / 2  # random vectors stay well below
    reached, stated = numbers(shown.line("faq.py:cosine", "best case: largest weight"), thousands=True)
    assert abs(reached - ceiling) <= 5e-4 and abs(stated - ceiling) <= 5e-4
    assert numbers(shown.line("faq.py:cosine", "random vectors:"), thousands=True)[-1] < ceiling / 2


@pytest.mark.claim("faq-cosine-temperature")
def test_a_temperature_lets_cosine_attention_be_sharp(shown):
    q = np.random.default_rng(3).normal(size=64)
    temperature, above = 0.05, 0.999
    assert qkv.softmax(_best_case(q) / temperature).max() > above
    check_prose("faq-cosine-temperature", temperature, above)
    # printed to three decimals, 1.000 means at least 0.9995
    assert numbers(shown.line("faq.py:cosine", "best case, temperature"), thousands=True)[-1] == 1.0


@pytest.mark.claim("faq-magnitude-sharpens")
@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**16), factor=st.floats(1.5, 10))
def test_a_longer_query_sharpens_dot_product_weights_but_not_cosine_weights(seed, factor):
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(1, 8)), rng.normal(size=(6, 8))
    before = qkv.entropy(qkv.softmax(q @ k.T / np.sqrt(8)))[0]
    after = qkv.entropy(qkv.softmax(factor * q @ k.T / np.sqrt(8)))[0]
    assert after < before
    assert np.allclose(qkv.softmax(_cosine(q, k)), qkv.softmax(_cosine(factor * q, k)), rtol=0, atol=1e-12)


@pytest.mark.claim("faq-magnitude-sharpens")
def test_the_page_shows_the_entropy_falling_and_the_cosine_weights_unchanged(shown):
    _, before, after = numbers(shown.line("faq.py:cosine", "dot product, query x3:"), thousands=True)
    assert after < before
    assert shown.flag("faq.py:cosine", "cosine,")
    assert shown.line("faq.py:cosine", "cosine,").split()[1:-1] == ["query", "x3:", "weights", "unchanged:"]


@pytest.mark.claim("faq-cross-shapes")
def test_decoder_reading_encoder_gets_tq_by_tk_weights(shown):
    rng = np.random.default_rng(0)
    decoder, encoder = rng.normal(size=(4, 16)), rng.normal(size=(11, 24))
    q = decoder @ rng.normal(size=(16, 8))
    k, v = encoder @ rng.normal(size=(24, 8)), encoder @ rng.normal(size=(24, 6))
    weights, out = qkv.attention(q, k, v)
    assert weights.shape == (4, 11)  # one row per decoder position, one column per encoder one
    assert out.shape == (4, 6)
    assert np.allclose(weights.sum(axis=-1), 1.0, rtol=0, atol=1e-12)
    printed_weights, printed_out, _ = shapes(shown.line("faq.py:other_source", "weights"))
    assert printed_weights == weights.shape and printed_out[0] == weights.shape[0]
    check_prose("faq-cross-shapes", *weights.shape, *weights.shape, weights.sum(axis=-1).max())


@pytest.mark.claim("faq-kv-same-length")
def test_keys_and_values_must_have_the_same_length(shown):
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=re.escape("(6, 64)")) as err:
        qkv.attention(rng.normal(size=(6, 64)), rng.normal(size=(6, 64)), rng.normal(size=(7, 64)))
    assert "(7, 64)" in str(err.value)
    # the page prints qkv's message for its mismatched keys and values
    printed = _printed_error(shown["faq.py:other_source"])
    k_shape, v_shape = shapes(printed)
    assert k_shape[0] != v_shape[0]
    with pytest.raises(ValueError) as err:
        qkv.attention(np.zeros((1, k_shape[-1])), np.zeros(k_shape), np.zeros(v_shape))
    assert printed == f"ValueError: {err.value}"


@pytest.mark.claim("faq-rows-sum-to-one")
@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**16), shift=st.sampled_from([-1000.0, -100.0, 0.0, 500.0]))
def test_a_row_hands_out_a_total_weight_of_one_whatever_the_scores(seed, shift):
    scores = np.random.default_rng(seed).normal(size=(3, 8)) + shift
    weights = qkv.softmax(scores)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=0, atol=1e-12)
    assert (weights > 0).all()
    assert (weights.argmax(axis=-1) == scores.argmax(axis=-1)).all()  # the least bad fit


@pytest.mark.claim("faq-rows-sum-to-one")
def test_the_page_shows_scores_near_minus_1000_giving_weights_that_sum_to_one(shown):
    shift = -1000.0  # the level the sentence names
    scores = np.random.default_rng(5).normal(size=(1, 8)) + shift  # as the page draws them
    weights = qkv.softmax(scores)
    printed_scores = numbers(shown.line("faq.py:nothing", "scores:"), thousands=True)
    np.testing.assert_allclose(printed_scores, scores[0], atol=0.05 + 1e-9)
    assert abs(np.mean(printed_scores) - shift) < 1  # "near -1,000"
    *printed_weights, total = numbers(shown.line("faq.py:nothing", "weights:"), thousands=True)
    np.testing.assert_allclose(printed_weights, weights[0], atol=5e-4 + 1e-12)
    assert abs(total - weights.sum()) < 1e-12
    check_prose("faq-rows-sum-to-one", shift, weights.sum())


@pytest.mark.claim("faq-empty-row")
def test_a_mask_can_empty_a_row_and_each_implementation_answers_differently():
    """A causal mask and left padding hide every key of a query (the old page said a mask
    cannot): a softmax of all -inf is NaN, a large finite fill spreads the row evenly, qkv
    raises naming the row, and PyTorch's SDPA returns zeros."""
    import torch
    import torch.nn.functional as F

    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(3, 4, 8))
    mask = qkv.causal_mask(4) & qkv.padding_mask([3], 4)[0][:, ::-1]  # 1 pad on the left
    assert not mask[0].any() and mask[1:].any(axis=-1).all()  # row 0 is empty, the others not
    scores = q @ k.T / np.sqrt(8)
    with np.errstate(invalid="ignore"):
        all_inf = np.exp(np.where(mask, scores, -np.inf))
        by_hand = all_inf / all_inf.sum(axis=-1, keepdims=True)  # 0/0 in row 0
    assert np.isnan(by_hand[0]).all() and not np.isnan(by_hand[1:]).any()
    filled = qkv.softmax(np.where(mask, scores, -1e9))  # the masked_fill(-1e9) idiom
    np.testing.assert_allclose(filled[0], 1 / 4, rtol=1e-12)  # every hidden key alike
    np.testing.assert_allclose(filled[1:], by_hand[1:], rtol=1e-12, atol=1e-300)
    with pytest.raises(ValueError, match=r"query row \(0,\)"):
        qkv.attention(q, k, v, mask=mask)
    t = torch.from_numpy
    sdpa = F.scaled_dot_product_attention(t(q), t(k), t(v), attn_mask=t(mask.copy())).numpy()
    assert (sdpa[0] == 0).all()
    np.testing.assert_allclose(sdpa[1:], by_hand[1:] @ v, rtol=1e-10, atol=1e-12)
    check_prose("faq-empty-row")  # the sentence writes no number


@pytest.mark.claim("faq-cost-quadratic")
def test_each_doubling_multiplies_flops_and_weight_map_bytes_by_four(shown):
    w = qkv.MultiHeadWeights.random(np.random.default_rng(6), d_model=64, n_heads=8)
    flops, nbytes = [], []
    for t in (16, 32, 64):
        x = np.random.default_rng(t).normal(size=(t, 64))
        flops.append(qkv.attention_flops(t, t, w.d_head, w.d_head, w.n_heads))
        nbytes.append(qkv.multi_head_attention(x, x, w).weights.nbytes)
    flop_ratios = {b / a for a, b in itertools.pairwise(flops)}
    byte_ratios = {b / a for a, b in itertools.pairwise(nbytes)}
    assert len(flop_ratios) == len(byte_ratios) == 1  # the same factor at every doubling
    check_prose("faq-cost-quadratic", *flop_ratios, *byte_ratios)
    (ratio,) = flop_ratios
    rows = [numbers(line, thousands=True) for line in shown["faq.py:quadratic"].splitlines()]
    for (t, flops_t, bytes_t), (t2, flops_2t, bytes_2t) in itertools.pairwise(rows):
        assert t2 == 2 * t  # the page doubles the length too
        assert flops_2t / flops_t == bytes_2t / bytes_t == ratio


@pytest.mark.claim("faq-cosine-variations")
def test_random_vectors_stay_below_half_the_cosine_ceiling_except_when_narrow(shown):
    """The page's draws (seed 0, keys 6 then 64, widths 4 to 512, 200 each), recomputed with
    a softmax written here."""
    rng = np.random.default_rng(0)
    above = {}
    for t in (6, 64):
        ceiling = np.e**2 / (np.e**2 + t - 1)
        for d in (4, 16, 64, 512):
            largest = []
            for _ in range(200):
                q, k = rng.normal(size=(2, t, d))
                e = np.exp(_cosine(q, k))  # cosines in [-1, 1]: no overflow
                largest.append((e / e.sum(axis=-1, keepdims=True)).max())
            assert max(largest) < ceiling  # the bound holds in every draw
            above[t, d] = np.mean(np.array(largest) > ceiling / 2)
    # the direction at widths 64 and 512 and with 64 keys: never above half the ceiling
    assert all(above[t, d] == 0 for t in (6, 64) for d in (64, 512))
    assert all(above[64, d] == 0 for d in (4, 16, 64, 512))
    # and narrow vectors over few keys do pass it, most of the time at width 4
    assert above[6, 4] > 0.5 and 0 < above[6, 16] < above[6, 4]
    check_prose("faq-cosine-variations", 64, 512, 64, 6, 4, 100 * above[6, 4], 100 * above[6, 16], 16)
    for (t, d), share in above.items():
        assert shown.row("faq.py:cosine_variations", t, d)[-1] == pytest.approx(100 * share, abs=0.05)
