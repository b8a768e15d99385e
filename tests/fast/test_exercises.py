"""The exercise checkers (qkv.exercises): each accepts qkv's own function and names the
mistake of each typical wrong one in its sentence.

The wrong functions below are the mistakes a reader makes, written out; each test asserts
the diagnosis (the words that name the mistake), not only that the check failed.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from support import ROOT

import qkv
from qkv import exercises
from qkv.exercises import (
    check_attention,
    check_causal_mask,
    check_kv_cache_step,
    check_merged_scores,
    check_one_query_attention,
    check_online_softmax,
    check_softmax,
    check_split_heads,
)


def fails_with(result, *phrases: str, fix: tuple[str, ...] | list[str] = ()) -> None:
    """The check failed, in one sentence that says each of ``phrases`` (the symptom); the fix,
    which says each of ``fix``, is not in that first sentence but in ``result.hint()``."""
    assert not result.ok and not result, result.message
    sentence = result.message
    assert "\n" not in sentence and sentence.endswith("."), sentence
    assert "Traceback" not in sentence
    for phrase in phrases:
        assert phrase in sentence, sentence
    for phrase in fix:
        assert phrase not in sentence, f"the first answer hands over the fix: {sentence}"
        assert phrase in result.hint(), result.hint()
    if fix:
        assert sentence.endswith(exercises.ASK_AGAIN), sentence


def passes(result) -> None:
    assert result.ok and result, result.message
    assert result.message.startswith("Passed: ") and "\n" not in result.message
    # a notebook and a page show the sentence, in lines of at most 80 characters
    assert repr(result) == str(result) and " ".join(str(result).split()) == result.message
    assert max(len(line) for line in str(result).splitlines()) <= 80


# ---- each checker accepts qkv's own function ----------------------------------------------


def one_query_attention(q, k, v):
    weights, output = qkv.attention(q[None], k, v)  # one query: a table of one row
    return weights[0], output[0]


def merged_scores(x, w_q, w_k):
    """The scores through the one merged matrix, as chapter 4's exercise asks."""
    return x @ (w_q @ w_k.T) @ x.T / np.sqrt(w_q.shape[1])


def decode_step(x_new, w, cache):
    """The step of qkv.decode_with_cache's loop, written out as the exercise asks."""
    q = qkv.split_heads(x_new @ w.w_q, w.n_heads)
    cache.append(qkv.split_heads(x_new @ w.w_k, w.n_kv_heads), qkv.split_heads(x_new @ w.w_v, w.n_kv_heads))
    group = w.n_heads // w.n_kv_heads
    k, v = np.repeat(cache.keys, group, axis=0), np.repeat(cache.values, group, axis=0)
    weights, out = qkv.attention(q, k, v)
    return weights, qkv.merge_heads(out) @ w.w_o


@pytest.mark.parametrize(
    ("check", "right"),
    [
        (check_softmax, qkv.softmax),
        (check_one_query_attention, one_query_attention),
        (check_causal_mask, qkv.causal_mask),
        (check_split_heads, qkv.split_heads),
        (check_kv_cache_step, decode_step),
        (check_online_softmax, qkv.online_softmax),
    ],
)
def test_each_checker_accepts_the_right_function(check, right):
    passes(check(right))


def test_the_checkers_reference_step_is_qkvs_cached_decoding():
    # check_kv_cache_step compares with its own copy of the loop's step: chained, it must give
    # decode_with_cache's outputs, with multi-head, grouped and multi-query weights
    for n_kv in (4, 2, 1):
        w = qkv.MultiHeadWeights.random(3, d_model=16, n_heads=4, n_kv_heads=n_kv)
        x = np.random.default_rng(4).normal(size=(6, 16))
        cache = qkv.KVCache.empty(w.n_kv_heads, w.d_head)
        steps = np.concatenate([exercises.cache._decode_step(x[t : t + 1], w, cache)[1] for t in range(6)])
        assert np.array_equal(steps, qkv.decode_with_cache(x, w))


# ---- softmax ----------------------------------------------------------------------------


def naive_softmax(z, axis=-1):  # the formula as written: exp overflows (trap 7)
    return np.exp(z) / np.exp(z).sum(axis=axis, keepdims=True)


def softmax_down_the_columns(z, axis=-1):  # axis 0 whatever it is given (trap 1)
    e = np.exp(z - z.max(axis=0, keepdims=True))
    return e / e.sum(axis=0, keepdims=True)


def softmax_without_keepdims(z, axis=-1):
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis)


def softmax_shifted_by_the_global_max(z, axis=-1):
    e = np.exp(z - z.max())
    return e / e.sum(axis=axis, keepdims=True)


def softmax_shifted_by_the_minimum(z, axis=-1):  # right by shift invariance, until a -inf
    e = np.exp(z - z.min(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_unnormalised(z, axis=-1):
    return np.exp(z - z.max(axis=axis, keepdims=True))


@pytest.mark.parametrize(
    ("wrong", "phrases", "fix"),
    [
        (naive_softmax, ["nan or inf", "largest score is 1000"], ["Subtract each row's maximum"]),
        (softmax_down_the_columns, ["Wrong axis", "along axis -2 instead of axis -1"], ["pass axis"]),
        (softmax_without_keepdims, ["divided by another row's sum"], ["keepdims=True"]),
        (
            softmax_shifted_by_the_global_max,
            ["rows far below the array's largest score come out nan"],
            ["each row's own maximum", "not the largest score of the whole array"],
        ),
        (softmax_unnormalised, ["do not sum to 1"], ["Divide the exponentials by their sum"]),
        (softmax_shifted_by_the_minimum, ["A score of -inf (a masked key) makes nan"], ["-inf - (-inf)"]),
    ],
)
def test_check_softmax_names_the_mistake(wrong, phrases, fix):
    fails_with(check_softmax(wrong), *phrases, fix=fix)


def softmax_with_eps_in_the_denominator(z, axis=-1):  # "for safety": the sum is already >= 1
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / (e.sum(axis=axis, keepdims=True) + 1e-6)


def softmax_with_a_factor_on_the_denominator(z, axis=-1):
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / (e.sum(axis=axis, keepdims=True) * (1 + 1e-6))


@pytest.mark.parametrize(
    "wrong", [softmax_with_eps_in_the_denominator, softmax_with_a_factor_on_the_denominator]
)
def test_check_softmax_rejects_a_denominator_off_by_a_constant(wrong):
    # each weight is off by 1e-6 relative or less: within the old tolerance (rtol 1e-6), far
    # outside what float64 rounding can do
    fails_with(
        check_softmax(wrong),
        "right up to a factor",
        "not 1, off by",
        fix=["no epsilon added to it"],
    )


def test_check_softmax_accepts_other_correct_ways_of_rounding():
    # the tight tolerance still lets through softmaxes that are right but round differently
    def by_log_sum_exp(z, axis=-1):
        m = z.max(axis=axis, keepdims=True)
        return np.exp(z - m - np.log(np.exp(z - m).sum(axis=axis, keepdims=True)))

    def by_reciprocal(z, axis=-1):
        e = np.exp(z - z.max(axis=axis, keepdims=True))
        return e * (1.0 / e.sum(axis=axis, keepdims=True))

    passes(check_softmax(by_log_sum_exp))
    passes(check_softmax(by_reciprocal))


def test_the_fix_comes_only_when_asked():
    first = check_softmax(softmax_unnormalised)
    again = check_softmax(softmax_unnormalised, hint=True)
    assert first.fix == again.fix == first.hint() and first.fix.startswith("Divide the exponentials")
    assert first.fix not in first.message and first.message.endswith(exercises.ASK_AGAIN)
    assert again.message == first.message.removesuffix(exercises.ASK_AGAIN) + "Fix: " + first.fix
    assert check_softmax(qkv.softmax).hint() == "Nothing to fix: the check passed."


def test_a_function_that_raises_is_reported_in_a_sentence():
    def softmax_of_one_row(z, axis=-1):
        top = max(z)  # Python's max: right for one row, ambiguous for a table
        e = [math.exp(s - top) for s in z]
        return [x / sum(e) for x in e]

    fails_with(
        check_softmax(softmax_of_one_row),
        "Your function raised ValueError: The truth value of an array",
        "(on a 3 x 3 table of scores).",
    )

    def forgets_return(z, axis=-1):
        np.exp(z)

    fails_with(check_softmax(forgets_return), "returned None", fix=["return statement"])


# ---- one query's attention --------------------------------------------------------------


def attention_unscaled(q, k, v):
    weights = qkv.softmax(k @ q)
    return weights, weights @ v


def attention_divided_by_d_k(q, k, v):
    weights = qkv.softmax(k @ q / len(q))
    return weights, weights @ v


def attention_divided_by_sqrt_d_v(q, k, v):
    weights = qkv.softmax(k @ q / np.sqrt(v.shape[-1]))
    return weights, weights @ v


def attention_divided_by_sqrt_t(q, k, v):
    weights = qkv.softmax(k @ q / np.sqrt(len(k)))
    return weights, weights @ v


def attention_handing_on_the_weights(q, k, v):  # trap 2
    weights = qkv.softmax(k @ q / np.sqrt(len(q)))
    return weights, weights


def attention_exponentiating_raw_scores(q, k, v):
    e = np.exp(k @ q / np.sqrt(len(q)))
    weights = e / e.sum()
    return weights, weights @ v


def attention_of_a_table_of_one_query(q, k, v):
    weights = qkv.softmax(q[None] @ k.T / np.sqrt(len(q)))  # (1, T)
    return weights, (weights @ v)[0]


@pytest.mark.parametrize(
    ("wrong", "phrases", "fix"),
    [
        (
            attention_unscaled,
            ["divided by nothing (the raw scores), not by √d_k = 2 (d_k = 4)"],
            ["square root of d_k"],
        ),
        (attention_divided_by_d_k, ["divided by d_k = 4, not by √d_k = 2"], ["square root of d_k"]),
        (
            attention_divided_by_sqrt_d_v,
            ["divided by √d_v = 1.732 (d_v = 3), not by √d_k = 2"],
            ["square root of d_k"],
        ),
        (
            attention_divided_by_sqrt_t,
            ["divided by √T = 2.236 (T = 5 keys), not by √d_k = 2"],
            ["square root of d_k"],
        ),
        (
            attention_handing_on_the_weights,
            ["Your output is the weights", "one number per value column"],
            ["weights @ v"],
        ),
        (
            attention_exponentiating_raw_scores,
            ["nan or inf", "largest score is 5000"],
            ["Subtract each row's maximum"],
        ),
        (attention_of_a_table_of_one_query, ["shape (1, 5), not (5,)"], ["k @ q"]),
    ],
)
def test_check_one_query_attention_names_the_mistake(wrong, phrases, fix):
    fails_with(check_one_query_attention(wrong), *phrases, fix=fix)


# ---- the causal mask ----------------------------------------------------------------------


def future_mask(t_q, t_k=None):  # True = hidden: nn.Transformer's convention, not SDPA's
    return np.triu(np.ones((t_q, t_k or t_q), dtype=bool), k=1 + (t_k or t_q) - t_q)


def mask_without_the_diagonal(t_q, t_k=None):
    return np.tril(np.ones((t_q, t_k or t_q), dtype=bool), k=-1 + (t_k or t_q) - t_q)


def upper_triangle(t_q, t_k=None):
    return np.triu(np.ones((t_q, t_k or t_q), dtype=bool), k=(t_k or t_q) - t_q)


def mask_ignoring_the_cached_tokens(t_q, t_k=None):
    return np.tril(np.ones((t_q, t_k or t_q), dtype=bool))


def additive_mask(t_q, t_k=None):
    return np.where(qkv.causal_mask(t_q, t_k), 0.0, -np.inf)


def mask_of_ones_and_zeros(t_q, t_k=None):
    return np.tril(np.ones((t_q, t_k or t_q)), k=(t_k or t_q) - t_q)


@pytest.mark.parametrize(
    ("wrong", "phrases", "fix"),
    [
        (future_mask, ["polarity is reversed", "False on the diagonal"], ["True must mean 'may attend'"]),
        (mask_without_the_diagonal, ["off by one", "the diagonal is False"], ["the diagonal is True"]),
        (upper_triangle, ["upper triangle", "keys i and after"], ["lower triangle (np.tril)"]),
        (
            mask_ignoring_the_cached_tokens,
            ["causal_mask(2, 5)", "the last t_q positions"],
            ["keys 0 to 3 + i"],
        ),
        (additive_mask, ["additive", "not boolean"], ["dtype=bool"]),
        (mask_of_ones_and_zeros, ["holds float64"], ["dtype=bool"]),
    ],
)
def test_check_causal_mask_names_the_mistake(wrong, phrases, fix):
    fails_with(check_causal_mask(wrong), *phrases, fix=fix)


# ---- splitting into heads ---------------------------------------------------------------


def split_by_reshaping_only(x, n_heads):
    *lead, t, width = x.shape
    return x.reshape(*lead, n_heads, t, width // n_heads)


def split_without_moving_the_head_axis(x, n_heads):
    *lead, t, width = x.shape
    return x.reshape(*lead, t, n_heads, width // n_heads)


def split_into_interleaved_columns(x, n_heads):
    *lead, t, width = x.shape
    return np.moveaxis(x.reshape(*lead, t, width // n_heads, n_heads), -1, -3)


def split_one_sequence_only(x, n_heads):
    t, width = x.shape
    return x.reshape(t, n_heads, width // n_heads).transpose(1, 0, 2)


@pytest.mark.parametrize(
    ("wrong", "phrases", "fix"),
    [
        (
            split_by_reshaping_only,
            ["deals each token's numbers out to several heads"],
            ["reshaped straight to (..., n_heads, T, d_head)", "then swap"],
        ),
        (
            split_without_moving_the_head_axis,
            ["wrong axis", "(3, 2, 4)", "(2, 3, 4)"],
            ["Swap the T and head axes"],
        ),
        (split_into_interleaved_columns, ["every n_heads-th column"], ["contiguous slice"]),
        (split_one_sequence_only, ["raised ValueError", "a batch x of shape (2, 3, 12)"], []),
    ],
)
def test_check_split_heads_names_the_mistake(wrong, phrases, fix):
    fails_with(check_split_heads(wrong), *phrases, fix=fix)


# ---- one decoding step with the cache ------------------------------------------------------


def step_attending_before_appending(x_new, w, cache):
    q = qkv.split_heads(x_new @ w.w_q, w.n_heads)
    weights, out = qkv.attention(q, cache.keys, cache.values)
    cache.append(qkv.split_heads(x_new @ w.w_k, w.n_kv_heads), qkv.split_heads(x_new @ w.w_v, w.n_kv_heads))
    return weights, qkv.merge_heads(out) @ w.w_o


def step_that_never_appends(x_new, w, cache):
    q = qkv.split_heads(x_new @ w.w_q, w.n_heads)
    k = np.concatenate([cache.keys, qkv.split_heads(x_new @ w.w_k, w.n_kv_heads)], axis=1)
    v = np.concatenate([cache.values, qkv.split_heads(x_new @ w.w_v, w.n_kv_heads)], axis=1)
    weights, out = qkv.attention(q, k, v)
    return weights, qkv.merge_heads(out) @ w.w_o


def step_without_repeating_shared_heads(x_new, w, cache):
    q = qkv.split_heads(x_new @ w.w_q, w.n_heads)
    cache.append(qkv.split_heads(x_new @ w.w_k, w.n_kv_heads), qkv.split_heads(x_new @ w.w_v, w.n_kv_heads))
    weights, out = qkv.attention(q, cache.keys, cache.values)
    return weights, qkv.merge_heads(out) @ w.w_o


def step_tiling_shared_heads(x_new, w, cache):
    q = qkv.split_heads(x_new @ w.w_q, w.n_heads)
    cache.append(qkv.split_heads(x_new @ w.w_k, w.n_kv_heads), qkv.split_heads(x_new @ w.w_v, w.n_kv_heads))
    group = w.n_heads // w.n_kv_heads
    k, v = np.tile(cache.keys, (group, 1, 1)), np.tile(cache.values, (group, 1, 1))
    weights, out = qkv.attention(q, k, v)
    return weights, qkv.merge_heads(out) @ w.w_o


def step_without_the_output_projection(x_new, w, cache):
    weights, output = decode_step(x_new, w, cache)
    return weights, output @ np.linalg.pinv(w.w_o)  # undo w_o: the merged heads


def step_unscaled(x_new, w, cache):
    q = qkv.split_heads(x_new @ w.w_q, w.n_heads)
    cache.append(qkv.split_heads(x_new @ w.w_k, w.n_kv_heads), qkv.split_heads(x_new @ w.w_v, w.n_kv_heads))
    group = w.n_heads // w.n_kv_heads
    k, v = np.repeat(cache.keys, group, axis=0), np.repeat(cache.values, group, axis=0)
    weights = qkv.softmax(q @ k.swapaxes(-1, -2))
    return weights, qkv.merge_heads(weights @ v) @ w.w_o


@pytest.mark.parametrize(
    ("wrong", "phrases", "fix"),
    [
        (step_attending_before_appending, ["does not attend to itself", "3 earlier positions"], ["Append"]),
        (step_that_never_appends, ["did not add the new token to the cache"], ["cache.append"]),
        (
            step_without_repeating_shared_heads,
            ["raised ValueError", "sharing 2 key/value heads"],
            ["np.repeat"],
        ),
        (
            step_tiling_shared_heads,
            ["wrong key/value heads", "query head 1 reads key/value head 1"],
            ["not np.tile"],
        ),
        (step_without_the_output_projection, ["before the output projection"], ["w.w_o"]),
        (step_unscaled, ["not divided by √d_head = 2"], ["qkv.attention"]),
    ],
)
def test_check_kv_cache_step_names_the_mistake(wrong, phrases, fix):
    fails_with(check_kv_cache_step(wrong), *phrases, fix=fix)


# ---- the online softmax ---------------------------------------------------------------------


def online(z, block, rescale=True, shift_guard=True, final_max=True, subtract_max=True):
    """An online softmax along the last axis with one of its steps optionally left out."""
    n = z.shape[-1]
    m = np.full((*z.shape[:-1], 1), -np.inf)
    s = np.zeros_like(m)
    blocks, maxima = [], []
    for start in range(0, n, block):
        chunk = z[..., start : start + block]
        m_new = np.maximum(m, chunk.max(axis=-1, keepdims=True)) if subtract_max else np.zeros_like(m)
        shift = np.where(np.isneginf(m_new), 0, m_new) if shift_guard else m_new
        e = np.exp(chunk - shift)
        s = (s * np.exp(m - shift) if rescale else s) + e.sum(axis=-1, keepdims=True)
        m = m_new
        blocks.append(e)
        maxima.append(shift)
    final = np.where(np.isneginf(m), 0, m) if shift_guard else m
    return (
        np.concatenate(
            [e * np.exp(mt - final) if final_max else e for e, mt in zip(blocks, maxima, strict=True)],
            axis=-1,
        )
        / s
    )


def test_the_tests_online_softmax_is_right_when_nothing_is_left_out():
    passes(check_online_softmax(online))  # so each wrong one below differs by its one step


@pytest.mark.parametrize(
    ("options", "phrases", "fix"),
    [
        ({"rescale": False}, ["sum to less than 1", "running sum is not rescaled"], ["exp(m_old - m_new)"]),
        ({"final_max": False}, ["never brought to the final maximum"], ["exp(m_then - m_final)"]),
        ({"shift_guard": False}, ["first block is all -inf"], ["Shift by 0"]),
        ({"subtract_max": False}, ["nan or inf"], ["Subtract each row's maximum"]),
    ],
)
def test_check_online_softmax_names_the_mistake(options, phrases, fix):
    fails_with(check_online_softmax(lambda z, block: online(z, block, **options)), *phrases, fix=fix)


def test_check_online_softmax_says_when_only_single_rows_work():
    def one_row_at_a_time(z, block):  # plain Python, as for a list of scores
        m, s = -math.inf, 0.0
        for score in z:
            m_new = max(m, score)
            s = s * math.exp(m - m_new) + math.exp(score - m_new)
            m = m_new
        return np.array([math.exp(score - m) / s for score in z])

    fails_with(
        check_online_softmax(one_row_at_a_time),
        "Your function raised ValueError",
        "after passing on single rows",
        fix=["Keep one running maximum and sum per row"],
    )


def test_check_online_softmax_names_blockwise_normalising_and_a_dropped_last_block():
    def per_block(z, block):
        return np.concatenate(
            [qkv.softmax(z[..., a : a + block]) for a in range(0, z.shape[-1], block)], axis=-1
        )

    fails_with(check_online_softmax(per_block), "sum to 1 in each block", "3 in all", fix=["whole row"])

    def drops_the_last_block(z, block):
        full = z.shape[-1] - z.shape[-1] % block
        return np.concatenate([online(z[..., :full], block), np.zeros_like(z[..., full:])], axis=-1)

    fails_with(
        check_online_softmax(drops_the_last_block),
        "last, shorter block is left out",
        fix=["range(0, n, block)"],
    )


# ---- the checkers themselves ----------------------------------------------------------------


@pytest.mark.parametrize(
    "check", [getattr(exercises, name) for name in exercises.__all__ if name.startswith("check_")]
)
def test_a_checker_given_something_it_cannot_call_says_so(check):
    with pytest.raises(ValueError, match=rf"{check.__name__} takes your function itself.*got 3"):
        check(3)


def test_the_checkers_leave_numpys_error_state_as_they_found_it():
    before = np.geterr()
    check_softmax(naive_softmax)  # overflows inside, silenced there
    assert np.geterr() == before


# ---- the exercises on the pages ---------------------------------------------------------------

# (page, snippet file, skeleton section, solution section, the checker its solution calls)
ON_THE_PAGES = [
    ("soft-lookup.md", "soft_lookup.py", "write_softmax_skeleton", "write_softmax", check_softmax),
    (
        "why-three-projections.md",
        "tie_query_key.py",
        "write_merged_skeleton",
        "write_merged",
        check_merged_scores,
    ),
    ("step-by-step.md", "step_by_step.py", "write_attention_skeleton", "write_attention", check_attention),
    (
        "things-to-try.md",
        "things_to_try.py",
        "write_one_query_skeleton",
        "write_one_query",
        check_one_query_attention,
    ),
    (
        "three-kinds.md",
        "three_kinds_exercises.py",
        "write_causal_mask_skeleton",
        "write_causal_mask",
        check_causal_mask,
    ),
    (
        "multi-head.md",
        "multi_head_exercises.py",
        "write_split_heads_skeleton",
        "write_split_heads",
        check_split_heads,
    ),
    ("kv-cache.md", "kv_cache_exercises.py", "write_step_skeleton", "write_step", check_kv_cache_step),
    (
        "attention-at-scale.md",
        "attention_at_scale_exercises.py",
        "write_it_skeleton",
        "write_it",
        check_online_softmax,
    ),
]


def section_code(script: str, name: str) -> str:
    text = (ROOT / "snippets" / script).read_text(encoding="utf-8")
    return text.split(f"# --8<-- [start:{name}]\n", 1)[1].split(f"# --8<-- [end:{name}]", 1)[0]


@pytest.mark.parametrize(("page", "script", "skeleton", "solution", "check"), ON_THE_PAGES)
def test_each_skeleton_runs_its_checker_which_says_it_is_not_written_yet(
    page, script, skeleton, solution, check, capsys
):
    # the page shows the skeleton; run alone, as a reader copies it, it calls the checker
    # on the function still to be written, and the checker answers in a sentence
    shown = (ROOT / "docs" / page).read_text(encoding="utf-8")
    assert f'--8<-- "snippets/{script}:{skeleton}"' in shown
    exec(compile(section_code(script, skeleton), f"{script}:{skeleton}", "exec"), {})
    printed = " ".join(capsys.readouterr().out.split())
    assert printed.startswith("Your function raised NotImplementedError: your code here (")
    assert check.__name__ in section_code(script, skeleton)


def pass_sentence(check) -> str:
    """What ``check`` prints for a function that passes: its sentence for qkv's own."""
    right = {
        check_softmax: qkv.softmax,
        check_merged_scores: merged_scores,
        check_attention: qkv.attention,
        check_one_query_attention: one_query_attention,
        check_causal_mask: qkv.causal_mask,
        check_split_heads: qkv.split_heads,
        check_kv_cache_step: decode_step,
        check_online_softmax: qkv.online_softmax,
    }[check]
    return str(check(right))


def solution_prints_the_pass(page_output, page, script, solution, check) -> None:
    """The solution's block on the page prints the checker's pass sentence first."""
    printed = page_output(page)[f"{script}:{solution}"]
    assert printed.startswith(pass_sentence(check) + "\n"), printed


@pytest.mark.claim("lookup-ex-write-softmax")
def test_the_softmax_solution_passes_and_needs_both_of_its_steps(page_output):
    solution_prints_the_pass(page_output, "soft-lookup.md", "soft_lookup.py", "write_softmax", check_softmax)
    # without the subtraction: overflow; without keepdims: the sums do not line up
    fails_with(check_softmax(naive_softmax), "nan or inf")
    fails_with(check_softmax(softmax_without_keepdims), "another row's sum", fix=["keepdims=True"])


@pytest.mark.claim("try-ex-write-one-query")
def test_the_one_query_solution_passes_and_the_named_mistakes_are_named(page_output):
    solution_prints_the_pass(
        page_output, "things-to-try.md", "things_to_try.py", "write_one_query", check_one_query_attention
    )
    fails_with(check_one_query_attention(attention_unscaled), "divided by nothing (the raw scores)")
    fails_with(check_one_query_attention(attention_exponentiating_raw_scores), "nan or inf")
    fails_with(check_one_query_attention(attention_handing_on_the_weights), "Your output is the weights")


@pytest.mark.claim("kinds-ex-write-causal-mask")
def test_the_causal_mask_solution_passes_and_the_named_mistakes_are_named(page_output):
    solution_prints_the_pass(
        page_output, "three-kinds.md", "three_kinds_exercises.py", "write_causal_mask", check_causal_mask
    )
    fails_with(check_causal_mask(mask_without_the_diagonal), "off by one")
    fails_with(check_causal_mask(upper_triangle), "upper triangle")
    fails_with(check_causal_mask(future_mask), "polarity is reversed")


@pytest.mark.claim("heads-ex-write-split")
def test_the_split_heads_solution_passes_and_reshaping_straight_is_named(page_output):
    solution_prints_the_pass(
        page_output, "multi-head.md", "multi_head_exercises.py", "write_split_heads", check_split_heads
    )
    fails_with(check_split_heads(split_by_reshaping_only), "deals each token's numbers out to several heads")


@pytest.mark.claim("cache-ex-write-step")
def test_the_cache_step_solution_passes_and_attending_first_is_named(page_output):
    solution_prints_the_pass(
        page_output, "kv-cache.md", "kv_cache_exercises.py", "write_step", check_kv_cache_step
    )
    fails_with(check_kv_cache_step(step_attending_before_appending), "does not attend to itself")
    # "with each shared key/value head repeated": without the repeat it fails
    fails_with(
        check_kv_cache_step(step_without_repeating_shared_heads), "raised ValueError", fix=["np.repeat"]
    )


def test_the_notebook_offers_the_same_skeletons():
    # one source: each exercise cell of the notebook is the skeleton its chapter shows
    cells = json.loads((ROOT / "docs" / "notebook.ipynb").read_text(encoding="utf-8"))["cells"]
    code = ["".join(c["source"]).strip() for c in cells if c["cell_type"] == "code"]
    for _, script, skeleton, _, _ in ON_THE_PAGES:
        assert section_code(script, skeleton).strip() in code, f"{script}:{skeleton} is not in the notebook"


# ---- full attention, with a mask and batch axes ----------------------------------------------


def scores_of(q, k):
    return q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])


def attention_from_scores(scores, v):  # softmax written out: a row with no key gives nan
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights, weights @ v


def attention_softmax_over_queries(q, k, v, mask):
    scores = np.where(mask, scores_of(q, k), -np.inf)
    e = np.exp(scores - scores.max(axis=-2, keepdims=True))
    weights = e / e.sum(axis=-2, keepdims=True)
    return weights, weights @ v


def attention_mask_inverted(q, k, v, mask):  # True = hidden, nn.Transformer's convention
    return attention_from_scores(np.where(mask, -np.inf, scores_of(q, k)), v)


def attention_mask_after_softmax(q, k, v, mask):
    weights = qkv.softmax(scores_of(q, k)) * mask
    return weights, weights @ v


def attention_mask_multiplied_into_the_scores(q, k, v, mask):
    return attention_from_scores(scores_of(q, k) * mask, v)


def attention_mask_ignored(q, k, v, mask):
    return attention_from_scores(scores_of(q, k), v)


def full_attention_unscaled(q, k, v, mask):
    return attention_from_scores(np.where(mask, q @ np.swapaxes(k, -1, -2), -np.inf), v)


def full_attention_by_sqrt_d_v(q, k, v, mask):
    raw = q @ np.swapaxes(k, -1, -2) / np.sqrt(v.shape[-1])
    return attention_from_scores(np.where(mask, raw, -np.inf), v)


def full_attention_by_sqrt_t(q, k, v, mask):
    raw = q @ np.swapaxes(k, -1, -2) / np.sqrt(k.shape[-2])
    return attention_from_scores(np.where(mask, raw, -np.inf), v)


def attention_with_k_dot_t(q, k, v, mask):  # k.T reverses every axis of a batch
    raw = q @ k.T / np.sqrt(q.shape[-1])
    return attention_from_scores(np.where(mask, raw, -np.inf), v)


def attention_batch_flattened(q, k, v, mask):  # the batch folded into the positions
    d_k, d_v = q.shape[-1], v.shape[-1]
    q2, k2, v2 = q.reshape(-1, d_k), k.reshape(-1, d_k), v.reshape(-1, d_v)
    full = np.broadcast_to(mask, (*q.shape[:-1], k.shape[-2]))
    if q.ndim == 2:
        return attention_from_scores(np.where(full, scores_of(q2, k2), -np.inf), v2)
    return attention_from_scores(scores_of(q2, k2), v2)


def attention_averaging_the_keys(q, k, v, mask):
    weights, _ = qkv.attention(q, k, v, mask=mask)
    return weights, weights @ k


def test_check_attention_accepts_qkvs_and_a_pytorch_style_one():
    passes(check_attention(qkv.attention))

    def written_out(q, k, v, mask):  # the usual way, with masked_fill's polarity turned
        scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
        scores = np.where(mask, scores, -np.inf)
        e = np.exp(scores - scores.max(axis=-1, keepdims=True))
        weights = e / e.sum(axis=-1, keepdims=True)
        return weights, weights @ v

    passes(check_attention(written_out))


@pytest.mark.parametrize(
    ("wrong", "phrases", "fix"),
    [
        (attention_softmax_over_queries, ["sum to 1 down each column (over the queries)"], ["axis=-1"]),
        (
            attention_mask_inverted,
            ["the mask is read the wrong way round", "0 wherever the mask is True"],
            ["True means 'may attend'"],
        ),
        (
            attention_mask_after_softmax,
            ["rows no longer sum to 1", "mask was applied after softmax"],
            ["before softmax"],
        ),
        (
            attention_mask_multiplied_into_the_scores,
            ["as if its score were 0 rather than gone"],
            ["set it to -inf"],
        ),
        (attention_mask_ignored, ["your weights ignore the mask", "query 0 puts"], ["-inf before softmax"]),
        (
            full_attention_unscaled,
            ["divided by nothing (the raw scores), not by √d_k = 2 (d_k = 4)"],
            ["square root of d_k"],
        ),
        (
            full_attention_by_sqrt_d_v,
            ["divided by √d_v = 1.732 (d_v = 3), not by √d_k = 2"],
            ["square root of d_k"],
        ),
        (
            full_attention_by_sqrt_t,
            ["divided by √T = 2.236 (T = 5 keys), not by √d_k = 2"],
            ["square root of d_k"],
        ),
        (
            attention_with_k_dot_t,
            ["raised ValueError", "a batch of 2 sequences"],
            ["np.swapaxes(k, -1, -2), not k.T"],
        ),
        (
            attention_batch_flattened,
            ["shape (10, 10), not (2, 5, 5)", "the keys of every sequence in the batch"],
            ["Keep the leading axes"],
        ),
        (attention_averaging_the_keys, ["your output averages the keys", "shape (5, 4)"], ["weights @ v"]),
    ],
)
def test_check_attention_names_the_mistake(wrong, phrases, fix):
    fails_with(check_attention(wrong), *phrases, fix=fix)


# ---- RoPE ----------------------------------------------------------------------------------

from qkv.exercises import check_rope  # noqa: E402


def rope_with(x, positions, angles_of=None, pairs="adjacent", sign=1.0):
    """RoPE written out, with one of its pieces replaceable."""
    d = x.shape[-1]
    pos = np.asarray(positions, dtype=float)
    freqs = 10_000.0 ** (-np.arange(0, d, 2) / d) if angles_of is None else angles_of(d)
    angles = sign * pos[:, None] * freqs[None, :]
    cos, sin = np.cos(angles), np.sin(angles)
    out = np.empty_like(x)
    if pairs == "adjacent":
        a, b, i, j = x[..., 0::2], x[..., 1::2], np.s_[..., 0::2], np.s_[..., 1::2]
    else:  # the two halves, Hugging Face's Llama layout
        a, b, i, j = x[..., : d // 2], x[..., d // 2 :], np.s_[..., : d // 2], np.s_[..., d // 2 :]
    out[i], out[j] = a * cos - b * sin, a * sin + b * cos
    return out


def rope_on_one_sequence_only(x, positions):  # angles (T, d/2) against x (..., T, d): fine; pairs by hand
    d = x.shape[-1]
    out = x.copy()
    for p in range(d // 2):
        theta = np.asarray(positions)[:, None] * 10_000.0 ** (-2 * p / d)
        a, b = x[:, 2 * p : 2 * p + 1], x[:, 2 * p + 1 : 2 * p + 2]  # x[:, ...]: rows of a 2-D x only
        out[:, 2 * p : 2 * p + 1], out[:, 2 * p + 1 : 2 * p + 2] = (
            a * np.cos(theta) - b * np.sin(theta),
            a * np.sin(theta) + b * np.cos(theta),
        )
    return out


def test_check_rope_accepts_qkvs_and_one_written_out():
    passes(check_rope(qkv.rope))
    passes(check_rope(rope_with))


@pytest.mark.parametrize(
    ("wrong", "phrases", "fix"),
    [
        (
            lambda x, positions: rope_with(x, positions, pairs="halves"),
            ["dimension i with dimension i + d/2"],
            ["x[..., 0::2] with x[..., 1::2]"],
        ),
        (
            lambda x, positions: rope_with(x, positions, sign=-1.0),
            ["turns every pair the other way"],
            ["the minus sign is in the even output"],
        ),
        (
            lambda x, positions: rope_with(x, positions, lambda d: 10_000.0 ** (-np.arange(d // 2) / d)),
            ["frequencies fall too slowly", "as if the exponent were -i/d"],
            ["np.arange(0, d, 2) / d"],
        ),
        (
            lambda x, positions: rope_with(x, positions, lambda d: 10_000.0 ** (np.arange(0, d, 2) / d)),
            ["frequencies rise instead of falling"],
            ["a negative exponent"],
        ),
        (
            lambda x, positions: rope_with(x, positions, lambda d: np.ones(d // 2)),
            ["the same angle, one radian per position"],
            ["slower for each later pair"],
        ),
        (
            lambda x, positions: rope_with(x, np.arange(x.shape[-2])),
            ["ignores the positions it is given", "starting at 7"],
            ["not np.arange(T)"],
        ),
        (
            lambda x, positions: rope_with(x, np.asarray(positions) + 1),
            ["positions one later"],
            ["is not turned"],
        ),
        (lambda x, positions: x, ["Your output is your input"], ["m * base**(-2i/d)"]),
        (rope_on_one_sequence_only, ["x of shape (2, 3, 5, 8)"], ["x[..., 0::2]"]),
    ],
    ids=[
        "halves",
        "sign",
        "exponent-i/d",
        "rising",
        "one-frequency",
        "positions-ignored",
        "off-by-one",
        "identity",
        "2-D-only",
    ],
)
def test_check_rope_names_the_mistake(wrong, phrases, fix):
    fails_with(check_rope(wrong), *phrases, fix=fix)


# ---- multi-head attention ----------------------------------------------------------------

from qkv.exercises import check_multi_head_attention  # noqa: E402


def mha_with(
    x_q, x_kv, w, mask, split=qkv.split_heads, project=True, merge=qkv.merge_heads, scale=True, kv=None
):
    """Multi-head attention written out, with one of its steps replaceable."""
    q = split(x_q @ w.w_q, w.n_heads)
    source = x_kv if kv is None else kv(x_q, x_kv)
    k, v = split(source @ w.w_k, w.n_heads), split(source @ w.w_v, w.n_heads)
    weights, out = qkv.attention(q, k, v, mask=mask[..., None, :, :], scale=scale)
    merged = merge(out)
    return weights, merged @ w.w_o if project else merged


def split_straight(x, n_heads):
    return x.reshape(*x.shape[:-2], n_heads, x.shape[-2], x.shape[-1] // n_heads)


def merge_interleaved(out):
    return np.swapaxes(out, -1, -3).reshape(*out.shape[:-3], out.shape[-2], -1)


def mha_one_map(x_q, x_kv, w, mask):  # one wide head: no split at all
    weights, out = qkv.attention(x_q @ w.w_q, x_kv @ w.w_k, x_kv @ w.w_v, mask=mask)
    return weights, out @ w.w_o


def mha_by_sqrt_d_model(x_q, x_kv, w, mask):
    return mha_with(x_q, x_kv, w, mask, scale=w.d_model**-0.5)


def test_check_multi_head_attention_accepts_qkvs_and_one_written_out():
    passes(check_multi_head_attention(qkv.multi_head_attention))
    passes(check_multi_head_attention(mha_with))


@pytest.mark.parametrize(
    ("wrong", "phrases", "fix"),
    [
        (lambda *a: mha_with(*a, project=False), ["before the output projection"], ["w.w_o"]),
        (
            lambda *a: mha_with(*a, split=split_straight),
            ["deals each token's numbers out to several heads"],
            ["then swap the T and head axes"],
        ),
        (
            lambda *a: mha_with(*a, merge=merge_interleaved),
            ["merged in the wrong order"],
            ["head 0's d_head numbers first"],
        ),
        (
            lambda *a: mha_with(*a, scale=False),
            ["divided by nothing, not by √d_head = 2"],
            ["its own width, d_head"],
        ),
        (mha_by_sqrt_d_model, ["divided by √d_model = 3.464, not by √d_head = 2"], ["its own width, d_head"]),
        (mha_one_map, ["one map for the whole layer, not one per head"], ["qkv.split_heads"]),
        (
            lambda *a: mha_with(*a, kv=lambda x_q, x_kv: x_q),
            ["raised ValueError", "cross-attention: 3 queries from x_q, 6 keys"],
            ["Queries come from x_q"],
        ),
        (
            lambda x_q, x_kv, w, mask: mha_with(x_q, x_kv, w, np.ones_like(mask)),
            ["your weights ignore the mask"],
            ["Pass the mask to every head"],
        ),
    ],
    ids=[
        "no-w_o",
        "split-straight",
        "merge-interleaved",
        "unscaled",
        "sqrt-d_model",
        "one-map",
        "keys-from-x_q",
        "mask-ignored",
    ],
)
def test_check_multi_head_attention_names_the_mistake(wrong, phrases, fix):
    fails_with(check_multi_head_attention(wrong), *phrases, fix=fix)


# ---- a gradient step on W_Q: the toy learns where drank looks ------------------------------

from qkv.exercises import check_gradient_step  # noqa: E402


def step_with(w_q, w_k, x, i, j, lr, sign=-1.0, lr_used=None, scale_power=1, d_scores=None, transpose=False):
    """One gradient step on W_Q written out (the chain rule by hand), with one piece replaceable."""
    k = x @ w_k
    c = 1 / np.sqrt(w_k.shape[1])
    weights = qkv.softmax((x[i] @ w_q) @ k.T * c)
    target = np.eye(len(weights))[j]
    d_s = weights - target if d_scores is None else d_scores(weights, target)
    d_q = k.T @ d_s * c**scale_power
    grad = np.outer(d_q, x[i]) if transpose else np.outer(x[i], d_q)
    return w_q + sign * (lr if lr_used is None else lr_used(lr)) * grad


def test_check_gradient_step_accepts_the_chain_rule_and_drank_looks_at_milk():
    result = check_gradient_step(step_with)
    passes(result)
    # ten steps take drank's weight on milk from the damaged toy's 0.11 back near the
    # hand-built W_Q's 0.676, and milk becomes the word it looks at most
    hand_built = qkv.self_attention(qkv.toy.feature_embeddings(), qkv.toy.hand_built_projections()).weights
    drank, milk = qkv.toy.SENTENCE.index("drank"), qkv.toy.SENTENCE.index("milk")
    assert "from 0.110 to" in result.message and "looks most at milk" in result.message
    learned = float(result.message.split("to ")[-1].split(",")[0])
    assert abs(learned - hand_built[drank, milk]) < 0.01


def test_a_finite_difference_agrees_with_the_checkers_gradient():
    # the reference the checker compares with is the derivative of the loss it names
    rng = np.random.default_rng(0)
    w_q, w_k, x = rng.normal(size=(5, 3)), rng.normal(size=(5, 3)), rng.normal(size=(4, 5))
    grad = exercises.learning._gradient(w_q, w_k, x, 2, 0)
    numeric = np.zeros_like(w_q)
    for index in np.ndindex(*w_q.shape):
        bump = np.zeros_like(w_q)
        bump[index] = 1e-6
        up = exercises.learning._loss(w_q + bump, w_k, x, 2, 0)
        down = exercises.learning._loss(w_q - bump, w_k, x, 2, 0)
        numeric[index] = (up - down) / 2e-6
    assert np.allclose(grad, numeric, atol=1e-7)


@pytest.mark.parametrize(
    ("options", "phrases", "fix"),
    [
        (
            {"sign": 1.0},
            ["goes up the gradient, not down", "the loss -log weight goes from"],
            ["W_Q - lr * gradient"],
        ),
        (
            {"lr_used": lambda lr: 1.0},
            ["1 / lr: the learning rate lr = 0.5 is not used"],
            ["Multiply the gradient by lr"],
        ),
        ({"lr_used": lambda lr: lr * lr}, ["lr = 0.5 once too many"], ["by lr once"]),
        ({"scale_power": 0}, ["√d_k = 1.732: the gradient misses the 1/√d_k"], ["∂score/∂q = k / √d_k"]),
        ({"scale_power": 2}, ["divided by √d_k twice"], ["once"]),
        ({"d_scores": lambda p, t: p}, ["misses the -1 at the target key"], ["weights - onehot(j)"]),
        ({"d_scores": lambda p, t: -t}, ["misses the softmax's part"], ["not -onehot(j)"]),
        ({"transpose": True}, ["raised ValueError", "shapes (6,3) (3,6)"], ["np.outer(x_i"]),
        ({"lr_used": lambda lr: 0.0}, ["leaves W_Q as it was"], ["W_Q - lr"]),
    ],
    ids=[
        "sign",
        "lr-ignored",
        "lr-twice",
        "no-scale",
        "scale-twice",
        "no-minus-one",
        "no-softmax",
        "transposed",
        "no-step",
    ],
)
def test_check_gradient_step_names_the_mistake(options, phrases, fix):
    fails_with(check_gradient_step(lambda *a: step_with(*a, **options)), *phrases, fix=fix)
