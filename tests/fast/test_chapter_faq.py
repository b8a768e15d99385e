"""Guards for the claims of docs/faq.md (chapter 12).

Each fact is derived here, from qkv's public API on the test's own seeded data or from
algebra, and the page's printed output (``page_output``) is checked against it: what a reader
sees under each block, never the names the page's snippet defines.
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import numbers, shapes

import qkv

finite = st.floats(-5, 5, allow_nan=False, allow_infinity=False)


@pytest.fixture(scope="module")
def shown(page_output):
    return page_output("faq.md")




def _cosine(q, k):
    """Cosine of every query with every key: (Tq, d), (Tk, d) -> (Tq, Tk)."""
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    k = k / np.linalg.norm(k, axis=-1, keepdims=True)
    return q @ k.T


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
    assert np.array_equal(rows[16][0], np.eye(5)[best])  # one-hot to three decimals
    assert rows[16][1] <= 0.001  # the output within 0.001 of the best key's value


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
    weights, out = qkv.attention(rng.normal(size=(t_q, d_k)), rng.normal(size=(t_k, d_k)),
                                 rng.normal(size=(t_k, d_v)))
    assert weights.shape == (t_q, t_k)
    assert out.shape == (t_q, d_v)


@pytest.mark.claim("faq-dk-shared-dv-free")
def test_the_page_shows_tq_by_tk_weights_and_d_v_output_columns(shown):
    weights, out = shapes(shown.line("faq.py:sizes", "weights"))
    (t_q, d_k), (t_k, _) = shapes(shown["faq.py:sizes"].split("got", 1)[1])  # the error's q, k
    assert weights == (t_q, t_k)
    assert out[0] == t_q and out[1] != d_k  # d_v columns, not d_k: values are free


@pytest.mark.claim("faq-dk-mismatch-error")
def test_mismatched_d_k_raises_naming_bothshapes():
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 6)), rng.normal(size=(5, 7))
    with pytest.raises(ValueError, match=re.escape("(3, 4)")) as err:
        qkv.attention(q, k, v)
    assert "(5, 6)" in str(err.value) and "d_k" in str(err.value)


def _printed_error(text: str) -> str:
    """The ValueError a block prints (wrapped over lines), on one line."""
    return " ".join(text[text.index("ValueError:"):].split())


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
            own = x @ wide[:, h * 64:(h + 1) * 64]  # head 3: columns 192 to 255
            assert np.allclose(per_head[h], own, rtol=0, atol=1e-12)
    assert shown.line("faq.py:weights", "head 3's queries") == \
        "head 3's queries == x @ its own W_Q: True"


@pytest.mark.claim("faq-weights-count")
def test_count_of_weights_in_a_512_wide_8_head_layer(shown):
    w, _ = _layer()
    assert (w.d_model, w.n_heads, w.d_head) == (512, 8, 64)  # the layer the page describes
    one_head = sum(m[:, :64].size for m in (w.w_q, w.w_k, w.w_v))  # its block of columns
    assert one_head == 3 * 512 * 64 == 98_304
    assert w.w_q.size + w.w_k.size + w.w_v.size == 8 * one_head == 786_432
    assert w.w_o.size == 512 * 512 == 262_144
    assert 8 * one_head + w.w_o.size == 1_048_576
    assert numbers(shown.line("faq.py:weights", "one head:"), thousands=True)[-1] == 98_304
    assert numbers(shown.line("faq.py:weights", "8 heads:"), thousands=True) == [8, 786_432]
    assert numbers(shown.line("faq.py:weights", "W_O"), thousands=True) == [512, 512, 262_144]
    assert numbers(shown.line("faq.py:weights", "per layer:"), thousands=True) == [1_048_576]


@pytest.mark.claim("faq-dk-models")
def test_head_size_of_gpt2_and_llama(shown):
    by_name = {m.name: m for m in qkv.MODELS}
    published = {"GPT-2 (124M)": 768 // 12, "Llama 2 7B": 4096 // 32, "Llama 3 8B": 4096 // 32}
    assert published == {"GPT-2 (124M)": 64, "Llama 2 7B": 128, "Llama 3 8B": 128}
    for name, d_k in published.items():
        assert by_name[name].d_head == d_k
        printed_d_k, root = numbers(shown.line("faq.py:d_k", name)[len(name):], thousands=True)
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
    assert shown.line("faq.py:d_k", "the 512-wide layer") == \
        "the 512-wide layer divides by sqrt(64): True"


@pytest.mark.claim("faq-cosine-bounded")
@settings(max_examples=60, deadline=None)
@given(t=st.integers(2, 12), d=st.integers(1, 16), seed=st.integers(0, 2**16))
def test_cosine_weights_can_never_be_sharp(t, d, seed):
    rng = np.random.default_rng(seed)
    scores = _cosine(rng.normal(size=(t, d)), rng.normal(size=(t, d)))
    assert np.all(np.abs(scores) <= 1 + 1e-12)
    ceiling = np.exp(1) / (np.exp(1) + (t - 1) * np.exp(-1))  # best key +1, the rest -1
    assert np.all(qkv.softmax(scores) <= ceiling + 1e-12)


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
    ceiling = np.e**2 / (np.e**2 + 5)
    assert round(ceiling, 3) == 0.596
    for seed in range(20):
        rng = np.random.default_rng(seed)
        q, k = rng.normal(size=(6, 64)), rng.normal(size=(6, 64))
        assert np.isclose(qkv.softmax(_best_case(q[0])).max(), ceiling, rtol=0, atol=1e-12)
        assert qkv.softmax(_cosine(q, k)).max() < ceiling / 2  # random vectors stay well below
    reached, stated = numbers(shown.line("faq.py:cosine", "best case: largest weight"), thousands=True)
    assert abs(reached - ceiling) <= 5e-4 and abs(stated - ceiling) <= 5e-4
    assert numbers(shown.line("faq.py:cosine", "random vectors:"), thousands=True)[-1] < ceiling / 2


@pytest.mark.claim("faq-cosine-temperature")
def test_a_temperature_lets_cosine_attention_be_sharp(shown):
    q = np.random.default_rng(3).normal(size=64)
    assert qkv.softmax(_best_case(q) / 0.05).max() > 0.999
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
    assert np.allclose(qkv.softmax(_cosine(q, k)), qkv.softmax(_cosine(factor * q, k)),
                       rtol=0, atol=1e-12)


@pytest.mark.claim("faq-magnitude-sharpens")
def test_the_page_shows_the_entropy_falling_and_the_cosine_weights_unchanged(shown):
    _, before, after = numbers(shown.line("faq.py:cosine", "dot product, query x3:"), thousands=True)
    assert after < before
    assert shown.line("faq.py:cosine", "cosine,") == "cosine,      query x3: weights unchanged: True"


@pytest.mark.claim("faq-cross-shapes")
def test_decoder_reading_encoder_gets_tq_by_tk_weights(shown):
    rng = np.random.default_rng(0)
    p = qkv.Projections.random(rng, d_model=16, d_k=8)
    weights, out = qkv.cross_attention(rng.normal(size=(4, 16)), rng.normal(size=(11, 16)), p)
    assert weights.shape == (4, 11)
    assert out.shape == (4, p.d_v)
    assert np.allclose(weights.sum(axis=-1), 1.0, rtol=0, atol=1e-12)
    printed_weights, printed_out = shapes(shown.line("faq.py:other_source", "weights"))
    assert printed_weights == (4, 11) and printed_out[0] == 4


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
