"""Drawing helpers the figures share: heatmaps with word labels, log-2 axes, bands."""

from __future__ import annotations

import numpy as np
from matplotlib.patches import Rectangle

DIMS = tuple(2**i for i in range(10))  # d_k = 1, 2, 4, ..., 512: the √d_k figures' x axis


def heatmap(ax, matrix, rows, cols, style, vmin=0.0, vmax=1.0, cmap=None):
    """Draw ``matrix`` (rows x cols) as coloured cells with the words on both axes.

    Cells are vector rectangles (``pcolormesh``), not an embedded bitmap, so they stay
    sharp at any zoom; cell (i, j) is centred on x = j, y = i, with row 0 at the top.
    """
    matrix = np.asarray(matrix, dtype=float)
    n_rows, n_cols = matrix.shape
    mesh = ax.pcolormesh(
        np.arange(n_cols + 1) - 0.5,
        np.arange(n_rows + 1) - 0.5,
        np.ma.masked_invalid(matrix),
        cmap=cmap or style.cmap,
        vmin=vmin,
        vmax=vmax,
        edgecolors="face",
        linewidth=0,
    )
    ax.set_xlim(-0.5, n_cols - 0.5)
    ax.set_ylim(n_rows - 0.5, -0.5)  # row 0 at the top, as in a printed matrix
    ax.set_aspect("equal")
    ax.set_xticks(range(n_cols), cols, rotation=45, ha="right", rotation_mode="anchor")
    ax.set_yticks(range(n_rows), rows)
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    return mesh


def cell_text(ax, mesh, i, j, text, style, **kwargs):
    """Write ``text`` in cell (i, j) in whichever of black or white reads on its colour."""
    colour = style.text_on(mesh.cmap(mesh.norm(mesh.get_array()[i, j])))
    ax.text(j, i, text, ha="center", va="center", color=colour, **kwargs)


def outline(ax, i, j, colour, linewidth=2.5):
    """Draw a box around cell (i, j)."""
    ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor=colour, linewidth=linewidth))


def log2_axis(ax, values, label):
    """An x axis over powers of two, labelled with the numbers themselves."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(values, [str(v) for v in values])
    ax.minorticks_off()
    ax.set_xlabel(label)


def band(ax, x, mean, low, high, colour, label, marker):
    """A mean line with a shaded 10th-90th percentile band."""
    ax.fill_between(x, low, high, color=colour, alpha=0.22, linewidth=0)
    ax.plot(x, mean, color=colour, marker=marker, label=label)


def percentiles(samples: np.ndarray) -> tuple[float, float, float]:
    """Mean, 10th and 90th percentile of ``samples``."""
    low, high = np.percentile(samples, [10, 90])
    return float(samples.mean()), float(low), float(high)
