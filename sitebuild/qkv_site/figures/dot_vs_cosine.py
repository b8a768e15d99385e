"""Dot product against cosine similarity: one keeps a key's length, the other drops it."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

from qkv.dot_product import attention
from qkv_site.figures._table import Table


def _arrow(length: float, degrees: float) -> np.ndarray:
    turn = np.radians(degrees)
    return length * np.array([np.cos(turn), np.sin(turn)])


# One query along the x axis and two keys: a short one close to it in direction, a long
# one further round. Lengths and angles are chosen so the two scores disagree.
QUERY = _arrow(2.0, 0.0)
KEYS = np.array([_arrow(1.0, 20.0), _arrow(2.5, 50.0)])
NAMES = ("a (short)", "b (long)")

ALT = (
    "Left, a query and two keys drawn as arrows: key a is short and close to the query's "
    "direction, key b is long and further round. Right, the weights the query gives them: "
    "with dot-product scores the long key b takes most of the weight, about four fifths; "
    "with cosine scores, which keep only the angle, the nearer key a takes more than b, "
    "and the two weights stay close to even."
)
CAPTION = (
    "One query and two keys in two dimensions, weighted by softmax of the raw dot product "
    "q·k (no √dₖ) and of the cosine q·k / (‖q‖ ‖k‖). The dot product reads each key's "
    "length as well as its direction; cosine similarity divides the lengths away."
)


class Weights(NamedTuple):
    names: tuple[str, ...]
    lengths: np.ndarray  # (2,) each key's length
    angles: np.ndarray  # (2,) each key's angle to the query, in degrees
    dot_scores: np.ndarray  # (2,) q·k
    cos_scores: np.ndarray  # (2,) cos(q, k)
    dot: np.ndarray  # (2,) softmax of the dot products
    cosine: np.ndarray  # (2,) softmax of the cosines


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


@cache
def data() -> Weights:
    values = np.zeros((len(KEYS), 1))  # only the weights are drawn
    q = QUERY[None]  # (1, 2)
    dot = attention(q, KEYS, values, scale=False).weights[0]
    cosine = attention(_unit(q), _unit(KEYS), values, scale=False).weights[0]
    lengths = np.linalg.norm(KEYS, axis=1)
    cos_scores = _unit(KEYS) @ _unit(QUERY)
    return Weights(
        NAMES,
        lengths,
        np.degrees(np.arccos(cos_scores)),
        KEYS @ QUERY,
        cos_scores,
        dot,
        cosine,
    )


def tables() -> list[Table]:
    d = data()
    rows = zip(
        d.names, d.lengths.tolist(), d.angles.tolist(), d.dot_scores.tolist(),
        d.dot.tolist(), d.cos_scores.tolist(), d.cosine.tolist(), strict=True,
    )  # fmt: skip
    columns = ("key", "length", "angle to q (°)", "q·k", "weight", "cosine", "weight")
    return [Table("Two keys, scored two ways", columns, tuple(rows))]


def build(style) -> Figure:
    d = data()
    fig = Figure(figsize=(5.6, 3.0), layout="constrained")
    arrows, bars = fig.subplots(1, 2, width_ratios=(1, 1.15))
    colours = style.lines[:2]
    # Left: the vectors themselves, with the same scale on both axes.
    for vector, colour, label in (
        (QUERY, style.text, "query q"),
        (KEYS[0], colours[0], "key a, short"),
        (KEYS[1], colours[1], "key b, long"),
    ):
        arrows.annotate(
            "",
            xy=tuple(vector),
            xytext=(0, 0),
            arrowprops={"arrowstyle": "-|>", "color": colour, "lw": 2.2, "shrinkA": 0, "shrinkB": 0},
        )
        x, y = vector
        ha = "right" if y > 1 else "left"  # the long key's label sits left of its tip
        arrows.text(x, y + 0.12, label, color=colour, fontsize=11, ha=ha, va="bottom")
    arrows.set_xlim(-0.2, 2.4)
    arrows.set_ylim(-0.3, 2.3)
    arrows.set_aspect("equal")
    arrows.axis("off")
    arrows.set_title("one query, two keys", loc="left")
    # Right: the two keys' weights under each score.
    x = np.arange(2)  # dot product, cosine
    width = 0.36
    for i, colour in enumerate(colours):
        heights = (d.dot[i], d.cosine[i])
        rects = bars.bar(x + (i - 0.5) * width, heights, width, color=colour, label=d.names[i][0])
        bars.bar_label(rects, [f"{h:.2f}" for h in heights], padding=2, fontsize=10, color=style.text)
    bars.set_xticks(x, ["dot product", "cosine"])
    bars.set_ylim(0, 1.05)
    bars.set_yticks([0, 0.5, 1])
    bars.set_ylabel("weight")
    bars.legend(title="key", loc="upper right", title_fontsize=11)
    bars.set_title("their weights", loc="left")
    return fig
