"""Guards for the claims of docs/masks-in-pytorch.md, the deep dive of "Who asks and who
answers": which way round PyTorch's masks are, rows that may attend to nothing, and the
exercise on end padding.

Each fact is computed here from qkv's public functions and from PyTorch on the test's own
data, and where the page prints it (read through ``page_output``) the printed text must
agree, to its rounding.
"""

from __future__ import annotations

import re
import textwrap

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from pages_support import P, X
from prose import check_prose
from support import numbers

import qkv
from qkv import toy

DECODER = toy.embeddings(("t1", "t2", "t3"), seed=7)  # the three decoder positions it prints
PRINTED = 5e-4 + 1e-12  # the page prints weights to 3 decimals


def weight_table(text: str) -> tuple[list[str], list[str], np.ndarray]:
    """The one labelled weight table a block prints: column labels, row labels, values."""
    lines = text.splitlines()
    rows = [i for i, line in enumerate(lines) if re.fullmatch(r"\s*\S+(\s+\d\.\d{3})+", line)]
    assert rows and rows == list(range(rows[0], rows[-1] + 1)), f"no single table in:\n{text}"
    columns = lines[rows[0] - 1].split()
    labels = [lines[i].split()[0] for i in rows]
    return columns, labels, np.array([numbers(lines[i].split(None, 1)[1]) for i in rows])


def printed_ints(text: str) -> np.ndarray:
    """An integer array printed by NumPy (``[[1 0] [1 1]]``), back as an array."""
    rows = re.findall(r"\[([\d ]+)\]", text)
    return np.array([[int(x) for x in row.split()] for row in rows])


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


# ---- the toy in every role, a padded batch, two widths (moved from chapter 8) ----------


def test_the_self_attention_table_is_the_toy_head_on_the_toy_sentence(masks_in_pytorch):
    text = masks_in_pytorch["three_kinds.py:self"]
    columns, labels, printed = weight_table(text)
    assert columns == labels == list(toy.SENTENCE)
    assert text.splitlines()[0] == f"self-attention weights: {(len(toy.SENTENCE),) * 2}"
    np.testing.assert_allclose(printed, qkv.self_attention(X, P).weights, rtol=0, atol=PRINTED)


# ---- padding (chapter 8's pointer leads here) ---------------------------------------------


def padded_batch(junk):
    """The page's batch: the sentence, and its first four words padded with ``junk``."""
    return np.stack([X, np.vstack([X[:4], junk])])


PAD = qkv.padding_mask([6, 4], t=6)

JUNKS = [
    np.random.default_rng(seed).normal(size=(2, 16)) * scale
    for seed, scale in [(8, 1.0), (9, 1e3), (10, 1e-3)]
]


@pytest.mark.claim("kinds-padding-zeros")
def test_padded_keys_get_exactly_zero_weight(masks_in_pytorch):
    np.testing.assert_array_equal(PAD, np.array([[[1] * 6], [[1] * 4 + [0] * 2]], dtype=bool))
    for junk in JUNKS:
        weights = qkv.self_attention(padded_batch(junk), P, mask=PAD).weights  # (2, 6, 6)
        assert (weights[1][:, 4:] == 0).all()
        assert (weights[0] > 0).all()  # the unpadded sequence loses nothing
    text = masks_in_pytorch["three_kinds.py:padding"]
    assert text.splitlines()[0].startswith(f"padding mask {PAD.shape}")
    np.testing.assert_array_equal(printed_ints(text), PAD[:, 0].astype(int))
    columns, labels, printed = weight_table(text)
    assert columns == labels == [*toy.SENTENCE[:4], "<pad>", "<pad>"]
    assert (printed[:, 4:] == 0).all()
    assert masks_in_pytorch.flag("three_kinds.py:padding", "weights on padding all exactly 0:")
    check_prose(
        "kinds-padding-zeros",
        max(qkv.self_attention(padded_batch(junk), P, mask=PAD).weights[1][:, 4:].max() for junk in JUNKS),
    )


@pytest.mark.claim("kinds-padding-no-leak")
def test_padding_content_never_reaches_real_tokens(masks_in_pytorch):
    short = qkv.self_attention(X[:4], P)  # the four words alone, unpadded
    for junk in JUNKS:  # whatever the padding holds
        padded = qkv.self_attention(padded_batch(junk), P, mask=PAD)
        np.testing.assert_allclose(padded.output[1, :4], short.output, rtol=1e-12)
        np.testing.assert_allclose(padded.weights[1, :4, :4], short.weights, rtol=1e-12)
    # the page's real rows are the unpadded sequence's weights, zeros appended
    _, _, printed = weight_table(masks_in_pytorch["three_kinds.py:padding"])
    np.testing.assert_allclose(printed[:4, :4], short.weights, rtol=0, atol=PRINTED)
    assert (
        masks_in_pytorch.line("three_kinds.py:padding", "real tokens' outputs")
        == "real tokens' outputs equal the unpadded ones: True"
    )


@pytest.mark.claim("kinds-padding-queries")
def test_padded_queries_still_attend_to_the_real_tokens(masks_in_pytorch):
    for junk in JUNKS:
        padded = qkv.self_attention(padded_batch(junk), P, mask=PAD)
        pad_rows = padded.weights[1][4:]  # (2, 6): the two padding positions as queries
        np.testing.assert_allclose(pad_rows.sum(axis=-1), 1.0, rtol=1e-12)
        assert (pad_rows[:, 4:] == 0).all() and np.isfinite(padded.output[1, 4:]).all()
        if np.abs(junk).max() < 10:  # (a query 1000 times too long puts all on one key)
            assert (pad_rows[:, :4] > 0).all()
    _, labels, printed = weight_table(masks_in_pytorch["three_kinds.py:padding"])
    assert labels[4:] == ["<pad>", "<pad>"]
    assert (printed[4:, :4] > 0).all()
    np.testing.assert_allclose(printed[4:].sum(axis=-1), 1.0, rtol=0, atol=6 * PRINTED)


@pytest.mark.claim("kinds-mask-broadcast")
def test_causal_and_padding_masks_combine_by_broadcasting(masks_in_pytorch):
    both = qkv.causal_mask(6) & PAD
    assert both.shape == (2, 6, 6)
    for b, length in enumerate([6, 4]):
        for i in range(6):
            for j in range(6):
                assert both[b, i, j] == (j <= i and j < length)
    weights = qkv.self_attention(padded_batch(JUNKS[0]), P, mask=both).weights
    assert (weights[~both] == 0).all() and (weights[both] > 0).all()
    check_prose(
        "kinds-mask-broadcast", *qkv.causal_mask(6).shape, *PAD.shape, *both.shape, weights[~both].max()
    )
    assert (
        masks_in_pytorch.line("three_kinds.py:padding", "causal and padding together:")
        == f"causal and padding together: {both.shape}"
    )


@pytest.mark.claim("kinds-cross-shape")
def test_the_page_cross_attention_is_3_by_6_with_rows_of_one(masks_in_pytorch):
    cross = qkv.cross_attention(DECODER, X, P)
    assert cross.weights.shape == (3, 6) and cross.output.shape == (3, toy.D_V)
    text = masks_in_pytorch["three_kinds.py:cross"]
    assert text.splitlines()[0].split() == f"cross-attention weights: {(3, 6)} output: {(3, toy.D_V)}".split()
    columns, labels, printed = weight_table(text)
    # named by position, not by words: random weights under a sentence and its translation
    # read as an alignment
    assert columns == [f"s{i}" for i in range(1, 7)] and labels == ["t1", "t2", "t3"]
    np.testing.assert_allclose(printed, cross.weights, rtol=0, atol=PRINTED)
    np.testing.assert_allclose(printed.sum(axis=-1), 1.0, rtol=0, atol=6 * PRINTED)
    assert numbers(masks_in_pytorch.line("three_kinds.py:cross", "row sums:")) == [1.0] * 3
    check_prose("kinds-cross-shape", *cross.weights.shape, cross.weights.sum(axis=-1).max())


@pytest.mark.claim("kinds-cross-widths")
def test_cross_attention_across_two_widths_gives_every_matrix_its_own_side(masks_in_pytorch):
    """The printed shapes obey the sentence's rules: W_Q reads the decoder's width, W_K and
    W_V the encoder's (the toy sentence's, 16), W_Q and W_K share d_k, and W_O returns the
    output to the decoder's width; the widths differ, as the example says."""
    printed = {}
    for name in ("W_Q", "W_K", "W_V", "W_O"):
        ((rows, cols),) = re.findall(
            r"\((\d+), (\d+)\)", masks_in_pytorch.line("three_kinds.py:cross_widths", name + " ")
        )
        printed[name] = (int(rows), int(cols))
    d_dec, d_k = printed["W_Q"]
    d_enc, d_v = printed["W_K"][0], printed["W_V"][1]
    assert d_enc == X.shape[-1] != d_dec
    assert printed["W_K"] == (d_enc, d_k) and printed["W_V"] == (d_enc, d_v)
    assert printed["W_O"] == (d_v, d_dec)  # one head
    t_q = 3
    rng = np.random.default_rng(0)
    mats = {name: rng.normal(size=shape) for name, shape in printed.items()}
    decoder = rng.normal(size=(t_q, d_dec))
    result = qkv.attention(decoder @ mats["W_Q"], X @ mats["W_K"], X @ mats["W_V"])
    assert result.weights.shape == (t_q, len(X)) and result.output.shape == (t_q, d_v)
    projected = result.output @ mats["W_O"]
    assert numbers(masks_in_pytorch.line("three_kinds.py:cross_widths", "weights")) == [t_q, len(X), t_q, d_v]
    assert numbers(masks_in_pytorch.line("three_kinds.py:cross_widths", "after W_O"))[-2:] == list(
        projected.shape
    )
    check_prose(
        "kinds-cross-widths",
        *printed["W_Q"],
        *printed["W_K"],
        d_k,
        *printed["W_V"],
        *printed["W_O"],
        *result.output.shape,
        *projected.shape,
    )


# ---- the chapter's predict exercises, moved here -----------------------------------------


@pytest.mark.claim("kinds-exercise-cross-shapes")
def test_five_readers_of_six_words_get_5_by_6_weights_and_5_by_4_output(masks_in_pytorch):
    reader = np.random.default_rng(30).normal(size=(5, toy.D_MODEL))  # any five positions
    cross = qkv.cross_attention(reader, toy.embeddings(), toy.projections(toy.D_K, toy.D_V))
    assert cross.weights.shape == (len(reader), len(toy.SENTENCE))  # one row per asker
    assert cross.output.shape == (len(reader), toy.D_V)
    assert np.allclose(cross.weights.sum(axis=-1), 1.0)
    assert (
        masks_in_pytorch["three_kinds_exercises.py:cross_shapes"].split()
        == f"weights {cross.weights.shape} output {cross.output.shape}".split()
    )
    check_prose("kinds-exercise-cross-shapes", *cross.weights.shape, toy.D_V)
