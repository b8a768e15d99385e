"""qkv.lab.scaling: the measurement helpers behind chapter 6 and its figures."""

from __future__ import annotations

import numpy as np
import pytest

import qkv
from qkv.lab.scaling import draw_queries_keys, jacobian_norm, saturation, score_samples, score_std


def test_draws_are_seeded_and_independent_across_d_k():
    a = np.concatenate([q for q, _ in draw_queries_keys(4, 5000, seed=3)])
    b = np.concatenate([q for q, _ in draw_queries_keys(4, 5000, seed=3)])
    assert np.array_equal(a, b)
    c = np.concatenate([q for q, _ in draw_queries_keys(4, 5000, seed=4)])
    assert not np.array_equal(a, c)
    # the first component at d_k = 1 and at d_k = 4 come from different streams
    one = np.concatenate([q for q, _ in draw_queries_keys(1, 5000, seed=3)])
    assert abs(np.corrcoef(one[:, 0, 0], a[:, 0, 0])[0, 1]) < 0.05


def test_chunks_cover_every_draw_with_the_right_shapes():
    chunks = list(draw_queries_keys(3, 5000, n_keys=4))
    assert sum(q.shape[0] for q, _ in chunks) == 5000
    assert all(q.shape[1:] == (1, 3) and k.shape[1:] == (4, 3) for q, k in chunks)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "3"])
def test_bad_counts_are_refused_by_name(bad):
    with pytest.raises(ValueError, match="d_k"):
        list(draw_queries_keys(bad, 10))
    with pytest.raises(ValueError, match="n_draws"):
        list(draw_queries_keys(4, bad))
    with pytest.raises(ValueError, match="n_keys"):
        saturation(4, n_keys=bad)


def test_score_samples_apply_qkvs_scale_factor():
    raw = score_samples(16, scale=False, n_draws=100)
    np.testing.assert_allclose(score_samples(16, scale=True, n_draws=100), raw / 4, rtol=1e-14)
    np.testing.assert_allclose(score_samples(16, scale=0.5, n_draws=100), raw / 2, rtol=1e-14)
    assert score_std(16, scale=False, n_draws=100) == pytest.approx(raw.std())


@pytest.mark.parametrize("n", [2, 3, 6, 10])
def test_jacobian_norm_of_uniform_weights_is_sqrt_n_minus_1_over_n(n):
    assert jacobian_norm(np.full(n, 1 / n)) == pytest.approx(np.sqrt(n - 1) / n)
    assert jacobian_norm(np.eye(n)[0]) == 0


def test_saturation_measures_qkv_attention_weights():
    s = saturation(8, scale=True, n_keys=5, n_draws=300, seed=2)
    assert all(field.shape == (300,) for field in s)
    q, k = next(draw_queries_keys(8, 300, n_keys=5, seed=2))
    w = qkv.attention(q, k, np.zeros((300, 5, 1))).weights[:, 0]
    np.testing.assert_array_equal(s.max_weight, w.max(axis=-1))
    np.testing.assert_allclose(s.entropy, qkv.entropy(w))
    # d(weights)/dq by finite differences for the first draw
    eps, factor = 1e-6, qkv.scale_factor(True, 8)
    grad = np.stack(
        [
            (
                qkv.softmax(((q[0, 0] + eps * e) @ k[0].T) * factor)
                - qkv.softmax(((q[0, 0] - eps * e) @ k[0].T) * factor)
            )
            / (2 * eps)
            for e in np.eye(8)
        ],
        axis=1,
    )  # (n_keys, d_k)
    assert s.query_gradient_norm[0] == pytest.approx(np.linalg.norm(grad), rel=1e-6)
