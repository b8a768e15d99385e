"""The explorer's WebAssembly matrix product (docs/assets/explorer/model/matmul.wat): the
committed binary is its source assembled, and it computes x @ W.T for Q4_1 and Q8_0 weights.

The product runs here in wasmtime (the package that assembles it), on weights made up for the
test; the expected numbers come from gguf's own dequantization (gguf.quants.dequantize, which
qkv.smollm2 uses) and NumPy in float64, not from the kernel. The browser tests
(tests/browser/test_model_in_browser.py) check the whole model in Chromium against qkv.
"""

from __future__ import annotations

import numpy as np
import pytest
import wasmtime
from gguf import GGMLQuantizationType
from gguf.quants import dequantize
from qkv_site import wasm

F16_TABLE = np.arange(65536, dtype=np.uint16).view(np.float16).astype(np.float32)
TABLE, ROWS, X = 0, 65536 * 4, 65536 * 4 + 2 * 4096 * 4  # the layout kernel.js uses
KINDS = {"Q4_1": (0, 20), "Q8_0": (1, 34)}  # the kernel's code and the bytes per 32 weights


def test_the_committed_binary_is_the_source_assembled():
    """Rebuilding matmul.wasm from matmul.wat (python -m qkv_site.wasm) gives the same bytes."""
    assert wasm.assemble() == wasm.BINARY.read_bytes()
    assert wasm.main(["--check"]) == 0


def blocks(kind: str, n_out: int, n_in: int, rng) -> bytes:
    """Random weights in the file's layout: per 32 weights a float16 scale (and, Q4_1, a
    float16 minimum), then the quants."""
    n = n_out * n_in // 32
    scale = rng.normal(0, 0.02, n).astype(np.float16).view(np.uint8).reshape(n, 2)
    if kind == "Q4_1":
        low = rng.normal(-0.1, 0.05, n).astype(np.float16).view(np.uint8).reshape(n, 2)
        quants = rng.integers(0, 256, (n, 16), dtype=np.uint8)
        return np.concatenate([scale, low, quants], axis=1).tobytes()
    quants = rng.integers(-128, 128, (n, 32), dtype=np.int8).view(np.uint8)
    return np.concatenate([scale, quants], axis=1).tobytes()


def run_kernel(kind: str, data: bytes, x: np.ndarray, n_out: int, o0: int, o1: int) -> np.ndarray:
    """matmul(kind, ...) in wasmtime: y (T, n_out), zeros outside the outputs o0..o1."""
    t, n_in = x.shape
    y_at = X + x.nbytes
    packed = y_at + t * n_out * 4
    w_at = -(-(packed + x.nbytes) // 64) * 64
    store = wasmtime.Store()
    pages = -(-(w_at + len(data)) // 65536)
    memory = wasmtime.Memory(store, wasmtime.MemoryType(wasmtime.Limits(pages, pages)))
    module = wasmtime.Module(store.engine, wasm.BINARY.read_bytes())
    product = wasmtime.Instance(store, module, [memory]).exports(store)["matmul"]
    memory.write(store, F16_TABLE.tobytes(), TABLE)
    memory.write(store, np.ascontiguousarray(x, dtype=np.float32).tobytes(), X)
    memory.write(store, bytes(t * n_out * 4), y_at)
    memory.write(store, data, w_at)
    product(store, KINDS[kind][0], w_at, n_in, n_out, o0, o1, X, t, y_at, ROWS, packed, TABLE)
    return np.frombuffer(memory.read(store, y_at, y_at + t * n_out * 4), dtype=np.float32).reshape(t, n_out)


def dequantized(data: bytes, kind: str, n_out: int) -> np.ndarray:
    """gguf's dequantization of ``n_out`` rows of blocks: (n_out, n_in) float32."""
    return dequantize(np.frombuffer(data, dtype=np.uint8).reshape(n_out, -1), GGMLQuantizationType[kind])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("tokens", [1, 4, 7, 12, 13])
def test_the_product_is_x_times_the_dequantized_weights(kind, tokens):
    """Every output of x @ W.T to float32 precision, for token counts that use the four-token
    loop, the one-token loop and both; only the outputs asked for are written."""
    rng = np.random.default_rng(tokens)
    n_out, n_in = 10, 96
    data = blocks(kind, n_out, n_in, rng)
    weights = dequantized(data, kind, n_out)
    assert weights.shape == (n_out, n_in)
    x = rng.normal(0, 1, (tokens, n_in)).astype(np.float32)
    want = x.astype(np.float64) @ weights.astype(np.float64).T
    got = run_kernel(kind, data, x, n_out, 2, 8)
    scale = np.abs(x).astype(np.float64) @ np.abs(weights).astype(np.float64).T  # a sum's size
    assert np.all(np.abs(got[:, 2:8] - want[:, 2:8]) <= 1e-6 * scale[:, 2:8])
    assert np.all(got[:, :2] == 0) and np.all(got[:, 8:] == 0)


def test_dequantized_rows_are_exactly_ggufs():
    """With x the identity, each output is one weight: the kernel's dequantization is gguf's,
    bit for bit (a Q4_1 weight d * q + m, a Q8_0 weight d * q)."""
    rng = np.random.default_rng(0)
    for kind in KINDS:
        n_out, n_in = 4, 64
        data = blocks(kind, n_out, n_in, rng)
        weights = dequantized(data, kind, n_out)
        got = run_kernel(kind, data, np.eye(n_in, dtype=np.float32), n_out, 0, n_out)  # (n_in, n_out)
        np.testing.assert_array_equal(got.T, weights.astype(np.float32))
