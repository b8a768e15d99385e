"""The checker of a gradient step on W_Q: the hand-built toy learns where "drank" looks.

The loss of one query ``i`` and one target key ``j`` is ``-log weights[i, j]``, with
``weights = softmax((x @ w_q) @ (x @ w_k).T / √d_k)``; one step of gradient descent
moves ``w_q`` by ``-lr`` times its gradient. Only ``W_Q`` is trained, ``W_K`` is fixed.
"""

from __future__ import annotations

import numpy as np

from qkv.dot_product import softmax
from qkv.exercises._verdict import (
    RANDOM_CASES,
    CheckResult,
    Wrong,
    as_array,
    call,
    close,
    verdict,
)
from qkv.toy import FEATURES, SENTENCE, feature_embeddings, hand_built_projections

TOY_LR, TOY_STEPS = 3.0, 10  # ten steps of 3: drank's weight on milk back to the hand-built one's


def _weights(w_q, w_k, x, i):
    """Query i's weights over every key, (T,)."""
    k = x @ w_k
    return softmax((x[i] @ w_q) @ k.T / np.sqrt(w_k.shape[1]))


def _loss(w_q, w_k, x, i, j) -> float:
    return float(-np.log(_weights(w_q, w_k, x, i)[j]))


def _gradient(w_q, w_k, x, i, j, d_scores=None):
    """∂(-log weights[i, j]) / ∂W_Q, (d_model, d_k), by the chain rule.

    ``d_scores`` replaces ∂loss/∂score (``weights - onehot(j)``) to build the usual mistakes.
    """
    k = x @ w_k  # (T, d_k)
    p = _weights(w_q, w_k, x, i)
    if d_scores is None:
        d_scores = p - np.eye(len(p))[j]  # softmax then -log: weights minus the one-hot target
    d_q = k.T @ d_scores / np.sqrt(w_k.shape[1])  # (d_k,): the score is q · k_j / √d_k
    return np.outer(x[i], d_q)  # q = x_i @ W_Q, so ∂q/∂W_Q pairs x_i with ∂loss/∂q


def toy_start() -> np.ndarray:
    """The hand-built W_Q with drank's taste for liquids (verb → liquid) removed."""
    w_q = hand_built_projections().w_q.copy()
    w_q[FEATURES.index("verb"), FEATURES.index("liquid")] = 0.0
    return w_q


def _cases(rng):
    """(w_q, w_k, x, i, j, lr, description): a random head first, then the toy, then more."""
    yield (
        rng.normal(size=(6, 3)),
        rng.normal(size=(6, 3)),
        rng.normal(size=(4, 6)),
        1,
        2,
        0.5,
        "4 tokens, d_model = 6, d_k = 3, query 1, target key 2, lr = 0.5",
    )
    p = hand_built_projections()
    drank, milk = SENTENCE.index("drank"), SENTENCE.index("milk")
    yield (
        toy_start(),
        p.w_k,
        feature_embeddings(),
        drank,
        milk,
        TOY_LR,
        f"the hand-built toy, query drank, target milk, lr = {TOY_LR:g}",
    )
    for _ in range(RANDOM_CASES // 2):
        t, d_model, d_k = (int(n) for n in rng.integers(1, 7, size=3))
        i, j = (int(n) for n in rng.integers(0, t, size=2))
        lr = float(rng.choice([0.1, 0.5, 1.0, 2.0]))
        yield (
            rng.normal(size=(d_model, d_k)),
            rng.normal(size=(d_model, d_k)),
            rng.normal(size=(t, d_model)),
            i,
            j,
            lr,
            f"{t} tokens, d_model = {d_model}, d_k = {d_k}, query {i}, target key {j}, lr = {lr:g}",
        )


def _case(fn, w_q, w_k, x, i, j, lr, what: str) -> None:
    d_model, d_k = w_q.shape
    shapes = (
        "W_Q is (d_model, d_k), and so is its gradient: q = x_i @ W_Q, so ∂loss/∂W_Q = "
        "np.outer(x_i, ∂loss/∂q)"
    )
    got = as_array(call(fn, f"with {what}", w_q.copy(), w_k.copy(), x.copy(), i, j, lr, hint=shapes), what)
    grad = _gradient(w_q, w_k, x, i, j)
    want = w_q - lr * grad
    if got.shape != want.shape:
        if got.shape == (d_k, d_model):
            raise Wrong(
                f"With {what}, your new W_Q has shape {got.shape}, (d_k, d_model), not W_Q's "
                f"{w_q.shape}: your gradient is transposed.",
                "q = x_i @ W_Q, so ∂loss/∂W_Q = np.outer(x_i, ∂loss/∂q), d_model by d_k.",
            )
        raise Wrong(
            f"With {what}, your new W_Q has shape {got.shape}, not W_Q's {w_q.shape}.",
            "Return W_Q after the step, W_Q - lr * ∂loss/∂W_Q.",
        )
    if close(got, want):
        return
    before, right_after = _loss(w_q, w_k, x, i, j), _loss(want, w_k, x, i, j)
    with np.errstate(all="ignore"):
        after = _loss(got, w_k, x, i, j) if np.isfinite(got).all() else float("nan")
    losses = (
        f"the loss -log weight goes from {before:.4g} to {after:.4g} where the right step takes it "
        f"to {right_after:.4g}"
    )
    if close(got, w_q):
        raise Wrong(
            f"With {what}, your step leaves W_Q as it was.",
            "Return W_Q - lr * ∂loss/∂W_Q, a new array (or the old one changed in place).",
        )
    if close(got, grad):
        raise Wrong(
            f"With {what}, you returned the gradient itself, not W_Q after the step.",
            "Return W_Q - lr * gradient.",
        )
    step, right = (got - w_q).ravel(), (-lr * grad).ravel()
    size = float(right @ right)
    if size > 0:
        ratio = float(step @ right) / size
        if close(got - w_q, ratio * (-lr * grad)):  # along the gradient, by the wrong amount
            for factor, symptom, fix in (
                (
                    -1.0,
                    f"your step goes up the gradient, not down: {losses}",
                    "Gradient descent subtracts: W_Q - lr * gradient.",
                ),
                (
                    1.0 / lr,
                    f"your step is {ratio:.4g} times the right one, 1 / lr: the learning rate "
                    f"lr = {lr:g} is not used",
                    "Multiply the gradient by lr before subtracting it.",
                ),
                (
                    lr,
                    f"your step is {ratio:.4g} times the right one, lr = {lr:g} once too many",
                    "Multiply the gradient by lr once.",
                ),
                (
                    float(np.sqrt(d_k)),
                    f"your step is {ratio:.4g} times the right one, √d_k = {np.sqrt(d_k):.4g}: the "
                    f"gradient misses the 1/√d_k by which the scores were divided",
                    "The score is q · k / √d_k, so ∂score/∂q = k / √d_k.",
                ),
                (
                    1.0 / float(np.sqrt(d_k)),
                    f"your step is {ratio:.4g} times the right one, 1/√d_k = {1 / np.sqrt(d_k):.4g}: "
                    f"the gradient is divided by √d_k twice",
                    "The score is q · k / √d_k, so ∂score/∂q = k / √d_k, once.",
                ),
            ):
                if not np.isclose(factor, 1.0) and np.isclose(ratio, factor, rtol=1e-6):
                    raise Wrong(f"With {what}, {symptom}.", fix)
            raise Wrong(
                f"With {what}, your step points along the gradient but is {ratio:.4g} times the right "
                f"one: {losses}.",
                "The step is lr times the gradient of -log weight, nothing more.",
            )
    p = _weights(w_q, w_k, x, i)
    onehot = np.eye(len(p))[j]
    for d_scores, symptom, fix in (
        (
            p,
            "your step lowers every score in proportion to its weight and never raises the "
            "target's: the gradient misses the -1 at the target key",
            "∂(-log weights[j]) / ∂scores = weights - onehot(j).",
        ),
        (
            -onehot,
            "your step raises the target's score alone and ignores the weights the other keys "
            "take: the gradient misses the softmax's part",
            "∂(-log weights[j]) / ∂scores = weights - onehot(j), not -onehot(j).",
        ),
    ):
        if close(got, w_q - lr * _gradient(w_q, w_k, x, i, j, d_scores)):
            raise Wrong(f"With {what}, {symptom}.", fix)
    if not np.allclose(np.delete(got - w_q, np.flatnonzero(x[i]), axis=0), 0.0, atol=1e-12) and np.any(
        x[i] == 0
    ):
        raise Wrong(
            f"With {what}, your step changes rows of W_Q that query {i}'s input never reads "
            f"(its zero entries), so they cannot change its loss.",
            "∂loss/∂W_Q = np.outer(x_i, ∂loss/∂q): only the rows where x_i is not 0 move.",
        )
    raise Wrong(
        f"With {what}, your step is not the gradient step: {losses}.",
        "∂loss/∂W_Q = np.outer(x_i, K.T @ (weights - onehot(j)) / √d_k), with K = x @ W_K; "
        "the step is W_Q - lr * that.",
    )


def _toy_after(fn) -> tuple[float, float, str]:
    """drank's weight on milk before and after TOY_STEPS of ``fn``, and where drank looks then."""
    p, x = hand_built_projections(), feature_embeddings()
    drank, milk = SENTENCE.index("drank"), SENTENCE.index("milk")
    w_q = toy_start()
    before = float(_weights(w_q, p.w_k, x, drank)[milk])
    for _ in range(TOY_STEPS):
        w_q = np.asarray(call(fn, "on the toy", w_q.copy(), p.w_k.copy(), x.copy(), drank, milk, TOY_LR))
    after = _weights(w_q, p.w_k, x, drank)
    return before, float(after[milk]), SENTENCE[int(after.argmax())]


def check_gradient_step(fn, hint: bool = False) -> CheckResult:
    """Check your ``step(w_q, w_k, x, i, j, lr) -> new w_q``: one gradient step on ``W_Q``.

    ``x`` of shape ``(T, d_model)`` holds the inputs; ``w_q`` and ``w_k`` of shape
    ``(d_model, d_k)`` project them (``q = x @ w_q``, ``k = x @ w_k``). The loss is
    ``-log weights[i, j]``, query ``i``'s weight on key ``j``, with ``weights =
    softmax(q @ k.T / √d_k)``; your step returns ``w_q - lr * ∂loss/∂w_q`` (``w_k`` is
    not trained). The checker compares it with the chain rule's step on random heads and
    on the hand-built toy (:func:`qkv.toy.hand_built_projections`) whose ``W_Q`` has lost
    drank's taste for liquids, then runs ten of your steps there: drank comes to look at
    milk again.

    Parameters
    ----------
    fn : callable
        Your step, called as ``fn(w_q, w_k, x, i, j, lr)``.
    hint : bool
        ``True`` adds the fix to a failure's message; without it the message names
        the mistake only (``result.hint()`` gives the fix afterwards).

    Returns
    -------
    CheckResult

    Raises
    ------
    ValueError
        If ``fn`` cannot be called.

    Examples
    --------
    >>> def uphill(w_q, w_k, x, i, j, lr):
    ...     k = x @ w_k
    ...     p = softmax((x[i] @ w_q) @ k.T / np.sqrt(w_k.shape[1]))
    ...     d_q = k.T @ (p - np.eye(len(p))[j]) / np.sqrt(w_k.shape[1])
    ...     return w_q + lr * np.outer(x[i], d_q)
    >>> check_gradient_step(uphill)
    With 4 tokens, d_model = 6, d_k = 3, query 1, target key 2, lr = 0.5, your step
    goes up the gradient, not down: the loss -log weight goes from 5.743 to 20.46
    where the right step takes it to 0.0725. Run the check again with hint=True for
    the fix.
    >>> check_gradient_step(uphill).hint()
    Gradient descent subtracts: W_Q - lr * gradient.
    """

    def run(f):
        for case in _cases(np.random.default_rng(10)):
            _case(f, *case)
        run.toy = _toy_after(f)

    result = verdict("check_gradient_step", fn, run, "", hint=hint)
    if not result.ok:
        return result
    before, after, top = run.toy
    return CheckResult(
        True,
        f"Passed: your step matches the gradient step on {RANDOM_CASES // 2 + 1} random heads and "
        f"on the hand-built toy; there, {TOY_STEPS} of your steps with lr = {TOY_LR:g} raise "
        f"drank's weight on milk from {before:.3f} to {after:.3f}, and drank now looks most at "
        f"{top}.",
    )
