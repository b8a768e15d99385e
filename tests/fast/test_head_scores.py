"""qkv.lab.head_scores: the targets of each kind of head, the score and its even-spread baseline,
checked on small hand-made cases."""

from __future__ import annotations

import numpy as np
import pytest

from qkv.lab import head_scores


def test_targets_of_each_kind_by_hand():
    ids = [5, 6, 7, 5, 6]  # 5 and 6 come back
    want = {
        "first": [(1, 0), (2, 0), (3, 0), (4, 0)],
        "previous": [(1, 0), (2, 1), (3, 2), (4, 3)],
        "duplicate": [(3, 0), (4, 1)],  # the earlier 5 and 6
        "induction": [(3, 1), (4, 2)],  # what followed them: 6 and 7
    }
    for kind, pairs in want.items():
        found = [tuple(map(int, p)) for p in np.argwhere(head_scores.targets(kind, ids))]
        assert found == pairs, kind
    with pytest.raises(ValueError, match="kind must be one of"):
        head_scores.targets("sideways", ids)
    with pytest.raises(ValueError, match="at least 2"):
        head_scores.targets("first", [3])


def test_an_immediate_repeat_makes_the_query_its_own_induction_target():
    # "a a": the token after the earlier copy of a (position 0) is position 1, the query
    assert np.argwhere(head_scores.targets("induction", [4, 4])).tolist() == [[1, 1]]


def test_score_is_the_mean_weight_on_the_targets_over_the_queries_that_have_any():
    ids = [5, 6, 7, 5, 6]
    t = len(ids)
    weights = np.tril(np.arange(1.0, t * t + 1).reshape(t, t))
    weights /= weights.sum(-1, keepdims=True)
    dup = head_scores.targets("duplicate", ids)
    assert head_scores.score(weights, dup) == pytest.approx((weights[3, 0] + weights[4, 1]) / 2)
    stacked = np.stack([weights, np.eye(t)])  # a second head that looks only at itself
    np.testing.assert_allclose(head_scores.score(stacked, dup), [(weights[3, 0] + weights[4, 1]) / 2, 0])
    with pytest.raises(ValueError, match="no query"):
        head_scores.score(weights, head_scores.targets("duplicate", [1, 2, 3, 4, 5]))


def test_baseline_is_the_score_of_uniform_causal_weights():
    ids = [1, 2, 3, 1, 2, 3, 4, 5, 6, 7]
    t = len(ids)
    uniform = np.tril(np.ones((t, t))) / np.arange(1, t + 1)[:, None]
    for kind in head_scores.KINDS:
        aims = head_scores.targets(kind, ids)
        assert head_scores.baseline(aims) == pytest.approx(head_scores.score(uniform, aims))
    # key 1 over queries 2..T: (1/2 + ... + 1/T) / (T - 1)
    expected = sum(1 / i for i in range(2, t + 1)) / (t - 1)
    assert head_scores.baseline(head_scores.targets("first", ids)) == pytest.approx(expected)


def test_repeated_random_tokens_are_distinct_within_a_half_and_written_twice():
    ids = head_scores.repeated_random_tokens(3, 12, seed=0)
    assert ids.shape == (3, 24)
    assert np.array_equal(ids[:, :12], ids[:, 12:])
    assert all(len(set(row[:12])) == 12 for row in ids)
    assert ids.min() >= 1000 and ids.max() < 20000
    assert np.array_equal(ids, head_scores.repeated_random_tokens(3, 12, seed=0))
    with pytest.raises(ValueError, match="length"):
        head_scores.repeated_random_tokens(1, 1, seed=0)
