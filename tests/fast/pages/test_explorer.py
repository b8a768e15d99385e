"""Guards for the "what it means" sentences of the explorer's guided experiments
(docs/explorer.md, "Guided experiments"): each conclusion recomputed on qkv's SmolLM2 in the
mission's state, with its control (other heads switched off, the even spread, other
prompts, the pair's other text), and every number a sentence writes passed to check_prose.
The browser test (tests/browser/test_explorer_missions_browser.py) checks that the page
shows the same measurements."""

from __future__ import annotations

import numpy as np
import pytest
from explorer_missions import (
    CAPITAL,
    CAPITAL_CONTROLS,
    CONTINUATIONS,
    INDUCTION_HEAD,
    NEXT,
    PAIR,
    PREVIOUS_HEADS,
    REPEATED,
    SINK,
)
from pages_support import on_previous
from prose import check_prose
from qkv_site.smollm2_data import MAX_TOKENS

from qkv import smollm2
from qkv.lab import interventions, lens
from qkv.lab.effects import preference

pytestmark = pytest.mark.model

N_RANDOM = 100  # random sets of four heads, the previous-token heads' control
FAR = 10  # "fewer than ten" heads or sets cut the next word's probability as far


def ids_of(model, text: str) -> np.ndarray:
    """The ids the explorer runs: no start token, at most MAX_TOKENS."""
    return np.array(model.tokenizer.encode(text, add_special_tokens=False).ids[:MAX_TOKENS])


def next_word_probs(model, ids, variants) -> tuple[float, np.ndarray, np.ndarray]:
    """P(NEXT) with every head on; P(NEXT) and the top token with each variant's heads off."""
    target = ids_of(model, NEXT)[0]
    z = smollm2.forward(model, ids).logits[-1].astype(np.float64)
    p = np.exp(z - z.max())
    edits = interventions.heads_off(model.config, [{(L - 1, H - 1) for L, H in v} for v in variants])
    out = interventions.run_edited(model, ids, edits, rows=[-1]).logits[:, -1].astype(np.float64)
    q = np.exp(out - out.max(axis=-1, keepdims=True))
    q /= q.sum(axis=-1, keepdims=True)
    return float(p[target] / p.sum()), q[:, target], q.argmax(axis=-1)


def all_heads(model) -> list[tuple[int, int]]:
    c = model.config
    return [(L, H) for L in range(1, c.n_layers + 1) for H in range(1, c.n_heads + 1)]


@pytest.fixture(scope="module")
def repeated(model):
    ids = ids_of(model, REPEATED)
    assert model.pieces([int(i) for i in ids[-1:]]) == (" paper",)  # the text stops before NEXT
    return ids


@pytest.mark.claim("explorer-mission-induction")
def test_the_induction_head_off_cuts_the_next_word_more_than_almost_any_other_head(model, repeated):
    heads = all_heads(model)
    before, after, _ = next_word_probs(model, repeated, [{h} for h in heads])
    mine = after[heads.index(INDUCTION_HEAD)]
    assert mine < before / 2  # "to less than half"
    others = [x for h, x in zip(heads, after, strict=True) if h != INDUCTION_HEAD]
    assert sum(x <= mine for x in others) < FAR  # the control: every other head, alone
    check_prose("explorer-mission-induction", *INDUCTION_HEAD, before, mine, len(others))


@pytest.mark.claim("explorer-mission-previous")
def test_the_previous_token_heads_off_lose_the_next_word_where_random_heads_do_not(model, repeated):
    rng = np.random.default_rng(1)
    heads = all_heads(model)
    draw = len(PREVIOUS_HEADS)
    randoms = [{heads[i] for i in rng.choice(len(heads), draw, replace=False)} for _ in range(N_RANDOM)]
    before, after, top = next_word_probs(model, repeated, [set(PREVIOUS_HEADS), *randoms])
    target = ids_of(model, NEXT)[0]
    assert top[0] != target  # "no longer the top guess"
    assert sum(x <= after[0] for x in after[1:]) < FAR  # the control: random sets of four
    check_prose("explorer-mission-previous", before, after[0], N_RANDOM)


@pytest.mark.claim("explorer-mission-lens")
def test_the_capital_is_the_lens_top_guess_only_at_the_last_layer_and_so_for_the_controls(model):
    n = model.config.n_layers
    for text, answer in {CAPITAL: " Paris", **CAPITAL_CONTROLS}.items():
        seen = lens.logit_lens(model, ids_of(model, text), top=1)
        assert model.pieces([int(seen.top_ids[-1, 0])]) == (answer,), text  # the model's own answer
        assert seen.top_from() == n, text  # top from layer n on: only at the last
        assert (seen.final_ranks[:n] > 1).all(), text  # and at no earlier layer either
    check_prose("explorer-mission-lens", n)


@pytest.mark.claim("explorer-mission-sink")
def test_most_heads_put_more_than_half_their_weight_on_the_first_token(model):
    w = smollm2.forward(model, ids_of(model, SINK)).weights  # (layers, heads, T, T)
    T = w.shape[-1]
    first = w[:, :, 1:, 0].mean(axis=-1)  # the queries from the second on, as the lab's map
    previous = np.stack([w[:, :, i, i - 1] for i in range(1, T)], axis=-1).mean(axis=-1)
    even = np.mean([1 / (i + 1) for i in range(1, T)])  # an even spread over the keys seen
    n_heads = first.size
    assert (first > 0.5).sum() > 150  # the bound the sentence writes ("more than 150")
    assert (previous > 0.5).sum() < 10  # the control: the previous token ("fewer than 10")
    assert even < 0.5  # an even spread would never pass the line
    check_prose("explorer-mission-sink", ..., n_heads, even, ...)  # 150 and 10: bounds asserted above


@pytest.mark.claim("explorer-mission-pair")
def test_naming_the_suitcase_turns_the_preference_from_big_to_small(model):
    one, two = (preference(model, text, *CONTINUATIONS) for text in PAIR)
    assert one > 0 > two  # text 1 prefers " big", text 2 " small": the other text is the control
    check_prose("explorer-mission-pair", ..., one, ..., two, one - two)


# ---- moved from test_trained_model.py: this page's trained-model note, on the model --


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


@pytest.mark.claim("explorer-trained-kv-groups")
def test_explorer_nine_query_heads_share_three_key_value_heads(model):
    c = model.config
    assert c.group == 3 and [c.kv_head(h) for h in range(c.n_heads)] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    check_prose("explorer-trained-kv-groups", c.n_heads, c.n_kv_heads)
