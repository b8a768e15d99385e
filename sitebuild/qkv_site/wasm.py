"""Assemble the explorer's WebAssembly matrix product from its source.

``docs/assets/explorer/model/matmul.wat`` (WebAssembly text, written by hand) is assembled into
``matmul.wasm`` beside it by ``wat2wasm`` of the ``wasmtime`` package (the test dependency
group pins its version). Both files are committed; ``tests/fast/test_wasm_kernel.py``
assembles the text again and requires the committed bytes, so the binary the site serves is
the source in the repository. After editing the ``.wat``::

    .venv/bin/python -m qkv_site.wasm           # writes matmul.wasm
    .venv/bin/python -m qkv_site.wasm --check   # exit status 1 if matmul.wasm differs

The site's build does not run this: it copies both files as they are.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

MODEL = Path(__file__).resolve().parents[2] / "docs" / "assets" / "explorer" / "model"
SOURCE = MODEL / "matmul.wat"
BINARY = MODEL / "matmul.wasm"


def assemble(source: Path = SOURCE) -> bytes:
    """The WebAssembly binary of a ``.wat`` file (wasmtime's ``wat2wasm``)."""
    from wasmtime import wat2wasm  # the test group's dependency, not the site build's

    return bytes(wat2wasm(source.read_text(encoding="utf-8")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with matmul.wasm, write nothing")
    args = parser.parse_args(argv)
    built = assemble()
    if args.check:
        same = BINARY.exists() and BINARY.read_bytes() == built
        print(f"{BINARY.name}: {'the same bytes' if same else 'differs from'} {SOURCE.name} assembled")
        return 0 if same else 1
    BINARY.write_bytes(built)
    print(f"wrote {BINARY.name}: {len(built)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
