"""check_scaled_scores (qkv.exercises): it accepts q @ k.T / √d_k and names the mistake of each
typical wrong one, the wrong divisor first, without handing over the fix."""

from __future__ import annotations

import re

import numpy as np
from test_exercises import fails_with, passes

import qkv
from qkv.exercises import check_scaled_scores


def scaled_scores(q, k):
    return q @ k.T / np.sqrt(q.shape[-1])


def test_qkvs_scores_pass_and_the_sentence_reports_their_spread():
    result = check_scaled_scores(scaled_scores)
    passes(result)
    # the spread the sentence reports: near 1 scaled, near √64 = 8 raw
    ((scaled, raw),) = re.findall(
        r"deviation ([\d.]+), where the raw scores spread with (\d+\.\d+)", result.message
    )
    assert abs(float(scaled) - 1) < 0.05 and abs(float(raw) - 8) < 0.4


def test_scaling_the_queries_before_the_product_passes():
    passes(check_scaled_scores(lambda q, k: (q / q.shape[-1] ** 0.5) @ k.T))


def test_dividing_by_d_k_is_named():
    fails_with(
        check_scaled_scores(lambda q, k: q @ k.T / q.shape[-1]),
        "divided by d_k = 16",
        "not by √d_k = 4",
        fix=["square root of d_k"],
    )


def test_d_k_to_the_power_one_half_without_brackets_is_named():
    # d_k ** 1/2 is (d_k ** 1) / 2: the scores come out divided by 2 d_k
    fails_with(
        check_scaled_scores(lambda q, k: q @ k.T / q.shape[-1] ** 1 / 2),
        "divided by 2 d_k = 32",
        "d_k ** 1/2 is (d_k ** 1) / 2",
        fix=["with the brackets"],
    )


def test_raw_scores_are_named():
    fails_with(check_scaled_scores(lambda q, k: q @ k.T), "raw scores", fix=["square root of d_k"])


def test_the_root_of_the_number_of_keys_is_named():
    fails_with(
        check_scaled_scores(lambda q, k: q @ k.T / np.sqrt(k.shape[0])),
        "√T_k = 2.236, the root of the number of keys",
        fix=["square root of d_k"],
    )


def test_a_multiplication_by_the_root_is_named():
    fails_with(
        check_scaled_scores(lambda q, k: q @ k.T * np.sqrt(q.shape[-1])),
        "multiplied by √d_k = 4",
        fix=["square root of d_k"],
    )


def test_scores_turned_over_are_named():
    fails_with(
        check_scaled_scores(lambda q, k: k @ q.T / np.sqrt(q.shape[-1])),
        "shape (5, 3), not (3, 5)",
        "one row per key",
        fix=["q @ k.T"],
    )


def test_weights_instead_of_scores_are_named():
    fails_with(
        check_scaled_scores(lambda q, k: qkv.softmax(scaled_scores(q, k))),
        "each row of what you return sums to 1",
        "not scores",
        fix=["Stop before softmax"],
    )


def test_scores_off_by_a_constant_name_no_divisor():
    fails_with(
        check_scaled_scores(lambda q, k: scaled_scores(q, k) + 0.1),
        "off by 0.1",
        "no divisor of q · k we tried",
        fix=["q[i] · k[j] / √d_k"],
    )


def test_an_unfinished_function_is_reported_as_unfinished():
    def unfinished(q, k):
        raise NotImplementedError("your code here")

    result = check_scaled_scores(unfinished)
    assert not result.ok
    assert result.message.startswith("Your function raised NotImplementedError: your code here")
