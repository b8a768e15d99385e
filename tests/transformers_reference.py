"""SmolLM2-135M-Instruct as Hugging Face transformers computes it: the reference for ``qkv.smollm2``.

The reference is independent of qkv: transformers reads the same GGUF file with its own
loader, builds its own tokenizer, puts the Q/K rows back into Hugging Face's order and runs
its PyTorch Llama with eager attention in float32.

Loading it takes ~20 s, so what the tests compare against is computed once and kept on disk
(beside qkv's dequantized weights, under ``qkv.smollm2.cache_root()``), keyed by everything
it depends on: the model file's SHA-256, the versions of transformers, torch, gguf,
tokenizers and accelerate, the inputs, and this file's own source. A change to any of them
computes it again; no code of qkv goes into it. Processes asking at once compute it once.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from qkv import smollm2

PACKAGES = ("transformers", "torch", "gguf", "tokenizers", "accelerate")


@dataclass(frozen=True)
class Inputs:
    """What to ask transformers; the tests' module lists these."""

    tokenize: tuple[str, ...]  # token ids of each text
    trace: tuple[str, ...]  # attention weights (layers, heads, T, T) and logits (T, vocab)
    next_token: tuple[str, ...]  # the top next token after each prompt
    continue_: tuple[tuple[str, int], ...]  # greedy continuation: (prompt, new tokens)


@dataclass(frozen=True)
class Reference:
    ids: dict[str, list[int]]  # text -> ids, for every text of every kind of input
    weights: dict[str, np.ndarray]  # text -> (layers, heads, T, T), float32
    logits: dict[str, np.ndarray]  # text -> (T, vocab), float32
    next_token: dict[str, int]  # prompt -> id of the largest last logit
    continuation: dict[str, str]  # prompt -> the decoded greedy continuation
    config: dict  # transformers' reading of the file's hyperparameters


def _key(inputs: Inputs, sha256: str) -> str:
    versions = {name: importlib.metadata.version(name) for name in PACKAGES}
    text = json.dumps(
        [
            sha256,
            versions,
            inputs.tokenize,
            inputs.trace,
            inputs.next_token,
            inputs.continue_,
            Path(__file__).read_text(encoding="utf-8"),
        ]
    )
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _compute(inputs: Inputs, path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    """Ask transformers; a JSON-able dict, and the arrays of the i-th traced text as
    ``weights_i`` and ``logits_i``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(1)  # small matrices; two test workers share two cores
    hf = AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, attn_implementation="eager", dtype=torch.float32
    ).eval()
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    texts = {*inputs.tokenize, *inputs.trace, *inputs.next_token, *(prompt for prompt, _ in inputs.continue_)}
    # add_special_tokens=True: the reference adds no BOS either, so ids must agree as they are
    ids = {text: tokenizer(text, add_special_tokens=True)["input_ids"] for text in sorted(texts)}
    arrays, next_token, continuation = {}, {}, {}
    with torch.no_grad():
        for i, text in enumerate(inputs.trace):
            out = hf(torch.tensor([ids[text]]), output_attentions=True)
            arrays[f"weights_{i}"] = torch.stack(out.attentions)[:, 0].numpy()
            arrays[f"logits_{i}"] = out.logits[0].numpy()
        for prompt in inputs.next_token:
            next_token[prompt] = int(hf(torch.tensor([ids[prompt]])).logits[0, -1].argmax())
        for prompt, n_new in inputs.continue_:
            out = hf.generate(
                torch.tensor([ids[prompt]]),
                max_new_tokens=n_new,
                do_sample=False,
                pad_token_id=tokenizer.eos_token_id,
            )
            continuation[prompt] = tokenizer.decode(out[0, len(ids[prompt]) :])
    c = hf.config
    config = {
        "n_layers": c.num_hidden_layers,
        "d_model": c.hidden_size,
        "n_heads": c.num_attention_heads,
        "n_kv_heads": c.num_key_value_heads,
        "d_mlp": c.intermediate_size,
        "vocab_size": c.vocab_size,
        "rope_theta": c.rope_parameters["rope_theta"],
        "norm_eps": c.rms_norm_eps,
        "tied_embeddings": bool(c.tie_word_embeddings),
    }
    return {"ids": ids, "next_token": next_token, "continuation": continuation, "config": config}, arrays


@contextlib.contextmanager
def _locked(folder: Path):
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # another process computing it: wait for it
        yield


# What tests/fast/test_smollm2.py asks transformers.
SENTENCES = [
    "The cat sat on the mat because it was warm",  # the source's sentence
    "The capital of France is",
    "She poured the milk into the cup, and then she drank it slowly.",
    "def add(a, b):\n    return a + b",
]

# Strings that stress a byte-level BPE: punctuation, digits, accents, CJK, emoji, tabs,
# newlines, runs of spaces, and a control token written in the text.
TOKENIZER_STRINGS = [
    "Hello, world! (Really?) Yes; no: maybe...",
    "In 2024, 1234567 + 89 = 1234656 and 3.14159 is pi.",
    "Café, naïve, façade, Zürich, Ærø",
    "東京 and Москва",
    "emoji: 🙂🐈 and 👩‍👩‍👧",
    "line one\nline two\n\n\ttabbed   spaced",
    "<|im_start|>user\nhi<|im_end|>",
]

FACTS = {
    "The capital of France is": " Paris",
    "The capital of Japan is": " Tokyo",
    "Water freezes at zero degrees": " Celsius",
    "One, two, three,": " four",
    "The opposite of hot is": " cold",
}

CONTINUE = ("The capital of France is", 6)  # greedy, 6 new tokens

INPUTS = Inputs(
    tokenize=tuple(TOKENIZER_STRINGS),
    trace=tuple(SENTENCES),
    next_token=tuple(FACTS),
    continue_=(CONTINUE,),
)


def reference(inputs: Inputs) -> Reference:
    """transformers' answers to ``inputs`` for the installed model file (cached)."""
    path = smollm2.gguf_path()
    folder = smollm2.cache_root() / "transformers-reference"
    entry = folder / f"{_key(inputs, smollm2.load().sha256)}.npz"
    with _locked(folder):
        if not entry.is_file():
            answers, arrays = _compute(inputs, path)
            fd, scratch = tempfile.mkstemp(dir=folder, suffix=".npz")
            with os.fdopen(fd, "wb") as f:
                np.savez(f, answers=np.array(json.dumps(answers)), **arrays)
            os.replace(scratch, entry)  # whole or not at all
    with np.load(entry) as stored:
        answers = json.loads(str(stored["answers"]))
        arrays = {name: stored[name] for name in stored.files if name != "answers"}
    return Reference(
        ids=answers["ids"],
        weights={t: arrays[f"weights_{i}"] for i, t in enumerate(inputs.trace)},
        logits={t: arrays[f"logits_{i}"] for i, t in enumerate(inputs.trace)},
        next_token=answers["next_token"],
        continuation=answers["continuation"],
        config=answers["config"],
    )


if __name__ == "__main__":  # the test run starts this in the background (tests/conftest.py)
    reference(INPUTS)
