"""qkv.attention agrees with PyTorch's scaled_dot_product_attention, the reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import qkv

SHAPES = [
    # (leading dims, Tq, Tk, d_k, d_v)
    ((), 4, 4, 8, 8),
    ((), 3, 7, 16, 5),
    ((2,), 5, 9, 4, 4),
    ((2, 3), 6, 6, 32, 16),
    ((3, 4), 1, 10, 64, 64),
]


def make(shape, dtype, seed):
    lead, t_q, t_k, d_k, d_v = shape
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(*lead, t_q, d_k)).astype(dtype)
    k = rng.normal(size=(*lead, t_k, d_k)).astype(dtype)
    v = rng.normal(size=(*lead, t_k, d_v)).astype(dtype)
    return q, k, v


def random_mask(shape, seed):
    """A boolean mask with at least one allowed key per query."""
    lead, t_q, t_k, _, _ = shape
    rng = np.random.default_rng(seed)
    mask = rng.random((*lead, t_q, t_k)) < 0.6
    mask[..., 0] = True
    return mask


def torch_reference(q, k, v, mask=None, scale=None):
    with torch.no_grad():
        out = F.scaled_dot_product_attention(
            torch.from_numpy(q),
            torch.from_numpy(k),
            torch.from_numpy(v),
            attn_mask=None if mask is None else torch.from_numpy(mask),
            scale=scale,
        )
    return out.numpy()


TOLERANCE = {np.float64: {"rtol": 1e-6, "atol": 1e-12}, np.float32: {"rtol": 1e-4, "atol": 1e-5}}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("scale", [True, 0.05])
def test_output_matches_torch_sdpa(dtype, shape, masked, scale):
    q, k, v = make(shape, dtype, seed=len(shape[0]) + shape[1])
    mask = random_mask(shape, seed=7) if masked else None
    got = qkv.attention(q, k, v, mask=mask, scale=scale).output
    want = torch_reference(q, k, v, mask, scale=None if scale is True else scale)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, want, **TOLERANCE[dtype])


def test_causal_mask_matches_torch_is_causal():
    q, k, v = make(((2,), 6, 6, 8, 8), np.float64, seed=3)
    got = qkv.attention(q, k, v, mask=qkv.causal_mask(6)).output
    with torch.no_grad():
        want = F.scaled_dot_product_attention(*map(torch.from_numpy, (q, k, v)), is_causal=True)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-6, atol=1e-12)


def test_weights_match_torch_softmax_of_scaled_scores():
    q, k, v = make(((), 5, 7, 16, 4), np.float64, seed=4)
    scores = torch.from_numpy(q) @ torch.from_numpy(k).T / 4.0
    want = torch.softmax(scores, dim=-1).numpy()
    np.testing.assert_allclose(qkv.attention(q, k, v).weights, want, rtol=1e-6, atol=1e-15)


def test_padding_mask_matches_torch_with_broadcast_mask():
    q, k, v = make(((2,), 3, 5, 4, 4), np.float64, seed=5)
    mask = qkv.padding_mask([2, 5], 5)  # (2, 1, 5)
    got = qkv.attention(q, k, v, mask=mask).output
    want = torch_reference(q, k, v, mask)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-12)
