"""Guards for the claims of docs/keys-vs-values.md, "What a key decides, what a value
carries".

Each test derives its fact itself, from qkv's public API applied to ``qkv.toy`` data, from
hand-written NumPy or from algebra, and then checks that what the page prints under its
executed blocks (``page_output``) agrees with it, to the printed rounding. No expected value
is copied from the printed output, and no test reads a name a snippet defines.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from pages_support import (
    DRANK,
    DRANK_ON_MILK,
    E_4,
    FROM,
    MILK,
    WORDS,
    assert_printed,
    named_numbers,
    seeds,
    widths,
)
from prose import check_prose

import qkv
from qkv import toy

# ---- 3. What a key decides, what a value carries -------------------------------------


@pytest.fixture(scope="module")
def shown_kv(page_output):
    return page_output("keys-vs-values.md")


@pytest.fixture(scope="module")
def new_value(hand_built):
    """V with milk's value changed to hand over "container" instead of "dairy"."""
    v_new = hand_built[2].copy()
    v_new[MILK] = np.eye(toy.D_V)[toy.VALUE_COLUMNS.index("container")]
    return v_new


@pytest.fixture(scope="module")
def wiped_key(hand_built):
    """K with milk's key wiped, so it no longer shows "liquid"."""
    k_new = hand_built[1].copy()
    k_new[MILK] = 0
    return k_new


@pytest.mark.claim("kv-sep-value-keeps-weights")
@settings(max_examples=50, deadline=None)
@given(seeds, widths, widths, st.integers(1, 8))
def test_values_never_touch_the_weights(seed, d_k, d_v, t):
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(t, d_k)), rng.normal(size=(t, d_k))
    one, other = rng.normal(size=(t, d_v)), rng.normal(size=(t, d_v))
    np.testing.assert_array_equal(qkv.attention(q, k, one).weights, qkv.attention(q, k, other).weights)


@pytest.mark.claim("kv-sep-value-keeps-weights")
def test_flipping_milks_value_leaves_the_weights_bit_for_bit(shown_kv, hand_built, new_value):
    q, k, _, base = hand_built
    np.testing.assert_array_equal(qkv.attention(q, k, new_value).weights, base.weights)
    assert shown_kv.flag("keys_vs_values.py:change_value", "weights identical:")


@pytest.mark.claim("kv-sep-value-changes-output")
def test_a_new_value_for_milk_moves_every_row_by_its_weight_on_milk(shown_kv, hand_built, new_value):
    q, k, v, base = hand_built
    changed = qkv.attention(q, k, new_value).output
    # Only row `milk` of V changed; row i of the output moves by w[i, milk] times that change.
    expected = base.output + np.outer(base.weights[:, MILK], new_value[MILK] - v[MILK])
    np.testing.assert_allclose(changed, expected, rtol=1e-10, atol=1e-12)
    assert (np.abs(changed - base.output).max(axis=-1) > 0).all()  # every row reads milk a bit
    received = dict(zip(toy.VALUE_COLUMNS, changed[DRANK], strict=True))
    assert received["dairy"] == 0
    assert received["container"] - base.output[DRANK, toy.VALUE_COLUMNS.index("container")] == pytest.approx(
        DRANK_ON_MILK, rel=1e-12
    )
    before = named_numbers(shown_kv.line("keys_vs_values.py:setup", "drank receives:"))
    after = named_numbers(shown_kv.line("keys_vs_values.py:change_value", "drank receives:"))
    assert after == {c: pytest.approx(x, abs=5e-3) for c, x in received.items()}
    assert before == {
        c: pytest.approx(x, abs=5e-3) for c, x in zip(toy.VALUE_COLUMNS, base.output[DRANK], strict=True)
    }
    dairy, container = (toy.VALUE_COLUMNS.index(c) for c in ("dairy", "container"))
    check_prose(
        "kv-sep-value-changes-output",
        base.output[DRANK, dairy] - changed[DRANK, dairy],
        changed[DRANK, container] - base.output[DRANK, container],
    )


@pytest.mark.claim("kv-sep-key-moves-weights")
def test_wiping_milks_key_drops_drank_weight_to_that_of_an_unrelated_word(shown_kv, hand_built, wiped_key):
    q, _, v, base = hand_built
    after = qkv.attention(q, wiped_key, v)
    # drank's scores are now 4/√8 for she and 0 for the five others: softmax written out
    on_milk = 1 / (E_4 + 5)
    assert after.weights[DRANK, MILK] == pytest.approx(on_milk, rel=1e-12)
    assert after.weights[DRANK, MILK] == pytest.approx(after.weights[DRANK, FROM], rel=1e-12)
    assert base.weights[DRANK, MILK] == pytest.approx(DRANK_ON_MILK, rel=1e-12)
    check_prose("kv-sep-key-moves-weights", base.weights[DRANK, MILK], on_milk)
    assert_printed(
        shown_kv.line("keys_vs_values.py:change_key", "drank -> milk:"), [DRANK_ON_MILK, on_milk], 2
    )
    # milk's value is untouched and still reaches drank, in proportion to the low weight
    received = named_numbers(shown_kv.line("keys_vs_values.py:change_key", "drank receives:"))
    assert received["dairy"] == pytest.approx(on_milk, abs=5e-3)
    assert received == {
        c: pytest.approx(x, abs=5e-3) for c, x in zip(toy.VALUE_COLUMNS, after.output[DRANK], strict=True)
    }


@pytest.mark.claim("kv-sep-key-changes-asking-rows")
def test_a_wiped_key_changes_only_the_rows_whose_query_asked_for_it(shown_kv, hand_built, wiped_key):
    q, _, v, base = hand_built
    after = qkv.attention(q, wiped_key, v).weights
    changed = [
        w for w, row_a, row_b in zip(WORDS, after, base.weights, strict=True) if not np.allclose(row_a, row_b)
    ]
    liquid = toy.FEATURES.index("liquid")
    askers = [w for w, query in zip(WORDS, q, strict=True) if query[liquid] != 0]
    assert changed == askers == ["drank", "cup"]
    others = [i for i, w in enumerate(WORDS) if w not in askers]
    on_milk_before, on_milk_after = q[others] @ hand_built[1][MILK], q[others] @ wiped_key[MILK]
    check_prose("kv-sep-key-changes-asking-rows", np.abs([*on_milk_before, *on_milk_after]).max())
    assert (
        shown_kv.line("keys_vs_values.py:change_key", "rows of weights that changed:")
        == f"rows of weights that changed: {askers}"
    )


@pytest.mark.claim("kv-sep-ex-double")
def test_doubling_milks_value_doubles_the_dairy_and_keeps_the_weight(shown_kv, hand_built):
    q, k, v, base = hand_built
    v_twice = v.copy()
    v_twice[MILK] *= 2
    after = qkv.attention(q, k, v_twice)
    np.testing.assert_array_equal(after.weights, base.weights)
    dairy = toy.VALUE_COLUMNS.index("dairy")
    assert after.output[DRANK, dairy] == pytest.approx(2 * base.output[DRANK, dairy], rel=1e-12)
    check_prose("kv-sep-ex-double", after.weights[DRANK, MILK], after.output[DRANK, dairy])
    section = "keys_vs_values.py:exercise_double"
    assert_printed(shown_kv.line(section, "drank -> milk:"), [DRANK_ON_MILK] * 2, 2)
    assert named_numbers(shown_kv.line(section, "drank receives:")) == {
        c: pytest.approx(x, abs=5e-3) for c, x in zip(toy.VALUE_COLUMNS, after.output[DRANK], strict=True)
    }


@pytest.mark.claim("kv-sep-ex-write-one-query")
def test_the_one_query_solution_passes_and_averaging_the_keys_is_named(shown_kv):
    from qkv.exercises import check_one_query_attention

    def right(q, k, v):  # written here: the keys give the weights, the values the output
        weights = qkv.softmax(k @ q / np.sqrt(len(q)))
        return weights, weights @ v

    result = check_one_query_attention(right)
    assert result.ok, result.message
    assert shown_kv["keys_vs_values.py:write_one_query"].strip() == str(result).strip()

    def averaging_the_keys(q, k, v):  # the mistake the chapter is about: keys where values go
        weights = qkv.softmax(k @ q / np.sqrt(len(q)))
        return weights, weights @ k

    wrong = check_one_query_attention(averaging_the_keys)
    assert not wrong.ok and "it averages the keys" in wrong.message

    def scoring_the_values(q, k, v):  # the weights taken from the values instead of the keys
        weights = qkv.softmax(v @ q[: v.shape[1]] / np.sqrt(len(q)))
        return weights, weights @ v

    assert not check_one_query_attention(scoring_the_values).ok


@pytest.mark.claim("kv-sep-terms-loss-kl")
def test_next_token_loss_and_kl_divergence_are_the_formulas_of_the_terms_box():
    from qkv.lab import interventions

    rng = np.random.default_rng(2)
    z, z_edited = rng.normal(size=(2, 7, 50)) * 2  # 7 positions, a vocabulary of 50
    came_next = rng.integers(0, 50, size=7)
    # loss: -ln p(next), checked against PyTorch's cross-entropy (mean over positions)
    loss = interventions.next_token_loss(z, came_next)
    torch_loss = torch.nn.functional.cross_entropy(torch.from_numpy(z), torch.from_numpy(came_next))
    assert loss.mean() == pytest.approx(float(torch_loss), rel=1e-12)
    certain = np.where(np.arange(50) == 3, 60.0, 0.0)  # nearly all mass on token 3
    assert interventions.next_token_loss(certain, 3) < 1e-20
    # KL(p || q) = sum p ln(p / q), checked against PyTorch's kl_div
    kl = interventions.kl_divergence(z, z_edited)
    log_p = torch.log_softmax(torch.from_numpy(z), -1)
    log_q = torch.log_softmax(torch.from_numpy(z_edited), -1)
    torch_kl = torch.nn.functional.kl_div(log_q, log_p, reduction="none", log_target=True).sum(-1)
    np.testing.assert_allclose(kl, torch_kl.numpy(), rtol=1e-10)
    assert (kl > 0).all()
    np.testing.assert_allclose(interventions.kl_divergence(z, z), 0.0, atol=1e-12)
    check_prose("kv-sep-terms-loss-kl")
