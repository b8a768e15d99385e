"""The training experiment of docs/why-scale-in-depth.md: its settings,
fixed in code before its first run.

Shown whole on docs/why-scale.md. snippets/why_scale.py and the learning-curve
figure the build draws (sitebuild/qkv_site/figures/scale_training.py) read them
from this file alone, so editing the page's other code does not retrain the
figure's 108 heads.

Run: python snippets/why_scale_sweep.py
"""

from qkv.lab.training import Sweep

SWEEP = Sweep(
    d_ks=(16, 64, 256),
    lengths=(16, 64),  # T: pairs per sequence
    seeds=(0, 1, 2),
    learning_rates=(0.1, 0.3, 1.0, 3.0, 10.0, 30.0),
    steps=300,
    batch_size=32,
    d_model=16,  # <= every d_k, so W_Q^T W_K can reach every matrix at every d_k
    d_v=16,
    eval_every=10,
    n_eval=512,
)

if __name__ == "__main__":
    for name, value in SWEEP._asdict().items():
        print(f"{name:15} {value}")
