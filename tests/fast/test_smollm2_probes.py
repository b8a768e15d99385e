"""The head cards' probe file (explorer/smollm2/probes.json): every head's five scores, as the
explorer's lab shows them, recomputed here from the model's attention weights and values by
hand (the scores' definitions written out, not qkv.lab's functions) on the texts of
docs/trained-model.md, and the heads that page names found at the top."""

from __future__ import annotations

import json

import numpy as np
import pytest
from qkv_site import smollm2_data as export
from qkv_site import smollm2_probes as probes
from qkv_site.figures._trained import TEXTS
from support import model_trace

from qkv import smollm2

pytestmark = pytest.mark.model  # runs the trained model (conftest: the model tier)

HALF = 0.5 * 10**-probes.DECIMALS  # each score rounded once


@pytest.fixture(scope="module")
def shipped() -> dict:
    return json.loads(export.smollm2_files()["probes.json"])


@pytest.fixture(scope="module")
def sentences():
    return [model_trace(text) for text in TEXTS]  # the trained-model page's ten texts


@pytest.fixture(scope="module")
def repeated(shipped):
    ids = np.array(shipped["repeats"])
    # the texts of docs/trained-model.md: 12 random tokens, written twice
    assert ids.shape == (4, 24) and (ids[:, :12] == ids[:, 12:]).all()
    model = smollm2.load()
    return [smollm2.forward(model, row) for row in ids]


def by_probe(shipped) -> dict:
    return {p["id"]: p for p in shipped["probes"]}


def mean_on(traces, key_of) -> tuple[np.ndarray, float]:
    """Each head's weight on the keys ``key_of(ids, i)`` names for query i (empty: the query
    has none), averaged over a text's queries that have some, then over the texts; and the
    same mean for an even spread, which gives query i 1/(i+1) per key."""
    per_text, even = [], []
    for t in traces:
        weights, spread = [], []
        for i in range(len(t.ids)):
            keys = key_of(t.ids, i)
            if keys:
                weights.append(t.weights[:, :, i, keys].astype(np.float64).sum(axis=-1))
                spread.append(len(keys) / (i + 1))
        per_text.append(np.mean(weights, axis=0))
        even.append(np.mean(spread))
    return np.mean(per_text, axis=0), float(np.mean(even))


def first(ids, i):
    return [0] if i > 0 else []


def previous(ids, i):
    return [i - 1] if i > 0 else []


def duplicate(ids, i):
    return [j for j in range(i) if ids[j] == ids[i]]


def induction(ids, i):
    return [j + 1 for j in range(i - 1) if ids[j] == ids[i]]


@pytest.mark.claim("explorer-lab-head-cards")
def test_the_four_weight_scores_and_their_even_spreads_are_the_weights_on_their_keys(
    shipped, sentences, repeated
):
    found = by_probe(shipped)
    assert list(found) == ["first", "previous", "duplicate", "induction", "copying"]
    for name, rule, texts in (
        ("first", first, sentences),
        ("previous", previous, sentences),
        ("duplicate", duplicate, repeated),
        ("induction", induction, repeated),
    ):
        scores, even = mean_on(texts, rule)
        shown = np.array(found[name]["scores"])
        assert shown.shape == (30, 9), name
        np.testing.assert_allclose(shown, scores, rtol=0, atol=HALF + 1e-6, err_msg=name)
        assert found[name]["baseline"] == pytest.approx(even, abs=HALF + 1e-9), name
        assert found[name]["against"] == "an even spread"


@pytest.mark.claim("explorer-lab-head-cards")
def test_copying_is_what_a_head_writes_read_off_the_logits_of_the_tokens_it_reads(shipped, repeated):
    model = smollm2.load()
    rows = np.arange(12, 23)  # the predictions of the repeated half
    w_o = [layer.attention.w_o.astype(np.float64) for layer in model.layers]
    emb = model.embedding.astype(np.float64)
    total = np.zeros((30, 9))
    for t in repeated:
        x, _ = smollm2.run_layers(model, model.embedding[t.ids], np.arange(len(t.ids)))
        x = x.astype(np.float64)
        size = np.sqrt((x * x).mean(axis=-1) + model.config.norm_eps)
        target = (emb[t.ids] - emb.mean(axis=0)) * model.final_norm  # each read token's logit direction
        for ly in range(30):
            for hd in range(9):
                v = t.v[ly, hd // 3].astype(np.float64)  # (T, 64): its key/value head's values
                per_key = np.einsum("jd,jd->j", v @ w_o[ly][64 * hd : 64 * hd + 64], target)
                weights = t.weights[ly, hd, rows].astype(np.float64)
                total[ly, hd] += np.mean(weights @ per_key / size[rows])
    copying = total / len(repeated)
    found = by_probe(shipped)["copying"]
    np.testing.assert_allclose(found["scores"], copying, rtol=0, atol=HALF + 1e-5)
    assert found["baseline"] == pytest.approx(np.median(copying), abs=HALF + 1e-5)
    assert found["against"] == "the median head"


def test_the_cards_find_the_heads_the_trained_model_page_names(shipped):
    found = {p["id"]: np.array(p["scores"]) for p in shipped["probes"]}
    top = {
        name: tuple(int(x) + 1 for x in np.unravel_index(s.argmax(), s.shape)) for name, s in found.items()
    }
    # the trained-model page's strongest induction head and its strongest copy head, found on
    # its texts; here on the probe set (the same repeated texts)
    assert top["induction"] == (19, 7)
    assert top["duplicate"] == (15, 4)
    # its four previous-token heads are the four highest
    prev = found["previous"]
    best4 = {(int(i) // 9 + 1, int(i) % 9 + 1) for i in np.argsort(-prev, axis=None)[:4]}
    assert best4 == {(2, 3), (3, 2), (12, 2), (17, 1)}
    # copying: the induction heads copy little directly, layer 24 copies most
    assert top["copying"][0] == 24
    assert all(
        found["copying"][ly - 1, h - 1] < 0.3 for ly, h in [(18, 4), (18, 5), (18, 6), (19, 7), (19, 8)]
    )
