"""The texts the trained model's heads are scored on, fixed before any score was computed.

One place for them, so that the code a reader runs and the figures drawn from the same runs
read the same texts: :data:`ORDINARY`, ten ordinary texts (prose, a list, a repeated name,
code; nine different first words), the texts of :data:`REPEATS` (random tokens written
twice), and :data:`THRESHOLD`, the mean weight on a kind's targets above which a head counts
as that kind (:mod:`qkv.lab.head_scores`).

Examples
--------
>>> len(ORDINARY), len({text.split()[0] for text in ORDINARY})
(10, 9)
"""

from __future__ import annotations

__all__ = ["ORDINARY", "REPEATS", "THRESHOLD"]

# --8<-- [start:texts]
ORDINARY = (
    "The cat sat on the mat because it was warm",
    "She poured the milk into the cup, and then she drank it slowly.",
    "The capital of France is Paris, and the capital of Japan is Tokyo.",
    "Monday, Tuesday, Wednesday, Thursday, Friday",
    "Alice met Bob, and later Alice met",
    "def add(a, b):\n    return a + b",
    "In 1969, two astronauts walked on the Moon while a third stayed in orbit.",
    "Rain fell all night, so the river rose over the old stone bridge.",
    "My brother plays the violin, but he hates practising scales.",
    "Water boils at one hundred degrees at sea level.",
)
THRESHOLD = 0.5  # a head is of a kind above this mean weight on its targets
REPEATS = (4, 12, 0)  # texts, random tokens in each half, seed
# --8<-- [end:texts]
