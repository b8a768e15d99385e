"""The head cards' probe set: every head of SmolLM2-135M-Instruct scored once, while the site
is built, on fixed texts (``explorer/smollm2/probes.json``).

A card in the explorer's lab shows, for the head a reader chooses, five scores beside what
they would be by chance, so that a reader can tell a previous-token head from a sink before
choosing what to switch off:

- ``first``, ``previous``: the head's mean weight on key 1 and on the key just before, over
  the explorer's built sentences (:func:`qkv.lab.head_scores.score`), beside an even spread's;
- ``duplicate``, ``induction``: its mean weight on an earlier copy of the query's token and on
  the token after such a copy, over four texts of 12 random tokens written twice, the
  repeated texts of docs/trained-model.md, beside an even spread's;
- ``copying``: how much what it writes raises the logit of the tokens it reads, directly
  (:func:`qkv.lab.interventions.copy_scores`), over the repeated half of the same texts,
  beside the median head's.

Each score is rounded once to :data:`DECIMALS`. Heads and layers count from 1 in the file, as
on the page: ``scores[L - 1][H - 1]``.
"""

from __future__ import annotations

import numpy as np

DECIMALS = 3
REPEAT_LENGTH = 12  # tokens, written twice
N_REPEATS = 4
SEED = 0  # the repeated texts of docs/trained-model.md: head_scores.repeated_random_tokens(4, 12, seed=0)

LABELS = {  # short: a card's rows and the ranking's choices, on a phone too
    "first": "first token",
    "previous": "previous token",
    "duplicate": "earlier copy",
    "induction": "after a copy",
    "copying": "copying (logits)",
}


def probe_data(model, ordinary) -> dict:
    """The probe file's content: ``ordinary`` are :func:`qkv.smollm2.run` traces of the
    explorer's sentences (the build has them already)."""
    from qkv import smollm2
    from qkv.lab import head_scores, interventions

    repeats = head_scores.repeated_random_tokens(N_REPEATS, REPEAT_LENGTH, seed=SEED)
    repeated = [smollm2.forward(model, ids) for ids in repeats]
    probes = []
    for kind in head_scores.KINDS:
        pool = repeated if kind in ("duplicate", "induction") else ordinary
        aims = [head_scores.targets(kind, t.ids) for t in pool]
        scores = np.mean([head_scores.score(t.weights, a) for t, a in zip(pool, aims, strict=True)], axis=0)
        even = np.mean([head_scores.baseline(a) for a in aims])
        texts = "random tokens written twice" if pool is repeated else "the built sentences"
        probes.append(_probe(kind, scores, even, "an even spread", texts))
    # the predictions of the repeated half: positions 12 to 22 predict tokens seen before
    rows = np.arange(REPEAT_LENGTH, 2 * REPEAT_LENGTH - 1)
    copying = np.mean([interventions.copy_scores(model, t, rows) for t in repeated], axis=0)
    probes.append(
        _probe("copying", copying, np.median(copying), "the median head", "random tokens written twice")
    )
    return {"decimals": DECIMALS, "repeats": repeats.tolist(), "probes": probes}


def _probe(kind: str, scores: np.ndarray, baseline: float, against: str, texts: str) -> dict:
    return {
        "id": kind,
        "label": LABELS[kind],
        "texts": texts,
        "baseline": round(float(baseline), DECIMALS),
        "against": against,
        "scores": np.round(scores.astype(np.float64), DECIMALS).tolist(),
    }
