"""The qkv site's experiment tooling: how its chapters measure things, not attention itself.

qkv's own modules (:mod:`qkv.dot_product`, :mod:`qkv.masks`, :mod:`qkv.multihead`,
:mod:`qkv.rope`, :mod:`qkv.kvcache`, :mod:`qkv.smollm2` and the rest) compute attention and
run a trained model; they are the library, documented and kept stable. The modules here are
what the site's experiments are made of, and change whenever an experiment needs them to:

- :mod:`qkv.lab.interventions`: edits of SmolLM2's forward pass (heads switched off, values
  removed or swapped, RoPE off) and what they move;
- :mod:`qkv.lab.patching`: activation patching between two runs of SmolLM2;
- :mod:`qkv.lab.scoring`: log-probabilities of continuations and answers;
- :mod:`qkv.lab.prefixes`: texts that begin alike run their shared beginning once;
- :mod:`qkv.lab.head_scores`: what kind of head a head is, beside an even spread's score;
- :mod:`qkv.lab.texts`: the texts the trained model's heads are scored on, fixed before any score;
- :mod:`qkv.lab.stats`: exact sign and signed-rank tests for paired measurements;
- :mod:`qkv.lab.scaling`: the draws and statistics behind the chapter on the scale factor;
- :mod:`qkv.lab.training`: one attention head trained by hand on associative recall, and the
  sweep the scale factor is tested with.

**No stability promise**: a name here may change or go in any release, without a
deprecation period. Import a module by its full name (``from qkv.lab import patching``);
nothing is re-exported at the top of :mod:`qkv`, and no module of the library imports
from here.
"""
