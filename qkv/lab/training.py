"""Training one attention head by gradient descent, by hand: does √d_k help it learn?

The task is associative recall. A sequence holds ``T`` pairs: an input ``x_i`` (what the
key is computed from) and a value ``v_i``. The query's input is one of the ``x_i``; the
right output is that pair's value. The head computes

    q = W_Q x_query,   k_i = W_K x_i,   w = softmax(c · (k_i · q)),   output = Σ_i w_i v_i

with ``c = 1/√d_k`` (scaled) or ``c = 1`` (unscaled), and the loss is the mean squared
error between output and target. The values are given and not learned: the loss then
depends only on where the head looks, so learning ``W_Q`` and ``W_K`` (where to look) is
all there is to learn, and any difference between the two arms is the scale's.

Forward and backward pass are written out, one step per line, and checked against PyTorch's
autograd and finite differences in ``tests/fast/test_training.py``. The functions broadcast
over leading axes of ``W_Q`` and ``W_K``, so several heads (one per learning rate) train
side by side on the same batches.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from qkv._checks import whole_number


class Recall(NamedTuple):
    """A batch of associative-recall sequences."""

    x: np.ndarray
    """(B, T, d_model): the inputs the keys are computed from."""
    v: np.ndarray
    """(B, T, d_v): the values."""
    query: np.ndarray
    """(B, d_model): the query's input, equal to one of the ``x`` of its sequence."""
    target: np.ndarray
    """(B, d_v): the value paired with that ``x``."""
    answer: np.ndarray
    """(B,): the position of that pair."""


def recall_batch(rng, batch_size: int, t: int, d_model: int, d_v: int) -> Recall:
    """Draw ``batch_size`` sequences of ``t`` pairs with N(0, 1) components.

    Examples
    --------
    >>> b = recall_batch(np.random.default_rng(0), batch_size=4, t=6, d_model=8, d_v=3)
    >>> print(b.x.shape, b.v.shape, b.query.shape, b.target.shape)
    (4, 6, 8) (4, 6, 3) (4, 8) (4, 3)
    >>> print(np.array_equal(b.query[0], b.x[0, b.answer[0]]))
    True
    """
    for name, value in (("batch_size", batch_size), ("t", t), ("d_model", d_model), ("d_v", d_v)):
        whole_number(name, value, minimum=1)
    rng = np.random.default_rng(rng)
    x = rng.standard_normal((batch_size, t, d_model))  # (B, T, d_model)
    v = rng.standard_normal((batch_size, t, d_v))  # (B, T, d_v)
    answer = rng.integers(t, size=batch_size)  # (B,)
    rows = np.arange(batch_size)
    return Recall(x, v, x[rows, answer], v[rows, answer], answer)


class Head(NamedTuple):
    """The learned matrices of one head (or a stack of heads, along leading axes)."""

    w_q: np.ndarray
    """(..., d_k, d_model): q = W_Q x."""
    w_k: np.ndarray
    """(..., d_k, d_model): k = W_K x."""


def init_head(rng, d_model: int, d_k: int) -> Head:
    """W_Q and W_K with N(0, 1/d_model) entries: unit-variance q and k from unit-variance x.

    Examples
    --------
    >>> head = init_head(np.random.default_rng(0), d_model=16, d_k=64)
    >>> x = np.random.default_rng(1).standard_normal((4000, 16))
    >>> print(head.w_q.shape, round(float((x @ head.w_k.T).var()), 1))
    (64, 16) 1.0
    """
    whole_number("d_model", d_model, minimum=1), whole_number("d_k", d_k, minimum=1)
    rng = np.random.default_rng(rng)
    std = 1 / np.sqrt(d_model)
    return Head(std * rng.standard_normal((d_k, d_model)), std * rng.standard_normal((d_k, d_model)))


def _checked(head: Head, batch: Recall) -> Head:
    w_q, w_k = (np.asarray(w, dtype=float) for w in head)
    if w_q.ndim < 2 or w_q.shape != w_k.shape or w_q.shape[-1] != batch.x.shape[-1]:
        raise ValueError(
            f"w_q and w_k must both have shape (..., d_k, d_model={batch.x.shape[-1]}), "
            f"got {w_q.shape} and {w_k.shape}"
        )
    return Head(w_q, w_k)


class Forward(NamedTuple):
    """What the forward pass keeps for the backward pass."""

    q_back: np.ndarray  # (..., B, d_model): x_queryᵀ W_Qᵀ W_K
    weights: np.ndarray  # (..., B, T)
    output: np.ndarray  # (..., B, d_v)
    loss: np.ndarray  # (...): mean squared error over the batch and the d_v components


def forward(head: Head, batch: Recall, factor: float) -> Forward:
    """Run the head on a batch: scores, softmax weights, output and loss.

    ``factor`` multiplies the scores: ``1/√d_k`` with the scale, 1 without (an array of
    shape (..., 1, 1) gives each stacked head its own). The score
    ``q · k_i = (W_Q x_query) · (W_K x_i) = x_queryᵀ (W_Qᵀ W_K) x_i`` depends on the two
    matrices only through ``W_Qᵀ W_K`` (d_model × d_model), so that product is formed once
    and no query or key of width d_k is ever built: the cost does not grow with d_k.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> head, batch = init_head(rng, 8, 4), recall_batch(rng, 5, 6, 8, 3)
    >>> f = forward(head, batch, factor=1 / 2)
    >>> print(f.weights.shape, f.weights.sum(axis=-1).round(12))
    (5, 6) [1. 1. 1. 1. 1.]
    """
    w_q, w_k = _checked(head, batch)
    m = np.swapaxes(w_q, -1, -2) @ w_k  # (..., d_model, d_model): W_Qᵀ W_K
    q_back = batch.query @ m  # (..., B, d_model)
    scores = factor * (batch.x @ q_back[..., None])[..., 0]  # (..., B, T): x_i · q_back
    scores = scores - scores.max(axis=-1, keepdims=True)  # softmax ignores a shift
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)  # (..., B, T)
    output = (weights[..., None, :] @ batch.v)[..., 0, :]  # (..., B, d_v): Σ_i w_i v_i
    loss = ((output - batch.target) ** 2).mean(axis=(-2, -1))  # (...)
    return Forward(q_back, weights, output, loss)


def backward(head: Head, batch: Recall, fwd: Forward, factor: float) -> Head:
    """Gradients of the loss with respect to W_Q and W_K, by the chain rule, step by step.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> head, batch = init_head(rng, 8, 4), recall_batch(rng, 5, 6, 8, 3)
    >>> grads = backward(head, batch, forward(head, batch, 1 / 2), 1 / 2)
    >>> print(grads.w_q.shape == head.w_q.shape, grads.w_k.shape == head.w_k.shape)
    True True
    """
    head = _checked(head, batch)
    if fwd.weights.shape[-2:] != batch.x.shape[:2]:
        raise ValueError(
            f"fwd must come from this batch: weights {fwd.weights.shape}, batch x {batch.x.shape}"
        )
    n = batch.target.shape[-2] * batch.target.shape[-1]  # the loss averages over B · d_v
    d_output = 2 * (fwd.output - batch.target) / n  # (..., B, d_v)
    d_weights = (batch.v @ d_output[..., None])[..., 0]  # (..., B, T): v_i · d_output
    # through softmax: d_s = J d_w with J = diag(w) - w wᵀ
    d_scores = fwd.weights * (d_weights - (fwd.weights * d_weights).sum(axis=-1, keepdims=True))
    # scores = factor · x q_back
    d_q_back = factor * (d_scores[..., None, :] @ batch.x)[..., 0, :]  # (..., B, d_model)
    # q_back = x_query M, summed over the batch
    d_m = batch.query.T @ d_q_back  # (..., d_model, d_model)
    # M = W_Qᵀ W_K
    d_w_q = head.w_k @ np.swapaxes(d_m, -1, -2)  # (..., d_k, d_model)
    d_w_k = head.w_q @ d_m  # (..., d_k, d_model)
    return Head(d_w_q, d_w_k)


def recall_accuracy(fwd: Forward, batch: Recall) -> np.ndarray:
    """Share of queries whose largest weight is on the right key, shape (...).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> head, batch = init_head(rng, 8, 4), recall_batch(rng, 500, 6, 8, 3)
    >>> print(recall_accuracy(forward(head, batch, 1 / 2), batch) < 0.5)  # untrained
    True
    """
    if fwd.weights.shape[-2:] != batch.x.shape[:2]:
        raise ValueError(
            f"fwd must come from this batch: weights {fwd.weights.shape}, batch x {batch.x.shape}"
        )
    return (fwd.weights.argmax(axis=-1) == batch.answer).mean(axis=-1)


class Curves(NamedTuple):
    """Learning curves of heads trained side by side: without and with the scale, one
    head per learning rate."""

    steps: np.ndarray
    """(n_evals,): the steps after which the heads were evaluated (0: before training)."""
    loss: np.ndarray
    """(2, n_learning_rates, n_evals): held-out loss, unscaled [0] and scaled [1]; inf
    once a head diverged."""
    accuracy: np.ndarray
    """(2, n_learning_rates, n_evals): recall accuracy on the held-out sequences."""


def train(
    d_k: int,
    t: int,
    learning_rates,
    seed: int,
    steps: int,
    batch_size: int,
    d_model: int = 16,
    d_v: int = 16,
    eval_every: int = 10,
    n_eval: int = 512,
) -> Curves:
    """Train heads by plain gradient descent on fresh batches, without and with the scale,
    one head per learning rate.

    Every head starts from the same W_Q and W_K (seeded by ``[seed, d_k]``) and sees the
    same batches (seeded by ``[seed, t]``); the held-out sequences are seeded by
    ``[seed, t, 1]``. The two arms differ only in the factor on the scores.

    Examples
    --------
    >>> c = train(16, 8, [1.0, 3.0], seed=0, steps=40, batch_size=16, eval_every=20)
    >>> print(c.steps, c.loss.shape, bool((c.loss[1, :, -1] < c.loss[1, :, 0]).all()))
    [ 0 20 40] (2, 2, 3) True
    """
    for name, value in (("steps", steps), ("eval_every", eval_every), ("n_eval", n_eval)):
        whole_number(name, value, minimum=1)
    rates = np.asarray(learning_rates, dtype=float)
    if rates.ndim != 1 or rates.size == 0 or not (rates > 0).all():
        raise ValueError(
            f"learning_rates must be a non-empty list of positive numbers, got {learning_rates!r}"
        )
    factor = np.array([1.0, 1 / np.sqrt(d_k)])[:, None, None, None]  # (2, 1, 1, 1): arms
    one = init_head(np.random.default_rng([seed, d_k]), d_model, d_k)
    shape = (2, rates.size)  # (arm, learning rate)
    head = Head(*(np.broadcast_to(w, (*shape, *w.shape)).copy() for w in one))  # (2, L, d_k, d_model)
    lr = rates[None, :, None, None]  # (1, L, 1, 1)
    data = np.random.default_rng([seed, t])
    held_out = recall_batch(np.random.default_rng([seed, t, 1]), n_eval, t, d_model, d_v)
    evals, losses, accuracies = [], [], []
    for step in range(steps + 1):
        if step % eval_every == 0:
            with np.errstate(all="ignore"):
                f = forward(head, held_out, factor)
            finite = np.isfinite(f.loss)  # (2, L)
            evals.append(step)
            losses.append(np.where(finite, f.loss, np.inf))
            accuracies.append(np.where(finite, recall_accuracy(f, held_out), 0.0))
        if step == steps:
            break
        batch = recall_batch(data, batch_size, t, d_model, d_v)
        with np.errstate(all="ignore"):  # a diverging head overflows; it is marked inf
            grads = backward(head, batch, forward(head, batch, factor), factor)
        head = Head(head.w_q - lr * grads.w_q, head.w_k - lr * grads.w_k)
    return Curves(np.array(evals), np.moveaxis(losses, 0, -1), np.moveaxis(accuracies, 0, -1))


class Sweep(NamedTuple):
    """The settings of a training sweep: every (d_k, T, seed) is trained at every rate.

    :data:`SCALE_SWEEP` is the one the scale is tested with, fixed before it was first run.
    """

    d_ks: tuple
    lengths: tuple  # T: pairs per sequence
    seeds: tuple
    learning_rates: tuple
    steps: int
    batch_size: int = 32
    d_model: int = 16  # ≤ every d_k, so W_Qᵀ W_K can reach every matrix at every d_k
    d_v: int = 16
    eval_every: int = 10
    n_eval: int = 512


# --8<-- [start:scale_sweep]
SCALE_SWEEP = Sweep(
    d_ks=(16, 64, 256),
    lengths=(16, 64),  # T: pairs per sequence
    seeds=(0, 1, 2),
    learning_rates=(0.1, 0.3, 1.0, 3.0, 10.0, 30.0),
    steps=300,
    batch_size=32,
    d_model=16,  # <= every d_k, so W_Q^T W_K can reach every matrix at every d_k
    d_v=16,
    eval_every=10,
    n_eval=512,
)
# --8<-- [end:scale_sweep]
"""The sweep that tests the scale: 108 heads (3 widths, 2 lengths, 3 seeds, 6 rates), with
and without the division, its settings fixed in code before its first run."""


def run_sweep(sweep: Sweep) -> dict:
    """Train every head of ``sweep``: ``(d_k, T, seed) -> Curves`` over both arms and its
    learning rates.

    Examples
    --------
    >>> small = Sweep(d_ks=(16,), lengths=(8,), seeds=(0, 1), learning_rates=(1.0,), steps=20)
    >>> print(sorted(run_sweep(small)))
    [(16, 8, 0), (16, 8, 1)]
    """
    return {
        (d_k, t, seed): train(
            d_k,
            t,
            sweep.learning_rates,
            seed,
            sweep.steps,
            sweep.batch_size,
            sweep.d_model,
            sweep.d_v,
            sweep.eval_every,
            sweep.n_eval,
        )
        for d_k in sweep.d_ks
        for t in sweep.lengths
        for seed in sweep.seeds
    }
