"""Guards for the claims of docs/masks-in-pytorch.md, the deep dive of "Who asks and who
answers": which way round PyTorch's masks are, rows that may attend to nothing, and the
exercise on end padding.

Each fact is computed here from qkv's public functions and from PyTorch on the test's own
data, and where the page prints it (read through ``page_output``) the printed text must
agree, to its rounding.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from pages_support import P, X
from prose import check_prose

import qkv
from qkv import toy


@pytest.fixture(scope="module")
def masks_in_pytorch(page_output):
    return page_output("masks-in-pytorch.md")  # chapter 8's deep dive


@pytest.mark.claim("kinds-exercise-end-padding")
def test_end_padding_changes_no_real_token_under_a_causal_mask(masks_in_pytorch):
    rng = np.random.default_rng(8)
    p = toy.projections(toy.D_K, toy.D_V)
    for length in range(1, 7):  # every split of a random batch, padding of any size
        x = rng.normal(size=(1, 6, 16))
        x[0, length:] *= 1e3
        both = qkv.self_attention(x, p, mask=qkv.causal_mask(6) & qkv.padding_mask([length], 6))
        causal = qkv.self_attention(x, p, mask=qkv.causal_mask(6))
        assert np.array_equal(both.output[0, :length], causal.output[0, :length])
    # the page's batch: the sentence twice, the first with 4 real words and junk after them
    x = np.stack([toy.embeddings(), toy.embeddings()])
    x[0, 4:] = rng.normal(size=(2, 16)) * 50
    both = qkv.self_attention(x, p, mask=qkv.causal_mask(6) & qkv.padding_mask([4, 6], 6))
    causal = qkv.self_attention(x, p, mask=qkv.causal_mask(6))
    gap = np.abs(both.output[0, :4] - causal.output[0, :4]).max()
    assert masks_in_pytorch.values(
        "three_kinds_exercises.py:end_padding",
        "real tokens, causal + padding vs causal alone:",
    ) == [gap]
    check_prose("kinds-exercise-end-padding", gap)


@pytest.fixture(scope="module")
def in_pytorch(page_output):
    """The chapter's deep dive: the masked function in PyTorch, polarity, empty rows."""
    return page_output("masks-in-pytorch.md")


def masked_attention(q, k, v, mask):
    """The page's hand-written PyTorch version: masked_fill with -inf, softmax over keys."""
    scores = q @ k.transpose(-2, -1) / k.shape[-1] ** 0.5
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return weights, weights @ v


# ---- the masked function in PyTorch, and mask conventions ---------------------------------


def random_mask(rng, shape):
    mask = rng.random(shape) < 0.5
    mask[..., rng.integers(shape[-1])] = True  # every query keeps at least one key
    return mask


TORCH_TOLERANCE = 1e-12  # "to better than 10^-12"


@pytest.mark.claim("kinds-torch-agrees")
def test_torch_masked_attention_and_sdpa_agree_with_qkv():
    check_prose("kinds-torch-agrees", TORCH_TOLERANCE)
    Q, K, V = qkv.project(X, P)
    rng = np.random.default_rng(12)
    cases = [(Q, K, V, qkv.causal_mask(6))]  # the page's example
    for shape_q, t_k in [((5, 8), 5), ((2, 3, 4, 8), 7)]:  # with batch and head axes
        k = rng.normal(size=(*shape_q[:-2], t_k, shape_q[-1]))
        v = rng.normal(size=(*shape_q[:-2], t_k, 3))
        cases.append((rng.normal(size=shape_q), k, v, random_mask(rng, (*shape_q[:-1], t_k))))
    for q, k, v, mask in cases:
        want = qkv.attention(q, k, v, mask=mask)
        tq, tk, tv, tm = (torch.from_numpy(a) for a in (q, k, v, mask))
        got_w, got_o = masked_attention(tq, tk, tv, tm)
        assert np.abs(got_w.numpy() - want.weights).max() < TORCH_TOLERANCE
        assert np.abs(got_o.numpy() - want.output).max() < TORCH_TOLERANCE
        sdpa = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm)
        assert np.abs(sdpa.numpy() - want.output).max() < TORCH_TOLERANCE


def test_the_numpy_tab_shows_the_masked_shapes(in_pytorch):
    result = qkv.attention(*qkv.project(X, P), mask=qkv.causal_mask(6))
    assert (
        in_pytorch["masks_in_pytorch.py:masked_numpy"].split()
        == f"weights {result.weights.shape} output {result.output.shape}".split()
    )


@pytest.mark.claim("kinds-mask-convention")
def test_true_means_may_attend_in_qkv_sdpa_and_the_masked_fill_idiom():
    rng = np.random.default_rng(13)
    q, k, v = (rng.normal(size=(4, 8)) for _ in range(3))
    mask = qkv.causal_mask(4)
    weights = qkv.attention(q, k, v, mask=mask).weights
    assert (weights[mask] > 0).all() and (weights[~mask] == 0).all()  # True = attend
    tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
    sdpa = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=torch.from_numpy(mask))
    ones_and_zeros = torch.from_numpy(mask.astype(np.int64))  # 1 = keep, 0 = hide
    hidden = 0  # the idiom's "mask == 0": the value that marks a hidden pair
    check_prose("kinds-mask-convention", hidden)
    scores = (tq @ tk.T / 8**0.5).masked_fill(ones_and_zeros == hidden, float("-inf"))
    idiom = torch.softmax(scores, dim=-1)
    assert np.abs(idiom.numpy() - weights).max() < 1e-12
    assert np.abs(sdpa.numpy() - weights @ v).max() < 1e-12


# ---- a row that may attend to nothing -----------------------------------------------------


def blocked_mask():
    blocked = qkv.causal_mask(6)
    blocked[0, 0] = False  # the first query may attend to nothing at all
    return blocked


@pytest.mark.claim("kinds-fully-masked-qkv")
def test_qkv_refuses_a_row_that_may_attend_to_nothing(in_pytorch):
    with pytest.raises(ValueError, match=r"query row \(0,\)") as refused:
        qkv.attention(*qkv.project(X, P), mask=blocked_mask())
    # the page prints that error, wrapped at 72 columns
    assert in_pytorch["masks_in_pytorch.py:fully_masked"].strip() == textwrap.fill(
        f"qkv: {refused.value}", 72
    )


@pytest.mark.claim("kinds-fully-masked-torch")
def test_torch_gives_nan_by_hand_and_zeros_from_sdpa():
    major_minor = float(".".join(torch.__version__.split(".")[:2]))
    check_prose("kinds-fully-masked-torch", major_minor)  # the version the page names
    q, k, v = (torch.from_numpy(a) for a in qkv.project(X, P))
    blocked = torch.from_numpy(blocked_mask())
    weights, output = masked_attention(q, k, v, blocked)
    assert torch.isnan(weights[0]).all() and torch.isnan(output[0]).all()
    assert not torch.isnan(output[1:]).any()
    sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=blocked)
    assert (sdpa[0] == 0).all()
    np.testing.assert_allclose(sdpa[1:].numpy(), output[1:].numpy(), rtol=1e-12)


@pytest.mark.claim("kinds-mha-polarity")
def test_multihead_attention_reads_true_as_hidden():
    causal = qkv.causal_mask(6)  # True = may attend, as in qkv and SDPA
    torch.manual_seed(0)  # the page's module
    mha = torch.nn.MultiheadAttention(embed_dim=16, num_heads=1, batch_first=True)
    x = torch.from_numpy(X).float()[None]
    with torch.no_grad():
        _, backwards = mha(x, x, x, attn_mask=torch.from_numpy(causal))
        _, forwards = mha(x, x, x, attn_mask=torch.from_numpy(~causal))
    backwards, forwards = backwards[0], forwards[0]
    # the weights qkv's causal attention gives with the module's own projections
    w_q, w_k, _ = mha.in_proj_weight.detach().double().numpy().reshape(3, 16, 16)
    b_q, b_k, _ = mha.in_proj_bias.detach().double().numpy().reshape(3, 16)
    xs = x[0].double().numpy()
    want = qkv.attention(xs @ w_q.T + b_q, xs @ w_k.T + b_k, xs, mask=causal).weights
    np.testing.assert_allclose(forwards.numpy(), want, rtol=1e-4, atol=1e-6)
    # given True = attend, each token sees only later tokens and the last sees nothing
    later = np.triu(np.ones((6, 6), dtype=bool), k=1)
    assert (backwards.numpy()[:-1][~later[:-1]] == 0).all()
    assert (backwards.numpy()[:-1][later[:-1]] > 0).all()
    assert torch.isnan(backwards[-1]).all()
