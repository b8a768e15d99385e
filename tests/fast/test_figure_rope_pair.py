"""The rope-pair figure of chapter 9: what its ALT text states, checked against its data()
with the rotation worked out by hand (a pair (x, y) turned by angle a is
(x cos a - y sin a, x sin a + y cos a))."""

from __future__ import annotations

import numpy as np
from qkv_site.figures import rope_pair

import qkv


def turn(xy, angle):
    x, y = xy
    return np.array([x * np.cos(angle) - y * np.sin(angle), x * np.sin(angle) + y * np.cos(angle)])


def test_each_step_along_the_sentence_turns_the_pair_by_one_radian():
    d = rope_pair.data()
    assert d.positions == tuple(range(6))  # "positions 0 to 5"
    # one pair (d = 2) turns by position * base**0 = one radian per position
    assert qkv.rope_angles([1], 2)[0, 0] == 1.0
    want = np.stack([turn(rope_pair.QUERY, p) for p in d.positions])
    np.testing.assert_allclose(d.turned, want, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.diff(d.angles), 1.0, rtol=0, atol=1e-12)  # "the same angle, one radian"
    np.testing.assert_allclose(np.linalg.norm(d.turned, axis=-1), 1.0, rtol=0, atol=1e-12)


def test_a_query_and_a_key_two_apart_keep_their_angle_and_their_dot_product():
    d = rope_pair.data()
    assert d.cases == ((2, 0), (5, 3))  # "a query at position 2 and a key at position 0 ..."
    (m1, n1), (m2, n2) = d.cases
    assert m2 > m1 and n2 > n1  # "both arrows are turned further on the right"
    assert m1 - n1 == m2 - n2 == 2  # "only the offset of 2 counts"
    q = [turn(rope_pair.QUERY, m) for m, _ in d.cases]
    k = [turn(rope_pair.KEY, n) for _, n in d.cases]
    np.testing.assert_allclose(d.queries, q, rtol=0, atol=1e-12)
    np.testing.assert_allclose(d.keys, k, rtol=0, atol=1e-12)
    # the key starts 0.6 rad ahead of the query, so after turning they are 2 - 0.6 apart
    start = np.arctan2(rope_pair.KEY[1], rope_pair.KEY[0])
    np.testing.assert_allclose(d.between, [2 - start] * 2, rtol=0, atol=1e-12)
    assert f"{d.between[0]:.1f}" == f"{d.between[1]:.1f}" == "1.4"  # "the same, 1.4 radians"
    by_hand = [float(a @ b) for a, b in zip(q, k, strict=True)]
    np.testing.assert_allclose(d.scores, by_hand, rtol=0, atol=1e-12)
    assert abs(d.scores[0] - d.scores[1]) < 1e-12  # "and so is their dot product"
