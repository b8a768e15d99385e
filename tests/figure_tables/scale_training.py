"""The table under the figure scale-training, rebuilt from its ``data()`` (``d``)."""

from __future__ import annotations

import numpy as np

from qkv.lab.training import SCALE_SWEEP


def expected(d) -> list[list[list]]:
    rates = SCALE_SWEEP.learning_rates
    summary = [
        [f"dₖ {d_k}, T {t}, {arm_name}, rate {rate:g}", *stats]
        for (d_k, t), loss in d.loss.items()
        for arm, arm_name in ((1, "scaled"), (0, "unscaled"))
        for i, rate in enumerate(rates)
        for stats in [
            (
                loss[:, arm, i, -1].mean(),
                loss[:, arm, i, -1].min(),
                loss[:, arm, i, -1].max(),
                d.accuracy[d_k, t][:, arm, i, -1].mean(),
            )
        ]
    ]
    curves = []
    for loss in d.loss.values():
        final = loss[..., -1].mean(axis=0)  # (arm, rate): each arm's best rate, found here
        best_unscaled, best_scaled = int(np.argmin(final[0])), int(np.argmin(final[1]))
        lines = [loss[:, 1, best_scaled], loss[:, 0, best_unscaled], loss[:, 0, best_scaled]]
        means = [line.mean(axis=0) for line in lines]
        curves.append([[int(step), *(m[j] for m in means)] for j, step in enumerate(d.steps)])
    return [summary, *curves]
