"""check_merged_scores (the two-products chapter's exercise): it accepts the scores through
W_Q W_Kᵀ and names each typical wrong way of writing them.

Each wrong function below is a mistake a reader makes, written out; each test asserts the
diagnosis (the words that name the mistake) and that the fix waits for ``hint()``.
"""

from __future__ import annotations

import numpy as np
from test_exercises import fails_with, passes

import qkv
from qkv.exercises import check_merged_scores


def merged_scores(x, w_q, w_k):
    merged = w_q @ w_k.T  # (d_model, d_model): all the scores depend on
    return x @ merged @ x.T / np.sqrt(w_q.shape[1])


def test_qkvs_scores_and_the_merged_ones_pass():
    passes(check_merged_scores(merged_scores))

    def through_qkv(x, w_q, w_k):  # Q Kᵀ / √d_k from qkv's own projection
        q, k, _ = qkv.project(x, qkv.Projections(w_q, w_k, w_k))
        return q @ k.T / np.sqrt(w_q.shape[1])

    passes(check_merged_scores(through_qkv))


def test_the_merged_matrix_in_the_wrong_order_gives_the_transpose():
    def keys_first(x, w_q, w_k):
        return x @ (w_k @ w_q.T) @ x.T / np.sqrt(w_q.shape[1])

    fails_with(check_merged_scores(keys_first), "transpose of the right ones", fix=["w_k @ w_q.T"])


def test_scores_left_undivided_are_named():
    def undivided(x, w_q, w_k):
        return x @ (w_q @ w_k.T) @ x.T

    fails_with(
        check_merged_scores(undivided), "times too large", "not divided at all", fix=["Divide by √d_k"]
    )


def test_dividing_by_the_width_of_the_merged_matrix_is_named():
    def by_d_model(x, w_q, w_k):
        merged = w_q @ w_k.T
        return x @ merged @ x.T / np.sqrt(merged.shape[0])

    fails_with(check_merged_scores(by_d_model), "divided by √d_model = 2.449", fix=["w_q.shape[1]"])


def test_dividing_by_d_k_itself_is_named():
    def by_d_k(x, w_q, w_k):
        return x @ (w_q @ w_k.T) @ x.T / w_q.shape[1]

    fails_with(check_merged_scores(by_d_k), "divided by d_k = 4, not by its square root")


def test_the_words_on_the_wrong_sides_give_the_wrong_shape():
    def words_outside_in(x, w_q, w_k):  # (d_model, T) @ (T, d_model): a d_model x d_model table
        return x.T @ x @ (w_q @ w_k.T) / np.sqrt(w_q.shape[1])

    fails_with(
        check_merged_scores(words_outside_in), "shape (6, 6), not (T, T) = (5, 5)", fix=["x @ merged @ x.T"]
    )


def test_a_merged_matrix_of_the_wrong_size_raises_and_says_so():
    def inner_product(x, w_q, w_k):  # w_q.T @ w_k is d_k x d_k, which x cannot multiply
        return x @ (w_q.T @ w_k) @ x.T / np.sqrt(w_q.shape[1])

    fails_with(check_merged_scores(inner_product), "Your function raised ValueError", fix=["w_q @ w_k.T"])


def test_returning_the_weights_instead_of_the_scores_is_named():
    def weights(x, w_q, w_k):
        return qkv.softmax(merged_scores(x, w_q, w_k))

    fails_with(
        check_merged_scores(weights), "adds up to 1: you returned weights", fix=["softmax comes after"]
    )


def test_a_function_returning_nothing_is_told_to_return():
    def forgets_to_return(x, w_q, w_k):
        merged_scores(x, w_q, w_k)

    fails_with(check_merged_scores(forgets_to_return), "returned None", fix=["return statement"])
