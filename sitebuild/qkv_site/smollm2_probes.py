"""The head cards' probe set: every head of SmolLM2-135M-Instruct scored once, while the site
is built, on the texts of docs/trained-model.md (``explorer/smollm2/probes.json``).

A card in the explorer's lab shows, for the head a reader chooses, five scores beside what
they would be by chance, so that a reader can tell a previous-token head from a sink before
choosing what to switch off:

- ``first``, ``previous``, ``duplicate``, ``induction``: the scores the trained-model page
  draws (:mod:`qkv_site.figures.trained_head_types`, one source for the texts and the
  scoring): the mean weight on key 1 and on the key just before over its ten texts, and on an
  earlier copy of the query's token and on the token after it over its four texts of 12
  random tokens written twice, each beside an even spread's;
- ``copying``: how much what a head writes raises the logit of the tokens it reads, directly
  (:func:`qkv.lab.interventions.copy_scores`), over the repeated half of those four texts,
  beside the median head's.

Each score is rounded once to :data:`DECIMALS`. Heads and layers count from 1 in the file, as
on the page: ``scores[L - 1][H - 1]``.
"""

from __future__ import annotations

import numpy as np

DECIMALS = 3

LABELS = {  # short: a card's rows and the ranking's choices, on a phone too
    "first": "first token",
    "previous": "previous token",
    "duplicate": "earlier copy",
    "induction": "after a copy",
    "copying": "copying (logits)",
}


def probe_data() -> dict:
    """The probe file's content."""
    from threadpoolctl import threadpool_limits

    from qkv import smollm2
    from qkv.lab import interventions
    from qkv_site.figures import _trained, trained_head_types

    kinds = trained_head_types.data()
    probes = [
        _probe(
            kind,
            scores,
            even,
            "an even spread",
            "random tokens written twice"
            if kind in ("duplicate", "induction")
            else "the trained-model page's ten texts",
        )
        for kind, scores, even in zip(kinds.kinds, kinds.scores, kinds.baselines, strict=True)
    ]
    repeated = _trained.repeated()
    half = _trained.REPEATS[1]
    rows = np.arange(half, 2 * half - 1)  # the predictions of the repeated half
    with threadpool_limits(limits=1, user_api="blas"):  # small matrices: one thread is faster
        model = smollm2.load()
        copying = np.mean([interventions.copy_scores(model, t, rows) for t in repeated], axis=0)
    probes.append(
        _probe("copying", copying, np.median(copying), "the median head", "random tokens written twice")
    )
    return {"decimals": DECIMALS, "repeats": [t.ids.tolist() for t in repeated], "probes": probes}


def _probe(kind: str, scores: np.ndarray, baseline: float, against: str, texts: str) -> dict:
    return {
        "id": kind,
        "label": LABELS[kind],
        "texts": texts,
        "baseline": round(float(baseline), DECIMALS),
        "against": against,
        "scores": np.round(np.asarray(scores, dtype=np.float64), DECIMALS).tolist(),
    }
