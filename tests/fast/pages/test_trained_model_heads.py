"""Guards for docs/trained-model-heads.md: how SmolLM2 continues a repeat, its induction and
previous-token heads, what RoPE and the scale do to them.

As in test_trained_model.py (whose fixtures, now in tests/fast/pages/conftest.py, these
tests share), each test recomputes its claim from the model's runs with NumPy written here;
the variations read what the page prints (``page_output``).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from pages_support import (
    HALF,
    INDUCTION,
    PREVIOUS,
    THRESHOLD,
    above,
    even,
    log_softmax,
    on_after_copy,
    on_previous,
    once_per_run_fixture,
)
from prose import check_prose
from support import numbers, softmax_by_hand

from qkv import smollm2
from qkv.lab import head_scores, interventions

pytestmark = pytest.mark.model


# ---- what the page prints ------------------------------------------------------------------


@pytest.fixture(scope="module")
def heads_shown(page_output):
    """The second page, which switches the induction and previous-token heads off and takes
    them apart."""
    return page_output("trained-model-heads.md")


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
