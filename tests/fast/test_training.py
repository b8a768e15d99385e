"""qkv.lab.training: the hand-written forward and backward pass of one head on associative recall,
checked against PyTorch's autograd (the reference) and against finite differences."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from prose import check_prose

from qkv.lab.training import Head, Sweep, backward, forward, init_head, recall_batch, run_sweep, train


def torch_loss(w_q, w_k, batch, factor):
    """The head written the plain way, keys projected one by one, for autograd."""
    x, v, query, target = (torch.from_numpy(a) for a in batch[:4])
    q = query @ w_q.T  # (B, d_k)
    k = x @ w_k.T  # (B, T, d_k)
    scores = factor * torch.einsum("btd,bd->bt", k, q)
    weights = torch.softmax(scores, dim=-1)
    output = torch.einsum("bt,btv->bv", weights, v)
    return ((output - target) ** 2).mean()


@pytest.mark.parametrize("d_k", [4, 16, 64])
@pytest.mark.parametrize("scale", [True, False])
def test_loss_and_gradients_match_torch_autograd(d_k, scale):
    rng = np.random.default_rng(d_k)
    head, batch = init_head(rng, d_model=8, d_k=d_k), recall_batch(rng, 7, 5, 8, 3)
    factor = 1 / np.sqrt(d_k) if scale else 1.0
    fwd = forward(head, batch, factor)
    grads = backward(head, batch, fwd, factor)
    w_q = torch.tensor(head.w_q, requires_grad=True)
    w_k = torch.tensor(head.w_k, requires_grad=True)
    loss = torch_loss(w_q, w_k, batch, factor)
    loss.backward()
    np.testing.assert_allclose(fwd.loss, loss.item(), rtol=1e-12)
    np.testing.assert_allclose(grads.w_q, w_q.grad.numpy(), rtol=1e-9, atol=1e-14)
    np.testing.assert_allclose(grads.w_k, w_k.grad.numpy(), rtol=1e-9, atol=1e-14)
    assert np.abs(grads.w_q).max() > 1e-6  # a gradient that is all zeros would match trivially


def test_gradients_match_finite_differences():
    rng = np.random.default_rng(3)
    head, batch = init_head(rng, d_model=6, d_k=5), recall_batch(rng, 4, 7, 6, 2)
    factor = 1 / np.sqrt(5)
    grads = backward(head, batch, forward(head, batch, factor), factor)
    eps = 1e-6
    for which in (0, 1):  # w_q, then w_k
        numeric = np.zeros_like(head[which])
        for index in np.ndindex(head[which].shape):
            bumped = []
            for sign in (1, -1):
                w = head[which].copy()
                w[index] += sign * eps
                moved = Head(w, head.w_k) if which == 0 else Head(head.w_q, w)
                bumped.append(forward(moved, batch, factor).loss)
            numeric[index] = (bumped[0] - bumped[1]) / (2 * eps)
        np.testing.assert_allclose(grads[which], numeric, rtol=1e-6, atol=1e-9)


def test_heads_stacked_along_a_leading_axis_are_independent():
    rng = np.random.default_rng(5)
    batch = recall_batch(rng, 6, 4, 8, 3)
    heads = [init_head(rng, 8, 16) for _ in range(3)]
    stacked = Head(np.stack([h.w_q for h in heads]), np.stack([h.w_k for h in heads]))
    fwd = forward(stacked, batch, 0.25)
    grads = backward(stacked, batch, fwd, 0.25)
    for i, h in enumerate(heads):
        one = forward(h, batch, 0.25)
        np.testing.assert_allclose(fwd.loss[i], one.loss, rtol=1e-12)
        np.testing.assert_allclose(grads.w_q[i], backward(h, batch, one, 0.25).w_q, rtol=1e-10)


def test_train_steps_are_plain_gradient_descent():
    # one step by hand, with the data and initialisation train() documents, for both arms
    lr, d_k, t = 0.5, 16, 8
    curves = train(d_k, t, [lr], seed=4, steps=1, batch_size=8, eval_every=1, n_eval=64)
    head = init_head(np.random.default_rng([4, d_k]), 16, d_k)
    batch = recall_batch(np.random.default_rng([4, t]), 8, t, 16, 16)
    held_out = recall_batch(np.random.default_rng([4, t, 1]), 64, t, 16, 16)
    for arm, factor in ((0, 1.0), (1, 1 / np.sqrt(d_k))):
        grads = backward(head, batch, forward(head, batch, factor), factor)
        stepped = Head(head.w_q - lr * grads.w_q, head.w_k - lr * grads.w_k)
        expected = [forward(head, held_out, factor).loss, forward(stepped, held_out, factor).loss]
        np.testing.assert_allclose(curves.loss[arm, 0], expected, rtol=1e-12)


def test_a_trained_scaled_head_learns_recall():
    # the task is learnable: a scaled head at a middling rate gets most queries right
    curves = train(16, 8, [3.0], seed=0, steps=200, batch_size=32, eval_every=200)
    assert curves.accuracy[1, 0, 0] < 0.4 < 0.8 < curves.accuracy[1, 0, -1]
    assert curves.loss[1, 0, -1] < 0.5 * curves.loss[1, 0, 0]


def test_a_diverging_head_is_marked_inf_not_nan():
    curves = train(256, 8, [1e6], seed=0, steps=20, batch_size=8, eval_every=10)
    assert not np.isnan(curves.loss).any()
    assert np.isfinite(curves.loss[:, :, 0]).all()  # before the first step


def test_sweep_trains_both_arms_from_the_same_start():
    small = Sweep(d_ks=(16,), lengths=(8,), seeds=(1,), learning_rates=(1.0, 3.0), steps=5, eval_every=5)
    runs = run_sweep(small)
    assert set(runs) == {(16, 8, 1)}
    assert runs[16, 8, 1].loss.shape == (2, 2, 2)  # (arm, rate, eval)
    # before the first step the rates agree; the arms differ by the factor 1/4 on the scores
    start = runs[16, 8, 1].loss[:, :, 0]
    assert start[0, 0] == start[0, 1] and start[1, 0] == start[1, 1]
    assert start[0, 0] != start[1, 0]


@pytest.mark.claim("scale-training-equivalent")
def test_the_unscaled_head_is_the_scaled_one_at_a_larger_rate_from_larger_weights():
    # Without the division, gradient descent at rate lr from W is, step for step, the
    # scaled head's at rate lr·√d_k from W·d_k^(1/4): the scores and the loss are the same,
    # and the weights stay d_k^(1/4) apart. Derived, then checked on the training code.
    d_k, lr, steps = 64, 0.05, 25
    grow = d_k**0.25
    plain = init_head(np.random.default_rng(3), d_model=16, d_k=d_k)
    scaled = Head(plain.w_q * grow, plain.w_k * grow)
    data = np.random.default_rng(4)
    for _ in range(steps):
        batch = recall_batch(data, 32, 8, 16, 16)
        f_plain, f_scaled = forward(plain, batch, 1.0), forward(scaled, batch, 1 / np.sqrt(d_k))
        np.testing.assert_allclose(f_scaled.loss, f_plain.loss, rtol=1e-9)
        g_plain, g_scaled = (
            backward(plain, batch, f_plain, 1.0),
            backward(scaled, batch, f_scaled, 1 / np.sqrt(d_k)),
        )
        plain = Head(plain.w_q - lr * g_plain.w_q, plain.w_k - lr * g_plain.w_k)
        big = lr * np.sqrt(d_k)
        scaled = Head(scaled.w_q - big * g_scaled.w_q, scaled.w_k - big * g_scaled.w_k)
        np.testing.assert_allclose(scaled.w_q, grow * plain.w_q, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(scaled.w_k, grow * plain.w_k, rtol=1e-9, atol=1e-12)
    # the same rate for both is not the same run: the equivalence needs the larger rate
    other = Head(plain.w_q * grow, plain.w_k * grow)
    batch = recall_batch(data, 32, 8, 16, 16)
    g = backward(other, batch, forward(other, batch, 1 / np.sqrt(d_k)), 1 / np.sqrt(d_k))
    g_plain = backward(plain, batch, forward(plain, batch, 1.0), 1.0)
    assert not np.allclose(other.w_q - lr * g.w_q, grow * (plain.w_q - lr * g_plain.w_q), rtol=1e-6)
    check_prose("scale-training-equivalent")


def _torch_run(head, d_k, *, scaled, lr, optimiser, train_values, steps=25, seed=4):
    """Train one head in PyTorch on the recall batches seeded by ``seed``; the per-step loss.

    ``head`` is the start (W_Q, W_K); ``train_values`` also learns W_V, a d_v × d_v matrix on
    the values (started at the identity, so the first forward pass is the fixed-values one);
    the target stays the pair's given value."""
    w_q, w_k = (torch.tensor(w, requires_grad=True) for w in head)
    params = [w_q, w_k]
    w_v = torch.eye(16, dtype=torch.float64, requires_grad=True)
    if train_values:
        params.append(w_v)
    opt = (
        torch.optim.SGD(params, lr=lr)
        if optimiser == "gd"
        else torch.optim.Adam(params, lr=lr, eps=1e-14)  # eps far below every gradient here
    )
    factor = 1 / np.sqrt(d_k) if scaled else 1.0
    data, losses = np.random.default_rng(seed), []
    for _ in range(steps):
        batch = recall_batch(data, 32, 8, 16, 16)
        v = torch.from_numpy(batch.v) @ w_v  # (B, T, d_v): the values, through W_V
        x, query = torch.from_numpy(batch.x), torch.from_numpy(batch.query)
        scores = factor * torch.einsum("btd,bd->bt", x @ w_k.T, query @ w_q.T)
        output = torch.einsum("bt,btv->bv", torch.softmax(scores, dim=-1), v)
        loss = ((output - torch.from_numpy(batch.target)) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return np.array(losses)


@pytest.mark.claim("scale-training-equivalence-conditions")
def test_the_larger_rate_matches_only_under_plain_gd_with_the_values_fixed():
    # Derived: the unscaled head from W equals the scaled one from c·W, c = d_k^(1/4), when
    # the scaled head's step moves c·W as far as c times the unscaled step. Plain GD: the
    # scaled gradient is 1/c of the unscaled one, so its rate must be c² = √d_k times larger.
    # Adam divides the gradient's size out, so there it is c = d_k^(1/4) times larger. A
    # learned value matrix sees no factor at all, so no common rate can match its steps.
    d_k, lr = 64, 0.05
    c = d_k**0.25
    plain = init_head(np.random.default_rng(3), d_model=16, d_k=d_k)
    grown = Head(plain.w_q * c, plain.w_k * c)

    def gap(optimiser, factor, train_values):
        unscaled = _torch_run(plain, d_k, scaled=False, lr=lr, optimiser=optimiser, train_values=train_values)
        scaled = _torch_run(
            grown, d_k, scaled=True, lr=lr * factor, optimiser=optimiser, train_values=train_values
        )
        return np.abs(scaled - unscaled).max() / np.abs(unscaled).max()

    assert gap("gd", np.sqrt(d_k), train_values=False) < 1e-9  # the page's setting: identical
    assert gap("gd", np.sqrt(d_k), train_values=True) > 1e-3  # values trained: the runs part
    assert gap("adam", np.sqrt(d_k), train_values=False) > 1e-2  # Adam at √d_k: they part
    assert gap("adam", c, train_values=False) < 1e-6  # Adam at d_k^(1/4): the same run
    assert min(gap("adam", f, train_values=False) for f in (2.0, 3.0)) > 1e-2  # and only there
    check_prose("scale-training-equivalence-conditions")
