"""A SmolLM2-shaped model small enough for tests and for the examples of qkv.lab.patching.

The root conftest.py hands :func:`tiny_model` to the doctests as ``tiny_model``; tests import
it (``from tiny_model import tiny_model``).
"""

from __future__ import annotations

import numpy as np

from qkv.multihead import MultiHeadWeights
from qkv.smollm2 import Config, Layer, Model


def tiny_model(seed: int = 0, n_layers: int = 2) -> Model:
    """Width 8, two query heads of width 4 sharing one key/value head, an MLP of width 16,
    10 tokens, a context of 32 positions; random weights drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    config = Config(n_layers, 8, 2, 1, 4, 16, vocab_size=10, rope_base=1e4, norm_eps=1e-5, context_length=32)

    def w(*shape):
        return rng.normal(size=shape) / np.sqrt(shape[0])

    layers = tuple(
        Layer(
            attn_norm=1 + rng.random(8),
            attention=MultiHeadWeights(w(8, 8), w(8, 4), w(8, 4), w(8, 8), n_heads=2, n_kv_heads=1),
            mlp_norm=1 + rng.random(8),
            w_gate=w(8, 16),
            w_up=w(8, 16),
            w_down=w(16, 8),
        )
        for _ in range(n_layers)
    )
    return Model(config, rng.normal(size=(10, 8)), layers, 1 + rng.random(8), tokenizer=None)
