"""qkv.online_softmax, qkv.tiled_attention and qkv.linear_attention: property tests against
qkv's own softmax and attention, PyTorch as the reference where it has the operation, and
linear attention against the O(T²) formula written out here."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from prose import check_prose

import qkv

TOLERANCE = {np.float64: 1e-6, np.float32: 1e-5}  # what the docstring promises


def _elements(low, high, dtype):
    return st.floats(low, high, allow_nan=False, allow_infinity=False, width=np.dtype(dtype).itemsize * 8)


@st.composite
def attention_case(draw):
    """Queries and keys wide enough to give large scores, values in [-1, 1] (so an absolute
    tolerance means something), leading dims that broadcast, an optional mask with an allowed
    key in every row, and block sizes that may or may not divide T."""
    dtype = draw(st.sampled_from([np.float64, np.float32]))
    lead = draw(st.sampled_from([(), (2,), (2, 3)]))
    t_q, t_k = draw(st.integers(1, 40)), draw(st.integers(1, 40))
    d_k, d_v = draw(st.integers(1, 8)), draw(st.integers(1, 5))
    q = draw(arrays(dtype, (*lead, t_q, d_k), elements=_elements(-8, 8, dtype)))
    k = draw(arrays(dtype, (*lead[-1:], t_k, d_k), elements=_elements(-8, 8, dtype)))  # broadcasts
    v = draw(arrays(dtype, (t_k, d_v), elements=_elements(-1, 1, dtype)))
    mask = None
    if draw(st.booleans()):
        mask = draw(arrays(np.bool_, (t_q, t_k)))
        keep = draw(arrays(np.int64, t_q, elements=st.integers(0, t_k - 1)))
        mask[np.arange(t_q), keep] = True
    blocks = draw(st.integers(1, 45)), draw(st.integers(1, 45))
    return dtype, q, k, v, mask, blocks


@pytest.mark.claim("tiled-equals-attention")
@settings(max_examples=300, deadline=None)
@given(attention_case())
def test_tiled_attention_equals_attention_and_its_logsumexp_gives_back_the_weights(case):
    dtype, q, k, v, mask, (block_q, block_k) = case
    want = qkv.attention(q, k, v, mask=mask).output
    got = qkv.tiled_attention(q, k, v, mask=mask, block_q=block_q, block_k=block_k)
    assert got.output.dtype == dtype and got.output.shape == want.shape
    np.testing.assert_allclose(got.output, want, rtol=0, atol=TOLERANCE[dtype])
    # the log-sum-exp of each row's scores, kept for the backward pass, rebuilds the weights
    weights = qkv.attention(q.astype(np.float64), k.astype(np.float64), v, mask=mask).weights
    scores = q.astype(np.float64) @ np.swapaxes(k, -1, -2).astype(np.float64) / np.sqrt(q.shape[-1])
    rebuilt = np.exp(scores - got.logsumexp[..., None].astype(np.float64))
    if mask is not None:
        rebuilt = np.where(mask, rebuilt, 0.0)
    np.testing.assert_allclose(rebuilt, weights, rtol=0, atol=TOLERANCE[dtype] * 10)


# ---- PyTorch as the reference -----------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(
    ("t_q", "t_k", "block_q", "block_k"), [(7, 13, 3, 5), (64, 64, 16, 16), (50, 9, 64, 4)]
)
@pytest.mark.parametrize("masked", [False, True])
def test_tiled_attention_matches_torch_sdpa_and_logsumexp(dtype, t_q, t_k, block_q, block_k, masked):
    rng = np.random.default_rng(t_q * 100 + t_k)
    q = rng.normal(size=(2, 3, t_q, 16)).astype(dtype)
    k = rng.normal(size=(2, 3, t_k, 16)).astype(dtype)
    v = rng.normal(size=(2, 3, t_k, 8)).astype(dtype)
    mask = None
    if masked:
        mask = rng.random((t_q, t_k)) < 0.5
        mask[:, 0] = True
    got = qkv.tiled_attention(q, k, v, mask=mask, block_q=block_q, block_k=block_k)
    tq, tk, tv = map(torch.from_numpy, (q, k, v))
    with torch.no_grad():
        out = F.scaled_dot_product_attention(
            tq, tk, tv, attn_mask=None if mask is None else torch.from_numpy(mask)
        )
        scores = tq @ tk.transpose(-1, -2) / 4.0  # √16
        if mask is not None:
            scores = scores.masked_fill(~torch.from_numpy(mask), -torch.inf)
        lse = torch.logsumexp(scores, dim=-1)
    np.testing.assert_allclose(got.output, out.numpy(), rtol=0, atol=TOLERANCE[dtype])
    np.testing.assert_allclose(got.logsumexp, lse.numpy(), rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype])


@pytest.mark.claim("tiled-equals-attention")
def test_a_row_that_may_attend_to_nothing_is_refused_as_attention_refuses_it():
    # torch's SDPA returns NaN for such a row; qkv refuses it, both functions alike
    q = k = v = np.ones((3, 2))
    mask = np.array([[True, False, False], [False, False, False], [True, True, True]])
    with pytest.raises(ValueError, match=r"no key for query row \(1,\)") as tiled:
        qkv.tiled_attention(q, k, v, mask=mask, block_k=1)
    with pytest.raises(ValueError, match=r"no key for query row \(1,\)") as full:
        qkv.attention(q, k, v, mask=mask)
    assert str(tiled.value) == str(full.value)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_online_softmax_matches_torch_softmax(dtype):
    z = (np.random.default_rng(1).normal(size=(4, 1000)) * 50).astype(dtype)
    z[1, ::3] = -np.inf
    want = torch.softmax(torch.from_numpy(z), dim=-1).numpy()
    for block in (1, 7, 256, 5000):
        np.testing.assert_allclose(qkv.online_softmax(z, block=block), want, rtol=1e-5, atol=1e-7)


def test_elu_plus_one_is_torchs_elu_plus_one():
    x = np.linspace(-30, 30, 601)
    want = F.elu(torch.from_numpy(x)).numpy() + 1
    np.testing.assert_allclose(qkv.elu_plus_one(x), want, rtol=1e-12, atol=1e-15)


# ---- the online softmax ------------------------------------------------------------------

scores = arrays(
    np.float64,
    st.tuples(st.integers(1, 3), st.integers(1, 60)),
    elements=st.one_of(st.floats(-1e4, 1e4), st.just(-np.inf)),
)


def _with_a_finite_score(z):
    z = z.copy()
    z[:, 0] = np.where(np.isfinite(z[:, 0]), z[:, 0], 0.0)
    return z


@pytest.mark.claim("tiled-online-equals-softmax")
@settings(deadline=None)
@given(scores, st.integers(1, 70))
def test_online_softmax_equals_softmax_for_any_block(z, block):
    z = _with_a_finite_score(z)
    got = qkv.online_softmax(z, block=block)
    np.testing.assert_allclose(got, qkv.softmax(z), rtol=1e-9, atol=1e-15)
    assert (got[np.isneginf(z)] == 0).all()  # -inf gets exactly 0


@settings(deadline=None)
@given(scores, st.floats(-1e4, 1e4), st.integers(1, 70))
def test_online_softmax_ignores_a_constant_added_to_a_row(z, c, block):
    z = _with_a_finite_score(z)
    np.testing.assert_allclose(
        qkv.online_softmax(z + c, block=block), qkv.online_softmax(z, block=block), rtol=1e-9, atol=1e-12
    )


@pytest.mark.claim("tiled-overflow")
def test_naive_softmax_overflows_where_the_stable_ones_do_not():
    z = np.array([1000.0, 999.0, 998.0])
    with np.errstate(over="ignore", invalid="ignore"):
        naive = np.exp(z) / np.exp(z).sum()
        # where exp overflows: the log of each type's largest number, checked on both sides
        limits = [float(np.log(np.finfo(t).max)) for t in (np.float64, np.float32)]
        for t, limit in zip((np.float64, np.float32), limits, strict=True):
            assert np.isinf(np.exp(t(limit * 1.0001))) and np.isfinite(np.exp(t(limit * 0.9999)))
    assert np.isnan(naive).all()  # inf / inf
    want = torch.softmax(torch.from_numpy(z), dim=-1).numpy()
    for got in (qkv.softmax(z), qkv.online_softmax(z, block=1), qkv.online_softmax(z)):
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got, want, rtol=1e-12)
    check_prose("tiled-overflow", *limits, *z)


@settings(deadline=None)
@given(arrays(np.float64, st.integers(1, 40), elements=st.floats(700, 1e6)))
def test_online_softmax_never_overflows_on_huge_scores(z):
    got = qkv.online_softmax(z, block=3)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got.sum(), 1.0, rtol=1e-12)


class _NumPyRecordingBlocks:
    """Stands in for NumPy inside qkv.tiled and records the shape of every array of scores it
    exponentiates (two columns or more: the per-row corrections have one)."""

    def __init__(self):
        self.blocks = []

    def __getattr__(self, name):
        return getattr(np, name)

    def exp(self, x, *args, **kwargs):
        if np.ndim(x) >= 2 and np.shape(x)[-1] >= 2:
            self.blocks.append(np.shape(x))
        return np.exp(x, *args, **kwargs)


@pytest.mark.claim("tiled-flash-2-order")
def test_tiled_attention_finishes_each_query_block_before_the_next_as_flashattention_2(monkeypatch):
    # 5 queries in blocks of 2 (2, 2, 1 rows), 8 keys in blocks of 3 (3, 3, 2 columns)
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(5, 4)), rng.normal(size=(8, 4)), rng.normal(size=(8, 2))
    recorder = _NumPyRecordingBlocks()
    monkeypatch.setattr(qkv.tiled, "np", recorder)
    got = qkv.tiled_attention(q, k, v, block_q=2, block_k=3)
    monkeypatch.undo()
    rows, cols = [2, 2, 1], [3, 3, 2]
    query_blocks_outside = [(r, c) for r in rows for c in cols]  # FlashAttention-2
    key_blocks_outside = [(r, c) for c in cols for r in rows]  # FlashAttention(-1)
    assert query_blocks_outside != key_blocks_outside  # the shapes tell the orders apart
    assert recorder.blocks == query_blocks_outside
    # one number per query row: the log-sum-exp of its scores, by hand
    scores = q @ k.T / 2.0  # √d_k = 2
    assert got.logsumexp.shape == (5,)
    np.testing.assert_allclose(got.logsumexp, np.log(np.exp(scores).sum(axis=1)), rtol=1e-12)


# ---- memory: no T × T array ----------------------------------------------------------------


@pytest.mark.claim("tiled-never-forms-the-matrix")
def test_tiled_attention_allocates_far_less_than_one_score_matrix():
    t, d = 2048, 64
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((t, d), dtype=np.float32) for _ in range(3))
    one_matrix = t * t * 4  # bytes of one float32 T × T array
    tracemalloc.start()
    try:
        qkv.tiled_attention(q, k, v, block_q=256, block_k=256)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # output (t × d) plus a few 256 × 256 blocks: well under a quarter of one matrix
    assert peak < one_matrix / 4, (peak, one_matrix)
    check_prose("tiled-never-forms-the-matrix", t, 256, 256)
    tracemalloc.start()
    try:
        qkv.attention(q, k, v)
        full = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert full >= one_matrix


# ---- linear attention ----------------------------------------------------------------------


def linear_attention_by_the_formula(q, k, v, phi, causal):
    """Row i: Σ_j (φ(q_i)·φ(k_j)) v_j / Σ_j φ(q_i)·φ(k_j), j over all keys or j <= i.
    Written as the O(T²) double loop over queries and keys."""
    fq, fk = phi(q), phi(k)
    out = np.zeros((q.shape[0], v.shape[1]))
    for i in range(q.shape[0]):
        keys = range(i + 1) if causal else range(k.shape[0])
        weights = np.array([fq[i] @ fk[j] for j in keys])
        out[i] = weights @ v[list(keys)] / weights.sum()
    return out


def elu1(x):  # written here from the definition: elu(x) = x if x > 0 else e^x - 1
    return np.vectorize(lambda a: a + 1.0 if a > 0 else float(np.exp(a)))(x)


@pytest.mark.parametrize("causal", [False, True])
@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 12), st.integers(1, 12), st.integers(1, 6), st.integers(1, 4), st.integers(0, 2**32 - 1)
)
def test_linear_attention_is_its_formula(causal, t_q, t_k, d_k, d_v, seed):
    if causal:
        t_k = t_q
    rng = np.random.default_rng(seed)
    q, k, v = rng.normal(size=(t_q, d_k)) * 3, rng.normal(size=(t_k, d_k)) * 3, rng.normal(size=(t_k, d_v))
    got = qkv.linear_attention(q, k, v, causal=causal)
    np.testing.assert_allclose(
        got, linear_attention_by_the_formula(q, k, v, elu1, causal), rtol=1e-10, atol=1e-12
    )
    # another feature map, and batched inputs give each batch its own answer
    square = np.square
    batch = qkv.linear_attention(np.stack([q, -q]), np.stack([k, k]), v, feature_map=square, causal=causal)
    for b, qb in enumerate((q, -q)):
        want = linear_attention_by_the_formula(qb, k, v, square, causal)
        np.testing.assert_allclose(batch[b], want, rtol=1e-9, atol=1e-12)


@pytest.mark.claim("tiled-linear-not-a-softmax")
def test_linear_attention_weights_are_not_softmax_weights():
    # the same query, one key's score raised: softmax gives it nearly all the weight,
    # elu+1 features give it a share that grows only linearly
    q = np.array([[1.0, 0.0]])
    k = np.array([[20.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    softmax_top = qkv.attention(q, k, np.eye(3), scale=False).output[0, 0]
    linear_top = qkv.linear_attention(q, k, np.eye(3))[0, 0]
    assert softmax_top > 0.999_999
    # by hand: φ(q) = (2, 1), φ(k) = (21, 1), (1, 1), (1, 1): weights 43, 3, 3
    np.testing.assert_allclose(linear_top, 43 / 49, rtol=1e-12)
    check_prose("tiled-linear-not-a-softmax", 20, softmax_top, linear_top)


def _linear_weights(lead: float) -> np.ndarray:
    """linear_attention's weights (elu+1 features) for the query (1, 0) over the keys
    (lead, 0), (0, 0), (0, 0): with the values one-hot, the output row is the weights."""
    q = np.array([[1.0, 0.0]])
    k = np.array([[lead, 0.0], [0.0, 0.0], [0.0, 0.0]])
    return qkv.linear_attention(q, k, np.eye(3))[0]


@pytest.mark.claim("tiled-linear-share-grows-slowly")
def test_linear_attention_gives_one_key_nearly_everything_only_for_a_huge_lead():
    def share(c):  # by hand: φ(q) = (2, 1); φ(k) = (c + 1, 1), (1, 1), (1, 1)
        return (2 * c + 3) / (2 * c + 9)

    leads = [20.0, 200.0, 2000.0]
    for c in leads:
        w = _linear_weights(c)
        np.testing.assert_allclose(w[0], share(c), rtol=1e-12)
        # the ratio to another key is (2c + 3) / 3: linear in the lead
        np.testing.assert_allclose(w[0] / w[1], (2 * c + 3) / 3, rtol=1e-12)
    shares = [_linear_weights(c)[0] for c in leads]
    assert shares[0] < shares[1] < shares[2] < 1  # nearly everything, in the end
    # softmax needs a lead of a few units for what linear attention needs thousands for
    softmax_at_10 = qkv.softmax(np.array([10.0, 0.0, 0.0]))[0]
    assert softmax_at_10 > shares[2]
    check_prose("tiled-linear-share-grows-slowly", 3, 9, 0, shares[1], 200, shares[2], 2000)


@pytest.mark.claim("tiled-linear-crossover")
def test_the_flop_counts_cross_at_t_equal_d_plus_one():
    for d in (16, 64, 128):
        counts = [
            (qkv.attention_flops(t, t, d, d), qkv.linear_attention_flops(t, d, d)) for t in range(1, 4 * d)
        ]
        cheaper = [t for t, (soft, lin) in enumerate(counts, start=1) if lin < soft]
        assert cheaper[0] == d + 2 and cheaper == list(range(d + 2, 4 * d))  # equal at d + 1
        t = d + 1
        assert 4 * t * t * d == 4 * t * d * (d + 1)  # the two formulas, by hand
    fewer = (4 * 4096 * 4096 * 64) / (4 * 4096 * 64 * 65)  # by hand at T = 4,096, d = 64
    assert qkv.attention_flops(4096, 4096, 64, 64) / qkv.linear_attention_flops(4096, 64, 64) == fewer
    check_prose("tiled-linear-crossover", 2, 1, 65, 64, 4096, fewer)
