"""One attention head trained on associative recall, with and without √d_k: learning curves."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

from qkv.lab.training import SCALE_SWEEP as SWEEP
from qkv.lab.training import run_sweep
from qkv_site.figures._table import Table

ALT = (
    "Six panels of learning curves, one per head width dₖ (16, 64, 256) and number of "
    "key-value pairs T (16, 64): held-out loss against training step for one attention "
    "head learning associative recall. Each arm at its own best learning rate, the scaled "
    "and the unscaled head both fall from a loss of about 1 or more to below 0.1. Trained at the "
    "scaled head's best rate, the unscaled head ends above 0.1 in every panel and above 1.8 "
    "at dₖ = 256 with 16 or 64 pairs, close to the 2 of copying a random value."
)
CAPTION = (
    f"Held-out loss (mean squared error over {SWEEP.n_eval} sequences), mean of seeds "
    f"{', '.join(map(str, SWEEP.seeds))}; plain gradient descent, batch {SWEEP.batch_size}, "
    f"{SWEEP.steps} steps, best rate of each arm from "
    f"{', '.join(f'{r:g}' for r in SWEEP.learning_rates)}. Dotted: loss 1 (output the "
    "mean value) and 2 (copy a random value)."
)


class Training(NamedTuple):
    steps: np.ndarray  # (n_evals,)
    loss: dict  # (d_k, T) -> (n_seeds, 2, n_rates, n_evals): arm 0 unscaled, 1 scaled
    accuracy: dict  # (d_k, T) -> (n_seeds, 2, n_rates, n_evals)

    def final(self, d_k: int, t: int) -> np.ndarray:
        """(2, n_rates): held-out loss after the last step, mean over seeds."""
        return self.loss[d_k, t][..., -1].mean(axis=0)

    def best_rate(self, d_k: int, t: int) -> tuple[int, int]:
        """Index of the best learning rate of each arm (unscaled, scaled)."""
        unscaled, scaled = self.final(d_k, t).argmin(axis=-1)
        return int(unscaled), int(scaled)


@cache
def data() -> Training:
    runs = run_sweep(SWEEP)
    panels = [(d_k, t) for t in SWEEP.lengths for d_k in SWEEP.d_ks]
    loss = {p: np.array([runs[(*p, seed)].loss for seed in SWEEP.seeds]) for p in panels}
    accuracy = {p: np.array([runs[(*p, seed)].accuracy for seed in SWEEP.seeds]) for p in panels}
    return Training(runs[(*panels[0], SWEEP.seeds[0])].steps, loss, accuracy)


def tables() -> list[Table]:
    d = data()
    rates = SWEEP.learning_rates
    rows = []
    for (d_k, t), loss in d.loss.items():
        accuracy = d.accuracy[d_k, t]
        for arm, name in ((1, "scaled"), (0, "unscaled")):
            for i, rate in enumerate(rates):
                final = loss[:, arm, i, -1]
                rows.append(
                    (
                        f"dₖ {d_k}, T {t}, {name}, rate {rate:g}",
                        final.mean(),
                        final.min(),
                        final.max(),
                        accuracy[:, arm, i, -1].mean(),
                    )
                )
    summary = Table(
        "Held-out loss and recall after the last step, by learning rate (over seeds)",
        ("head", "mean loss", "lowest", "highest", "mean recall accuracy"),
        tuple(rows),
    )
    curves = []
    for (d_k, t), loss in d.loss.items():
        unscaled, scaled = d.best_rate(d_k, t)
        columns = (
            "step",
            f"scaled, rate {rates[scaled]:g}",
            f"unscaled, rate {rates[unscaled]:g}",
            f"unscaled, rate {rates[scaled]:g}",
        )
        lines = (loss[:, 1, scaled], loss[:, 0, unscaled], loss[:, 0, scaled])
        means = [line.mean(axis=0) for line in lines]
        curves.append(
            Table(
                f"Held-out loss during training, dₖ = {d_k}, T = {t} (mean over seeds)",
                columns,
                tuple((int(s), *(m[j] for m in means)) for j, s in enumerate(d.steps)),
            )
        )
    return [summary, *curves]


def build(style) -> Figure:
    d = data()
    rates = SWEEP.learning_rates
    fig = Figure(figsize=(7.2, 4.9), layout="constrained")
    axes = fig.subplots(len(SWEEP.lengths), len(SWEEP.d_ks), sharex=True, sharey=True)
    for row, t in enumerate(SWEEP.lengths):
        for col, d_k in enumerate(SWEEP.d_ks):
            ax = axes[row, col]
            loss = d.loss[d_k, t]
            unscaled, scaled = d.best_rate(d_k, t)
            for level in (1, 2):
                ax.axhline(level, color=style.muted, linestyle=":", linewidth=1)
            for curve, colour, dash, label in (
                (loss[:, 0, scaled], style.unscaled, "--", "unscaled, scaled head's rate"),
                (loss[:, 0, unscaled], style.unscaled, "-", "unscaled, its best rate"),
                (loss[:, 1, scaled], style.scaled, "-", r"scaled by $1/\sqrt{d_k}$, its best rate"),
            ):
                ax.plot(d.steps, curve.mean(axis=0), color=colour, linestyle=dash, label=label)
            ax.set_title(
                f"$d_k$ = {d_k}, T = {t}\nrates: scaled {rates[scaled]:g}, unscaled {rates[unscaled]:g}",
                fontsize=9,
            )
            ax.set_ylim(0, 2.3)
            ax.grid(True)
            if row == len(SWEEP.lengths) - 1:
                ax.set_xlabel("step")
            if col == 0:
                ax.set_ylabel("held-out loss")
    fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="outside lower center", ncols=3, fontsize=8)
    return fig
