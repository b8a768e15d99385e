"""One pre-norm decoder layer end to end, step by step, each step tagged with the chapter
that shows it, and the two steps where tokens meet picked out.

The steps are written with qkv's own functions in the order qkv.smollm2.decoder_layer runs
them, on a small random layer and the toy sentence's six embeddings; their last array is
the layer's output (a test compares it with decoder_layer's)."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Patch

from qkv import toy
from qkv.dot_product import scale_factor, softmax
from qkv.masks import causal_mask
from qkv.multihead import MultiHeadWeights, merge_heads, split_heads
from qkv.rope import rope
from qkv.smollm2 import Config, Layer, linear, rms_norm, silu
from qkv_site.figures._table import Table

T, D_MODEL = len(toy.SENTENCE), toy.D_MODEL  # the toy sentence's six words, width 16
N_HEADS, N_KV_HEADS, D_MLP = 2, 1, 32  # two query heads sharing one key/value head
SEED = 3

ALT = (
    "A flow chart of one decoder layer on six tokens of width 16, top to bottom: normalise, "
    "project to queries, keys and values, turn queries and keys by position, score with a "
    "scale and a causal mask, softmax into weights, blend the values, join the heads and "
    "multiply by W_O, add to the input, then normalise, an MLP and add again. Only two steps "
    "combine different tokens: the scores, where a query meets every key, and the blend, "
    "where a token takes in every value by its weights. Every other step works on each "
    "token's row alone, and the layer hands on an array the shape of its input, 6 × 16."
)
CAPTION = (
    "One pre-norm decoder layer, as in Llama and SmolLM2 (qkv.smollm2.decoder_layer), with "
    "the shapes of a run on six tokens: two query heads of width 8 share one key/value "
    "head. The number on each step is the chapter that shows it running."
)


class Step(NamedTuple):
    name: str
    inputs: tuple[str, ...]  # the arrays the step reads
    outputs: tuple[str, ...]  # the arrays it computes


class Run(NamedTuple):
    steps: tuple[Step, ...]
    arrays: dict[str, np.ndarray]  # every array of the run, by name
    mixes: dict[str, bool]  # step -> does changing token 0 of its inputs move the last
    # token's row of its outputs? (token is the second-to-last axis of every array)
    config: Config
    layer: Layer


def _layer(rng) -> tuple[Config, Layer]:
    config = Config(
        n_layers=1,
        d_model=D_MODEL,
        n_heads=N_HEADS,
        n_kv_heads=N_KV_HEADS,
        d_head=D_MODEL // N_HEADS,
        d_mlp=D_MLP,
        vocab_size=10,
        rope_base=10_000.0,
        norm_eps=1e-5,
        context_length=32,
    )
    layer = Layer(
        attn_norm=rng.uniform(0.5, 1.5, D_MODEL),
        attention=MultiHeadWeights.random(rng, D_MODEL, N_HEADS, N_KV_HEADS),
        mlp_norm=rng.uniform(0.5, 1.5, D_MODEL),
        w_gate=rng.normal(size=(D_MODEL, D_MLP)) / 4,
        w_up=rng.normal(size=(D_MODEL, D_MLP)) / 4,
        w_down=rng.normal(size=(D_MLP, D_MODEL)) / 4,
    )
    return config, layer


def _functions(config: Config, layer: Layer) -> dict:
    """Each step as a function of its inputs, returning its outputs."""
    w = layer.attention
    group = w.n_heads // w.n_kv_heads

    def scores(q, k):
        k = np.repeat(k, group, axis=0)  # (heads, T, d_head): each query head's key head
        s = q @ np.swapaxes(k, -1, -2) * scale_factor(True, q.shape[-1])  # (heads, T, T)
        return (np.where(causal_mask(q.shape[-2]), s, -np.inf),)

    def mlp(x):
        h = rms_norm(x, layer.mlp_norm, config.norm_eps)
        return (x + linear(silu(linear(h, layer.w_gate)) * linear(h, layer.w_up), layer.w_down),)

    return {
        "normalise": lambda x: (rms_norm(x, layer.attn_norm, config.norm_eps),),
        "project": lambda h: (
            split_heads(linear(h, w.w_q), w.n_heads),  # (heads, T, d_head)
            split_heads(linear(h, w.w_k), w.n_kv_heads),  # (kv_heads, T, d_head)
            split_heads(linear(h, w.w_v), w.n_kv_heads),
        ),
        "position": lambda q, k: (rope(q, None, config.rope_base), rope(k, None, config.rope_base)),
        "score": scores,
        "softmax": lambda s: (softmax(s),),  # along the keys: each query's row on its own
        "blend": lambda a, v: (a @ np.repeat(v, group, axis=0),),  # (heads, T, d_head)
        "join": lambda heads: (linear(merge_heads(heads), w.w_o),),  # (T, d_model)
        "add": lambda x, attended: (x + attended,),
        "mlp": mlp,
    }


STEPS = (
    Step("normalise", ("x",), ("h",)),
    Step("project", ("h",), ("q0", "k0", "v")),
    Step("position", ("q0", "k0"), ("q", "k")),
    Step("score", ("q", "k"), ("scores",)),
    Step("softmax", ("scores",), ("weights",)),
    Step("blend", ("weights", "v"), ("heads",)),
    Step("join", ("heads",), ("attended",)),
    Step("add", ("x", "attended"), ("middle",)),
    Step("mlp", ("middle",), ("output",)),
)


def _run(functions, arrays: dict) -> dict:
    arrays = dict(arrays)
    for step in STEPS:
        outputs = functions[step.name](*(arrays[n] for n in step.inputs))
        arrays.update(zip(step.outputs, outputs, strict=True))
    return arrays


def _mixes(function, inputs) -> bool:
    """Does changing token 0 of the inputs move the last token's row of an output?"""
    first, last = (..., 0, slice(None)), (..., -1, slice(None))  # rows on the token axis
    changed = [a.copy() for a in inputs]
    for a in changed:
        a[first] += 1.0
    before, after = function(*inputs), function(*changed)
    return any(
        not np.allclose(p[last], q[last], rtol=0, atol=1e-12) for p, q in zip(before, after, strict=True)
    )


@cache
def data() -> Run:
    config, layer = _layer(np.random.default_rng(SEED))
    functions = _functions(config, layer)
    arrays = _run(functions, {"x": toy.embeddings()})  # (T, d_model)
    mixes = {s.name: _mixes(functions[s.name], [arrays[n] for n in s.inputs]) for s in STEPS}
    return Run(STEPS, arrays, mixes, config, layer)


def tables() -> list[Table]:
    d = data()
    return [
        Table(
            "Each step of one run of the layer",
            ("step", "arrays it computes, with their shapes", "combines different tokens"),
            tuple(
                (
                    step.name,
                    "; ".join(f"{n} {' × '.join(map(str, d.arrays[n].shape))}" for n in step.outputs),
                    d.mixes[step.name],
                )
                for step in d.steps
            ),
        )
    ]


ROWS = (  # (text, the step, the arrays whose shapes it shows, chapters)
    ("X: one vector per token", None, ("x",), ""),
    ("Norm(X)", "normalise", ("h",), ""),
    ("Q, K, V = Norm(X) times W_Q, W_K, W_V", "project", ("q", "v"), "2, 3, 4"),
    ("RoPE turns Q and K by position", "position", (), "9"),
    ("scores Q·Kᵀ / √dₖ, causal mask", "score", ("scores",), "7, 8"),
    ("softmax: each row of weights sums to 1", "softmax", ("weights",), "1, 5"),
    ("weights times V: blend the values", "blend", ("heads",), "1, 5"),
    ("join the heads, times W_O", "join", ("attended",), "11"),
    ("X + attention", "add", ("middle",), "5"),
    ("+ MLP(Norm(·)): the layer's output", "mlp", ("output",), ""),
)
LABELS = {"q": "Q ", "v": "K, V "}  # the projections' row names its arrays


def _shapes(d: Run, names) -> str:
    return "\n".join(LABELS.get(n, "") + " × ".join(map(str, d.arrays[n].shape)) for n in names)


def build(style) -> Figure:
    d = data()
    fig = Figure(figsize=(5.6, 7.2), layout="constrained")
    ax = fig.subplots()
    ax.set_xlim(0, 10)
    ax.set_ylim(len(ROWS) - 0.4, -0.75)
    ax.axis("off")
    ink_on_accent = style.text_on(to_rgb(style.accent))
    for i, (text, step, names, chapters) in enumerate(ROWS):
        meets = step is not None and d.mixes[step]  # where one token's numbers reach another's
        ax.add_patch(
            FancyBboxPatch(
                (0.3, i - 0.32),
                6.6,
                0.64,
                boxstyle="round,pad=0.02,rounding_size=0.12",
                facecolor=style.accent if meets else style.grid,
                edgecolor=style.faint,
                linewidth=0.8,
            )
        )
        ax.text(
            0.5, i, text, ha="left", va="center", fontsize=10, color=ink_on_accent if meets else style.text
        )
        ax.text(7.1, i, _shapes(d, names), ha="left", va="center", fontsize=9, color=style.muted)
        if chapters:
            ax.text(9.9, i, chapters, ha="right", va="center", fontsize=9, color=style.primary)
        if i:
            ax.add_patch(
                FancyArrowPatch(
                    (3.6, i - 1 + 0.33),
                    (3.6, i - 0.33),
                    arrowstyle="-|>",
                    mutation_scale=8,
                    color=style.muted,
                )
            )
    ax.text(7.1, -0.6, "shape", ha="left", va="center", fontsize=9, color=style.muted)
    ax.text(9.9, -0.6, "chapter", ha="right", va="center", fontsize=9, color=style.primary)
    fig.legend(
        handles=[
            Patch(facecolor=style.accent, edgecolor=style.faint, label="the only steps where tokens meet")
        ],
        loc="outside lower center",
    )
    return fig
