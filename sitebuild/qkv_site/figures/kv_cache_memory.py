"""KV cache memory against context length for real models: MHA, GQA, MQA, sliding windows and
multi-head latent attention (MLA)."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

from qkv.cost import LATENT_MODELS, MODELS, WINDOWED_MODELS, kv_cache_bytes
from qkv_site.figures._table import Table

CONTEXTS = tuple(2**i for i in range(10, 18))  # 1,024 ... 131,072 tokens
SHORT = {
    "multi-head": "MHA",
    "grouped-query": "GQA",
    "multi-query": "MQA",
    "sliding-window": "rolling window",
    "latent": "MLA",
}
MARKERS = {"multi-head": "o", "grouped-query": "s", "multi-query": "^", "sliding-window": "v", "latent": "D"}
DASHED = {"sliding-window", "latent"}  # the two ways besides sharing heads
DRAWN_WINDOWED = ("Mistral 7B", "Gemma 2 9B")
DRAWN_LATENT = ("DeepSeek-V2",)

ALT = (
    "Line chart on log axes of KV cache memory in GiB (float16, one sequence) against context "
    "length from 1,024 to 131,072 tokens, one line per published model configuration. "
    "Caches that keep every token grow in proportion to the context. Llama 2 7B, with "
    "multi-head attention, needs 4 times the memory of Llama 3 8B and Mistral 7B, which share "
    "8 key/value heads between 32 query heads (grouped-query); Falcon 7B, with one key/value "
    "head (multi-query), needs the least of all. Dashed: Mistral 7B with a rolling cache of "
    "its 4,096-token window stays flat from 4,096 tokens on; Gemma 2 9B, windowed in half its "
    "layers, grows at half its rate past 4,096; DeepSeek-V2's latent cache (MLA) stays below "
    "Llama 3 8B's at every length."
)
CAPTION = (
    "Cache memory = 2 (key and value) × layers × KV heads × head size × tokens × 2 bytes, "
    "from each model's published config.json. Models with the same attention shape share a "
    "line. Grouped-query and multi-query attention shrink the cache by the ratio of query "
    "heads to KV heads. Dashed lines: a rolling cache keeps only a window's tokens in layers "
    "with a sliding window; MLA keeps layers × (512 + 64) numbers per token. Gemma 2 was "
    "trained on 8,192 tokens and GPT-2 on 1,024: beyond that, for comparison only."
)


class Line(NamedTuple):
    label: str
    kind: str
    gib: np.ndarray  # (len(CONTEXTS),)


@cache
def data() -> tuple[Line, ...]:
    shapes: dict[tuple[int, int, int], list] = {}
    for m in MODELS:  # models with the same cache shape share one line
        shapes.setdefault((m.n_layers, m.n_kv_heads, m.d_head), []).append(m)
    lines = []
    for (layers, kv_heads, d_head), models in shapes.items():
        gib = np.array([kv_cache_bytes(layers, kv_heads, d_head, n) for n in CONTEXTS]) / 2**30
        label = " / ".join(m.name for m in models)
        lines.append(Line(label, models[0].kind, gib))
    for m in (*WINDOWED_MODELS, *LATENT_MODELS):
        if m.name in DRAWN_WINDOWED + DRAWN_LATENT:
            gib = np.array([m.cache_bytes(n) for n in CONTEXTS]) / 2**30
            half = m.kind == "sliding-window" and 2 * m.local_layers == m.n_layers
            lines.append(Line(m.name + (", half the layers" if half else ""), m.kind, gib))
    return tuple(sorted(lines, key=lambda line: -line.gib[-1]))


def _size(gib: float) -> str:
    return f"{gib:g} GiB" if gib >= 1 else f"{gib * 1024:g} MiB"


def tables() -> list[Table]:
    rows = tuple((f"{line.label} ({line.kind})", *line.gib.tolist()) for line in data())
    return [
        Table(
            "KV-cache size in GiB per context length (tokens)", ("model", *(f"{n:,}" for n in CONTEXTS)), rows
        )
    ]


def build(style) -> Figure:
    lines = data()
    fig = Figure(figsize=(5.0, 6.0), layout="constrained")
    ax = fig.add_subplot()
    for i, line in enumerate(lines):
        ax.plot(
            CONTEXTS,
            line.gib,
            color=style.lines[i % len(style.lines)],
            marker=MARKERS[line.kind],
            linestyle="--" if line.kind in DASHED else "-",
            label=f"{line.label} ({SHORT[line.kind]})",
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xticks(CONTEXTS, [f"{c // 1024}k" for c in CONTEXTS])
    ticks = [2.0**e for e in range(-6, 8, 2)]
    ax.set_yticks(ticks, [_size(t) for t in ticks])
    ax.minorticks_off()
    ax.grid(True)
    ax.set_xlabel("context length (tokens, log scale)")
    ax.set_ylabel("KV cache size (log scale)")
    fig.legend(loc="outside lower center", ncols=1)
    return fig
