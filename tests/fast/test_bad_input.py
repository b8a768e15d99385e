"""Bad input to every public function of ``qkv`` gets a ``ValueError`` that names the problem.

Not NumPy's message from three calls down (``zero-size array to reduction operation``,
``unsupported operand``), not a silent NaN: the name of the argument and what was wrong
with it. One case per line of :data:`CASES`; :func:`test_every_public_function_has_a_case`
makes a new public function come with its cases.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from tiny_model import tiny_model

import qkv
from qkv import exercises, smollm2, toy
from qkv.lab import attribution, effects, interventions, lens, patching, prefixes, scaling, training

RNG = np.random.default_rng(0)
X = RNG.normal(size=(3, 8))  # three tokens, d_model = 8
P = qkv.Projections.random(RNG, d_model=8, d_k=4)
W = qkv.MultiHeadWeights.random(RNG, d_model=8, n_heads=2)
WEIGHTS = qkv.softmax(RNG.normal(size=(2, 5)))
TINY = tiny_model(seed=0)  # a SmolLM2-shaped model of width 8, 10 tokens
RUN_A, RUN_B = patching.record(TINY, [1, 2, 3]), patching.record(TINY, [1, 5, 3])


def _append_strings():
    qkv.KVCache.empty(n_kv_heads=1, d_head=2).append([[["a", "b"]]], [[["c", "d"]]])


# (function under test, the call, a regex its message must match)
CASES = [
    (
        qkv.attention,
        lambda: qkv.attention(X, np.zeros((0, 8)), np.zeros((0, 2))),
        r"k has shape \(0, 8\).*at least one position",
    ),
    (
        qkv.attention,
        lambda: qkv.attention(np.zeros((2, 0)), np.zeros((3, 0)), X),
        r"q has shape \(2, 0\).*one feature",
    ),
    (qkv.attention, lambda: qkv.attention(np.zeros((0, 4)), np.zeros((3, 4)), X), r"q has shape \(0, 4\)"),
    (qkv.attention, lambda: qkv.attention([[1, 2], [3]], X, X), "q must be an array of numbers"),
    (qkv.softmax, lambda: qkv.softmax("abc"), "z must hold numbers"),
    (qkv.softmax, lambda: qkv.softmax([]), r"at least one score along axis -1, got shape \(0,\)"),
    (qkv.softmax, lambda: qkv.softmax(3.0), "at least one score"),
    (qkv.softmax, lambda: qkv.softmax([1.0, np.nan]), "NaN or \\+inf"),
    (qkv.scale_factor, lambda: qkv.scale_factor(True, 0), "d_k must be a whole number >= 1, got 0"),
    (qkv.scale_factor, lambda: qkv.scale_factor(True, 2.5), "d_k must be a whole number"),
    (qkv.scale_factor, lambda: qkv.scale_factor("yes", 4), "scale must be True, False or a finite"),
    (qkv.causal_mask, lambda: qkv.causal_mask(2.5), "t_q must be a whole number >= 1, got 2.5"),
    (qkv.causal_mask, lambda: qkv.causal_mask(0), "t_q must be a whole number >= 1, got 0"),
    (qkv.causal_mask, lambda: qkv.causal_mask(True), "t_q must be a whole number"),
    (qkv.causal_mask, lambda: qkv.causal_mask(3, 2), "t_q <= t_k, got t_q=3, t_k=2"),
    (qkv.padding_mask, lambda: qkv.padding_mask([2, 3], 3.5), "t must be a whole number >= 1, got 3.5"),
    (qkv.padding_mask, lambda: qkv.padding_mask([2.0, 3.0], 4), "lengths must be a 1-D array of ints"),
    (qkv.split_heads, lambda: qkv.split_heads(X, 0), "n_heads must be a whole number >= 1, got 0"),
    (qkv.split_heads, lambda: qkv.split_heads(X, 3), "last axis 8 .* not divisible by n_heads=3"),
    (qkv.split_heads, lambda: qkv.split_heads(np.zeros(8), 2), r"x must have at least 2 dimensions"),
    (qkv.merge_heads, lambda: qkv.merge_heads(X), r"x must have at least 3 dimensions .*\(3, 8\)"),
    (
        qkv.grouped_attention,
        lambda: qkv.grouped_attention(np.zeros((2, 3, 4)), np.zeros((0, 3, 4)), np.zeros((0, 3, 4))),
        "n_heads a multiple of n_kv_heads >= 1",
    ),
    (
        qkv.grouped_attention,
        lambda: qkv.grouped_attention(np.zeros((3, 4)), np.zeros((3, 4)), np.zeros((3, 4))),
        r"q must be \(\.\.\., n_heads, Tq, d_head\)",
    ),
    (
        qkv.multi_head_attention,
        lambda: qkv.multi_head_attention(X[:, :6], X, W),
        r"x_q must be \(\.\.\., T, 8\), got shape \(3, 6\)",
    ),
    (
        qkv.multi_head_attention,
        lambda: qkv.multi_head_attention(X, X[:, :7], W),
        r"x_kv must be \(\.\.\., T, 8\), got shape \(3, 7\)",
    ),
    (
        qkv.multi_head_attention,
        lambda: qkv.multi_head_attention(X, X, P),
        "w must be a qkv.MultiHeadWeights, got Projections",
    ),
    (
        qkv.MultiHeadWeights,
        lambda: qkv.MultiHeadWeights.random(RNG, d_model=8, n_heads=2, n_kv_heads=0),
        "n_kv_heads must be a whole number >= 1, got 0",
    ),
    (
        qkv.MultiHeadWeights,
        lambda: qkv.MultiHeadWeights.random(RNG, d_model=8, n_heads=0),
        "n_heads must be a whole number >= 1, got 0",
    ),
    (
        qkv.MultiHeadWeights,
        lambda: qkv.MultiHeadWeights.random(RNG, d_model=4, n_heads=8),
        "d_head must be a whole number >= 1, got 0",
    ),
    (
        qkv.MultiHeadWeights,
        lambda: qkv.MultiHeadWeights(W.w_q, W.w_k, W.w_v, W.w_o, 2.0, 2),
        "n_heads must be a whole number >= 1, got 2.0",
    ),
    (
        qkv.MultiHeadWeights,
        lambda: qkv.MultiHeadWeights(np.zeros(8), W.w_k, W.w_v, W.w_o, 2, 2),
        r"w_q must be 2-D",
    ),
    (qkv.Projections, lambda: qkv.Projections.random(RNG, d_model=8, d_k=0), "d_k must be a whole"),
    (
        qkv.Projections,
        lambda: qkv.Projections.random(RNG, d_model=8, d_k=4, d_v=1.5),
        "d_v must be a whole number >= 1, got 1.5",
    ),
    (
        qkv.Projections,
        lambda: qkv.Projections(np.ones((8, 4)), np.ones((8, 3)), np.ones((8, 2))),
        r"w_q and w_k must have the same shape",
    ),
    (qkv.project, lambda: qkv.project(X[:, :7], P), r"x has d_model=7 .* expect d_model=8"),
    (qkv.project, lambda: qkv.project(X, W), "p must be a qkv.Projections, got MultiHeadWeights"),
    (qkv.self_attention, lambda: qkv.self_attention("text", P), "x must hold numbers"),
    (qkv.cross_attention, lambda: qkv.cross_attention(X, X[:, :5], P), "x_kv has d_model=5"),
    (qkv.rope_angles, lambda: qkv.rope_angles([0, 1], d=4, base=-1), "base must be a positive finite"),
    (qkv.rope_angles, lambda: qkv.rope_angles([0, 1], d=4, base=np.inf), "base must be a positive"),
    (qkv.rope_angles, lambda: qkv.rope_angles([0, 1], d=5), "d must be even; got d=5"),
    (qkv.rope_angles, lambda: qkv.rope_angles([0, 1], d=0), "d must be a whole number >= 2"),
    (qkv.rope_angles, lambda: qkv.rope_angles([0, np.nan], d=4), "positions must be one finite"),
    (qkv.rope_angles, lambda: qkv.rope_angles(["a"], d=4), "positions must hold numbers"),
    (qkv.rope, lambda: qkv.rope(np.zeros(4)), r"x must have at least 2 dimensions"),
    (qkv.rope, lambda: qkv.rope(np.zeros((3, 4)), positions=[0, 1]), "got 2 positions for 3 tokens"),
    (qkv.sliding_window_mask, lambda: qkv.sliding_window_mask(4, 0), "window must be a whole number >= 1"),
    (qkv.sliding_window_mask, lambda: qkv.sliding_window_mask(4, 2.5), "window must be a whole number"),
    (qkv.sliding_window_mask, lambda: qkv.sliding_window_mask(0, 2), "t must be a whole number >= 1, got 0"),
    (qkv.sinusoidal_positions, lambda: qkv.sinusoidal_positions(4, 5), "d must be even; got d=5"),
    (qkv.sinusoidal_positions, lambda: qkv.sinusoidal_positions(4.0, 8), "t must be a whole number"),
    (qkv.sinusoidal_positions, lambda: qkv.sinusoidal_positions(4, 8, base=1.0), "base must be a finite"),
    (qkv.alibi_slopes, lambda: qkv.alibi_slopes(0), "n_heads must be a whole number >= 1, got 0"),
    (qkv.alibi_bias, lambda: qkv.alibi_bias(4, 2.0), "n_heads must be a whole number"),
    (qkv.alibi_bias, lambda: qkv.alibi_bias(-1, 8), "t must be a whole number >= 1, got -1"),
    (qkv.softmax_jacobian, lambda: qkv.softmax_jacobian([0.5, 0.7]), "rows that sum to 1"),
    (qkv.softmax_jacobian, lambda: qkv.softmax_jacobian([1.5, -0.5]), "non-negative"),
    (qkv.entropy, lambda: qkv.entropy([[0.2, 0.2]]), "rows that sum to 1"),
    (qkv.entropy, lambda: qkv.entropy("abc"), "weights must hold numbers"),
    (qkv.score_stats, lambda: qkv.score_stats([]), "non-empty"),
    (qkv.score_stats, lambda: qkv.score_stats(["a"]), "scores must hold numbers"),
    (qkv.attention_flops, lambda: qkv.attention_flops(-1, 4, 8, 8), "t_q must be a whole number >= 0"),
    (qkv.attention_flops, lambda: qkv.attention_flops(4, 4.5, 8, 8), "t_k must be a whole number"),
    (qkv.attention_flops, lambda: qkv.attention_flops(4, 4, 8, 8, n_heads=0), "n_heads must be"),
    (qkv.kv_cache_bytes, lambda: qkv.kv_cache_bytes("32", 8, 128, 4096), "n_layers must be a whole"),
    (qkv.kv_cache_bytes, lambda: qkv.kv_cache_bytes(32, 8, 128, 4096, batch=-2), "batch must be"),
    (qkv.kv_cache_bytes, lambda: qkv.kv_cache_bytes(32, 8, 128, -1), "n_tokens must be a whole number >= 0"),
    (qkv.kv_cache_bytes, lambda: qkv.kv_cache_bytes(32, 8, 128, 4096, window=0), "window must be a whole"),
    (qkv.mla_cache_bytes, lambda: qkv.mla_cache_bytes(60, 512.0, 64, 10), "kv_lora_rank must be a whole"),
    (qkv.mla_cache_bytes, lambda: qkv.mla_cache_bytes(60, 512, 64, -1), "n_tokens must be a whole"),
    (
        qkv.LatentModelConfig,
        lambda: qkv.LatentModelConfig("x", 2, 8, 64, 0, 64, ""),
        "kv_lora_rank must be a whole number >= 1",
    ),
    (
        qkv.WindowedModelConfig,
        lambda: qkv.WindowedModelConfig("x", 4, 5, 2, 64, 16, ""),
        "local_layers must be between 1 and n_layers=4, got 5",
    ),
    (qkv.WindowedModelConfig, lambda: qkv.WindowedModelConfig("x", 4, 2, 2, 64, 0, ""), "window must be"),
    (qkv.ModelConfig, lambda: qkv.ModelConfig("x", 2, 6, 4, 64, ""), "multiple of n_kv_heads"),
    (qkv.ModelConfig, lambda: qkv.ModelConfig("x", 2, 8, 0, 64, ""), "n_kv_heads must be a whole"),
    (qkv.KVCache, lambda: qkv.KVCache.empty(n_kv_heads=0, d_head=4), "n_kv_heads must be a whole"),
    (
        qkv.KVCache,
        lambda: qkv.KVCache.empty(n_kv_heads=2, d_head=4).append(np.zeros((2, 1, 3)), np.zeros((2, 1, 3))),
        r"\(n_kv_heads, t_new, d_head\) = \(2, t_new, 4\)",
    ),
    (qkv.KVCache, _append_strings, "k must hold numbers"),
    (qkv.decode_with_cache, lambda: qkv.decode_with_cache(X[:, :4], W), r"x must be \(T, d_model=8\)"),
    (qkv.decode_with_cache, lambda: qkv.decode_with_cache(X, P), "w must be a qkv.MultiHeadWeights"),
    (
        qkv.decode_without_cache,
        lambda: qkv.decode_without_cache(np.zeros((0, 8)), W),
        r"x has shape \(0, 8\)",
    ),
    (qkv.online_softmax, lambda: qkv.online_softmax([]), r"at least one score along the last axis"),
    (qkv.online_softmax, lambda: qkv.online_softmax([1.0, np.nan]), r"NaN or \+inf"),
    (qkv.online_softmax, lambda: qkv.online_softmax([-np.inf, -np.inf]), "no finite score"),
    (qkv.online_softmax, lambda: qkv.online_softmax([1.0], block=0), "block must be a whole number >= 1"),
    (qkv.tiled_attention, lambda: qkv.tiled_attention(X, X[:, :4], X), r"share d_k.*q \(3, 8\).*k \(3, 4\)"),
    (qkv.tiled_attention, lambda: qkv.tiled_attention(X, X, X[:2]), r"same number of positions Tk"),
    (qkv.tiled_attention, lambda: qkv.tiled_attention(X, X, X, block_k=0), "block_k must be a whole number"),
    (
        qkv.tiled_attention,
        lambda: qkv.tiled_attention(X, X, X, block_q=2.5),
        "block_q must be a whole number",
    ),
    (
        qkv.tiled_attention,
        lambda: qkv.tiled_attention(X, X, X, mask=np.eye(3, dtype=bool) & False),
        r"mask allows no key for query row \(0,\)",
    ),
    (qkv.tiled_attention, lambda: qkv.tiled_attention(X, X, X, mask=np.eye(3)), "mask must be boolean"),
    (qkv.tiled_attention, lambda: qkv.tiled_attention(X, X, [[np.inf] * 2] * 3), "v contains NaN or inf"),
    (qkv.linear_attention, lambda: qkv.linear_attention(X, X[:, :4], X), r"share d_k"),
    (qkv.linear_attention, lambda: qkv.linear_attention(X, X[:2], X[:2], causal=True), "needs Tq == Tk"),
    (qkv.linear_attention, lambda: qkv.linear_attention(X, X, X, feature_map=np.negative), ">= 0 everywhere"),
    (
        qkv.linear_attention,
        lambda: qkv.linear_attention(X, X, X, feature_map=np.ravel),
        "must keep the shape",
    ),
    (qkv.linear_attention, lambda: qkv.linear_attention(X, X, X, feature_map="elu"), "must be a function"),
    (
        qkv.linear_attention,
        lambda: qkv.linear_attention(X, X, X, feature_map=np.zeros_like),
        r"weights of query row \(0,\) sum to 0",
    ),
    (qkv.elu_plus_one, lambda: qkv.elu_plus_one("abc"), "x must hold numbers"),
    (
        qkv.linear_attention_flops,
        lambda: qkv.linear_attention_flops(-1, 4, 4),
        "t must be a whole number >= 0",
    ),
    (qkv.linear_attention_flops, lambda: qkv.linear_attention_flops(4, 4, 4, 0), "n_heads must be a whole"),
    (toy.embeddings, lambda: toy.embeddings(d_model=0), "d_model must be a whole number >= 1"),
    (toy.projections, lambda: toy.projections(2.5), "d_k must be a whole number"),
    (toy.projections, lambda: toy.projections(8, d_v=65), "d_v must be between 1 and 64"),
    (toy.query_state, lambda: toy.query_state("tea", 8, True), "query must be one of the words"),
    (toy.query_state, lambda: toy.query_state("she", 65, True), "d_k must be an integer from 1 to 64"),
    (toy.query_state, lambda: toy.query_state("she", 8, 1), "scale must be True or False"),
    (scaling.draw_queries_keys, lambda: next(scaling.draw_queries_keys(0, 10)), "d_k must be a positive"),
    (scaling.score_samples, lambda: scaling.score_samples(0), "d_k must be a whole number >= 1"),
    (scaling.score_std, lambda: scaling.score_std(4, n_draws=0), "n_draws must be a positive"),
    (scaling.jacobian_norm, lambda: scaling.jacobian_norm([[0.9, 0.9]]), "rows that sum to 1"),
    (scaling.saturation, lambda: scaling.saturation(8, n_keys=0), "n_keys must be a positive"),
    (
        scaling.query_gradient_norm,
        lambda: scaling.query_gradient_norm([0.5, 0.5], np.zeros((3, 4))),
        r"k must have shape \(\.\.\., n, d_k\) = \(2,\) \+ \(d_k,\), got shape \(3, 4\)",
    ),
    (
        scaling.query_gradient_norm,
        lambda: scaling.query_gradient_norm([0.9, 0.9], np.zeros((2, 4))),
        "sum to 1",
    ),
    (scaling.scale_effect, lambda: scaling.scale_effect(8, 6, threshold=1.5), "threshold must lie strictly"),
    (scaling.scale_effect, lambda: scaling.scale_effect(8, 0), "n_keys must be a positive"),
    (
        training.recall_batch,
        lambda: training.recall_batch(0, 4, 0, 8, 2),
        "t must be a whole number >= 1, got 0",
    ),
    (training.init_head, lambda: training.init_head(0, 8, 2.5), "d_k must be a whole number"),
    (
        training.forward,
        lambda: training.forward(training.init_head(0, 6, 4), training.recall_batch(0, 2, 3, 8, 2), 0.5),
        r"w_q and w_k must both have shape \(\.\.\., d_k, d_model=8\), got \(4, 6\)",
    ),
    (
        training.backward,
        lambda: training.backward(
            training.init_head(0, 8, 4),
            training.recall_batch(0, 2, 3, 8, 2),
            training.forward(training.init_head(0, 8, 4), training.recall_batch(0, 5, 3, 8, 2), 0.5),
            0.5,
        ),
        r"fwd must come from this batch: weights \(5, 3\), batch x \(2, 3, 8\)",
    ),
    (
        training.recall_accuracy,
        lambda: training.recall_accuracy(
            training.forward(training.init_head(0, 8, 4), training.recall_batch(0, 5, 3, 8, 2), 0.5),
            training.recall_batch(0, 2, 3, 8, 2),
        ),
        "fwd must come from this batch",
    ),
    (
        training.train,
        lambda: training.train(16, 8, [1.0, -1.0], seed=0, steps=5, batch_size=4),
        "learning_rates",
    ),
    (training.train, lambda: training.train(16, 8, [1.0], seed=0, steps=0, batch_size=4), "steps must be"),
    (
        training.run_sweep,
        lambda: training.run_sweep(
            training.Sweep(d_ks=(16,), lengths=(4,), seeds=(0,), learning_rates=(1.0,), steps=0)
        ),
        "steps must be a whole number >= 1, got 0",
    ),
    # qkv.lab.interventions: the edits an experiment builds from arrays (no model needed)
    (interventions.ValueOff, lambda: interventions.ValueOff(key=-1), "key must be a position from 0, got -1"),
    (
        interventions.ValueSwap,
        lambda: interventions.ValueSwap(0, np.zeros(64)),
        r"value must be \(n_kv_heads, d_head\), got shape \(64,\)",
    ),
    (
        interventions.InputPatch,
        lambda: interventions.InputPatch(np.zeros((3, 8)), into="keys"),
        "into must name some of 'q', 'k', 'v'",
    ),
    (
        interventions.HeadsOff,
        lambda: interventions.HeadsOff([[True, False]], fill=np.zeros((2, 4))),
        r"fill must be \(n_variants, n_heads, d_head\) with \(n_variants, n_heads\) = \(1, 2\)",
    ),
    (
        smollm2.linear,
        lambda: smollm2.linear(np.ones((2, 3, 8)), np.ones((4, 2))),
        r"x must be \(\.\.\., d_in\) and w \(d_in, d_out\) with the same d_in, got x \(2, 3, 8\), w \(4, 2\)",
    ),
    (patching.record, lambda: patching.record(TINY, [1, 10]), "token id 10 at position 1 is out of range"),
    (patching.record_batch, lambda: patching.record_batch(TINY, [1, 2]), r"ids must be \(n_texts, T\)"),
    (
        patching.rerun,
        lambda: patching.rerun(TINY, RUN_A, 0, RUN_A.streams[0], 0, [2], [1]),
        r"x must be \(n_variants, T - since, d_model\) = \(n_variants, 3, 8\), got shape \(3, 8\)",
    ),
    (
        patching.rerun,
        lambda: patching.rerun(TINY, RUN_A, 0, RUN_A.streams[None, 0], 0, [3], [1]),
        r"rows \[3\] must be positions 0\.\.2",
    ),
    (
        patching.patch_stream,
        lambda: patching.patch_stream(TINY, RUN_A, patching.record(TINY, [1, 5]), 0, [[1, 1]], [1], [0]),
        "clean and corrupt must have as many tokens",
    ),
    (
        patching.patch_stream,
        lambda: patching.patch_stream(TINY, RUN_A, RUN_B, 0, [[1, 1]], [2], [0]),
        r"where must be \(n_variants, T\) = \(n_variants, 3\), got shape \(1, 2\)",
    ),
    (
        patching.patch_heads,
        lambda: patching.patch_heads(TINY, RUN_A, RUN_B, np.ones((1, 2, 2)), [0], [0]),
        r"rows \[0\] must be positions 1\.\.2",
    ),
    (
        patching.log_prob,
        lambda: patching.log_prob(TINY, RUN_A, [3], [0]),
        r"rows \[3\] must be positions 0\.\.2",
    ),
    (
        patching.next_token_log_prob,
        lambda: patching.next_token_log_prob(TINY, RUN_A.streams[-1], [1, 2]),
        r"x must be \(\.\.\., n_rows, d_model = 8\) with one next id per row: "
        r"got x \(3, 8\), next_ids \(2,\)",
    ),
    (
        patching.next_token_log_prob,
        lambda: patching.next_token_log_prob(TINY, RUN_A.streams[-1], [1, 2, 10]),
        r"next_ids \[1, 2, 10\] must be token ids in 0\.\.9",
    ),
    (
        prefixes.shared_prefixes,
        lambda: prefixes.shared_prefixes([[1, 2], [1, 3]], [1]),
        r"give one first row per text: 2 texts, 1 first rows",
    ),
    (
        prefixes.PrefixCache,
        lambda: prefixes.PrefixCache(np.zeros((2, 1, 3, 4)), np.zeros((2, 1, 3))),
        r"keys and values must both be \(batch, n_kv_heads, P, d_head\), "
        r"got shapes \(2, 1, 3, 4\) and \(2, 1, 3\)",
    ),
    # qkv.lab.lens, qkv.lab.attribution, qkv.lab.effects: on the tiny model, with token ids
    (lens.streams, lambda: lens.streams(TINY, [1, 10]), "token id 10 at position 1 is out of range"),
    (
        lens.logit_lens,
        lambda: lens.logit_lens(TINY, [1, 2, 3], position=3),
        r"position 3 is outside a text of 3 tokens: give 0\.\.2, or -3\.\.-1 from the end",
    ),
    (lens.logit_lens, lambda: lens.logit_lens(TINY, [1, 2, 3], top=0), r"top must be an int in 1\.\.10"),
    (lens.logit_lens, lambda: lens.logit_lens(TINY, [1, 2], position=1.0), "position must be an int"),
    (
        attribution.direct_logit_attribution,
        lambda: attribution.direct_logit_attribution(TINY, [1, 2, 3], 4, 10),
        r"token_b must be a token id in 0\.\.9, got 10",
    ),
    (
        attribution.direct_logit_attribution,
        lambda: attribution.direct_logit_attribution(TINY, [1, 2, 3], 4, 5, position=-4),
        "position -4 is outside a text of 3 tokens",
    ),
    (
        effects.preference,
        lambda: effects.preference(TINY, [1, 2, 3], [4], [10]),
        "continuation_2: token id 10 at position 0 is out of range",
    ),
    (
        effects.patching_effect,
        lambda: effects.patching_effect([0.2, 0.3], 1.0, 1.0),
        r"text 2's preference equals text 1's \(1\.0\): a patch has nothing to restore",
    ),
    (effects.patching_effect, lambda: effects.patching_effect(0.5, np.nan, 1.0), "must be finite"),
    (
        effects.MinimalPair,
        lambda: effects.MinimalPair.of(TINY, [1, 2, 3], [1, 2], [4], [5]),
        "text_1 has 3 tokens and text_2 2: patching copies position by position",
    ),
    (
        effects.MinimalPair,
        lambda: effects.MinimalPair.of(TINY, [1, 2, 3], [1, 2, 3], [4], [5]),
        "text_1 and text_2 are the same tokens",
    ),
    (
        effects.MinimalPair,
        lambda: effects.MinimalPair.of(TINY, [1, 2, 3], [1, 5, 3], [4], [5]).patched_stream(0, [[1, 0, 1]]),
        r"where must be a bool array \(n_variants, T\) = \(n_variants, 3\), got int64 of shape \(1, 3\)",
    ),
    (
        effects.MinimalPair,
        lambda: effects.MinimalPair.of(TINY, [1, 2, 3], [1, 5, 3], [4], [5]).patched_heads(
            np.ones((1, 2, 3), bool)
        ),
        r"which must be a bool array \(n_variants, n_layers, n_heads\) = \(n_variants, 2, 2\)",
    ),
    # qkv.exercises: a checker takes the reader's function; anything else is a mistake of the call
    *(
        (check, lambda check=check: check(np.ones(3)), rf"{check.__name__} takes your function itself")
        for check in (getattr(exercises, name) for name in exercises.__all__ if name.startswith("check_"))
    ),
]


@pytest.mark.parametrize(
    ("function", "call", "message"), CASES, ids=[f"{f.__name__}-{i}" for i, (f, _, _) in enumerate(CASES)]
)
def test_bad_input_gets_a_value_error_naming_the_problem(function, call, message):
    with pytest.raises(ValueError, match=message):
        call()


# Public names with nothing to refuse: result types, a counter, data, argument-free builders.
NOTHING_TO_REFUSE = {
    "Attention",
    "TiledAttention",
    "ScoreStats",
    "WorkCounter",
    "MODELS",
    "QueryState",
    "Saturation",
    "ScaleEffect",
    "Recall",
    "Head",
    "Forward",
    "Curves",
    "Sweep",
    "feature_embeddings",
    "hand_built_projections",
    "Recorded",
    "LogitLens",
    "Attribution",
    "CheckResult",
}


def public_callables(module) -> dict:
    """The functions and classes ``module`` offers: its ``__all__``, or those it defines."""
    names = getattr(module, "__all__", None) or [
        n
        for n, obj in vars(module).items()
        if not n.startswith("_") and getattr(obj, "__module__", None) == module.__name__
    ]
    return {
        n: getattr(module, n)
        for n in names
        if inspect.isfunction(getattr(module, n)) or inspect.isclass(getattr(module, n))
    }


def test_every_public_function_has_a_case():
    public = {}
    for module in (qkv, toy, scaling, training, patching, prefixes, lens, attribution, effects, exercises):
        public.update(public_callables(module))
    covered = {function for function, _, _ in CASES}
    missing = sorted(n for n, obj in public.items() if obj not in covered and n not in NOTHING_TO_REFUSE)
    assert not missing, f"public functions with no bad-input case: {missing}"


def test_a_seed_is_accepted_where_a_generator_is():
    # Projections.random and MultiHeadWeights.random take an int seed as NumPy's own
    # functions do, and give what a Generator seeded with it gives.
    by_seed = qkv.Projections.random(7, d_model=8, d_k=4)
    by_generator = qkv.Projections.random(np.random.default_rng(7), d_model=8, d_k=4)
    assert np.array_equal(by_seed.w_q, by_generator.w_q)
    heads = qkv.MultiHeadWeights.random(7, d_model=8, n_heads=2)
    assert np.array_equal(heads.w_q, qkv.MultiHeadWeights.random(np.random.default_rng(7), 8, 2).w_q)
