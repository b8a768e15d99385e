"""The data flow of one attention layer, with the shape of every array on the random toy."""

from __future__ import annotations

from functools import cache

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from qkv import toy
from qkv.dot_product import scale_factor, softmax
from qkv.masks import causal_mask
from qkv.projections import project
from qkv_site.figures._table import Table

ALT = (
    "A flow chart of one attention layer on the six-word toy sentence. X, 6 × 16, is "
    "multiplied by W_Q, W_K and W_V into Q and K, 6 × 8 each, and V, 6 × 4. Q times K "
    "transposed gives 6 × 6 scores, which are divided by √8, masked and turned into 6 × 6 "
    "weights by softmax along each row. The weights times V give a 6 × 4 output, W_O "
    "(4 × 16) brings it back to 6 × 16, and it is added to X, which a line carries "
    "around the whole layer: the residual stream."
)
CAPTION = (
    f"One attention layer, with the shapes of the random toy (T = {len(toy.SENTENCE)} words, "
    f"d_model = {toy.D_MODEL}, dₖ = {toy.D_K}, d_v = {toy.D_V}). Inside attention only the "
    "products with Kᵀ and with V change a shape; W_O brings the output back to the width of X "
    "so that it can be added to X."
)


@cache
def data() -> dict[str, tuple[int, ...]]:
    """The shape of every array of the layer, computed by running it on the random toy."""
    x = toy.embeddings()  # (T, d_model)
    q, k, v = project(x, toy.projections(toy.D_K, toy.D_V))
    scores = q @ k.T  # (T, T)
    scaled = scores * scale_factor(True, toy.D_K)
    masked = np.where(causal_mask(len(x)), scaled, -np.inf)  # a causal mask, for the shape
    weights = softmax(masked)
    mixed = weights @ v  # (T, d_v)
    w_o = np.random.default_rng(2).normal(0.0, 1 / np.sqrt(toy.D_V), (toy.D_V, toy.D_MODEL))
    update = mixed @ w_o  # (T, d_model)
    arrays = {
        "x": x,
        "w_q": None,
        "q": q,
        "k": k,
        "v": v,
        "scores": scores,
        "scaled": scaled,
        "masked": masked,
        "weights": weights,
        "mixed": mixed,
        "w_o": w_o,
        "update": update,
        "next": x + update,
    }
    shapes = {name: a.shape for name, a in arrays.items() if a is not None}
    shapes["w_q"] = shapes["w_k"] = (toy.D_MODEL, toy.D_K)
    shapes["w_v"] = (toy.D_MODEL, toy.D_V)
    return shapes


def _dims(shape) -> str:
    return " × ".join(str(n) for n in shape)


def tables() -> list[Table]:
    rows = tuple((name, *shape) for name, shape in data().items())
    return [
        Table("Shape of every array in the layer, on the toy sentence", ("array", "rows", "columns"), rows)
    ]


def build(style) -> Figure:
    s = data()
    fig = Figure(figsize=(5.6, 7.4), layout="constrained")
    ax = fig.add_subplot()
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 13)
    ax.axis("off")
    q_colour, k_colour, v_colour = style.lines[0], style.lines[1], style.lines[2]

    def box(x, y, text, colour=style.primary, width=3.4):
        ax.add_patch(
            FancyBboxPatch(
                (x - width / 2, y - 0.42),
                width,
                0.84,
                boxstyle="round,pad=0.02,rounding_size=0.15",
                facecolor=style.background,
                edgecolor=colour,
                linewidth=1.8,
                zorder=2,
            )
        )
        ax.text(x, y, text, ha="center", va="center", fontsize=10.5, color=style.text, zorder=3)

    def arrow(start, end, colour=style.muted):
        ax.add_patch(
            FancyArrowPatch(
                start,
                end,
                arrowstyle="-|>",
                mutation_scale=12,
                color=colour,
                linewidth=1.4,
                shrinkA=0,
                shrinkB=0,
            )
        )

    box(5, 12.3, f"$X$   {_dims(s['x'])}", width=3.0)
    top = 10.8
    for x, name, colour in ((1.8, "q", q_colour), (5, "k", k_colour), (8.2, "v", v_colour)):
        upper = name.upper()
        box(
            x,
            top,
            f"$\\times W_{upper}$ {_dims(s['w_' + name])}\n${upper}$   {_dims(s[name])}",
            colour,
            width=3.0,
        )
        arrow((5 if x == 5 else x * 0.25 + 3.75, 11.88), (x, top + 0.44))
    chain = (
        ("scores", "$QK^\\top$", 9.2),
        ("scaled", "$\\div\\sqrt{d_k}$", 8.0),
        ("masked", "mask (optional)", 6.8),
        ("weights", "softmax, row by row", 5.6),
        ("mixed", "$\\cdot\\, V$", 4.4),
        ("update", f"$\\cdot\\, W_O$ {_dims(s['w_o'])}", 3.2),
        ("next", "$+\\; X$  (residual)", 2.0),
    )
    x_chain = 3.4
    arrow((1.8, top - 0.44), (x_chain - 0.6, chain[0][2] + 0.44), q_colour)
    arrow((5, top - 0.44), (x_chain + 0.6, chain[0][2] + 0.44), k_colour)
    previous = None
    for name, label, y in chain:
        box(x_chain, y, f"{label}   {_dims(s[name])}", width=4.2)
        if previous is not None:
            arrow((x_chain, previous - 0.42), (x_chain, y + 0.44))
        previous = y
    arrow((8.2, top - 0.44), (x_chain + 2.12, 4.4), v_colour)  # V joins at "· V"
    # the residual stream: X bypasses the whole layer and is added at the end
    ax.plot([3.5, 0.3, 0.3], [12.3, 12.3, 2.0], color=style.accent, linewidth=1.6)
    arrow((0.3, 2.0), (x_chain - 2.12, 2.0), style.accent)
    ax.text(
        0.45, 7.2, "residual stream", rotation=90, ha="left", va="center", fontsize=10, color=style.accent
    )
    arrow((x_chain, 2.0 - 0.42), (x_chain, 0.75))
    ax.text(x_chain, 0.45, "the next layer's $X$", ha="center", va="center", fontsize=10.5, color=style.text)
    return fig
