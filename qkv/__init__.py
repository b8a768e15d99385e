"""qkv: queries, keys and values, in small tested NumPy functions.

Every formula, number and figure on the qkv site comes from this package.
"""

from qkv.cost import (
    DEEPSEEK_67B,
    LATENT_MODELS,
    MODELS,
    WINDOWED_MODELS,
    LatentModelConfig,
    ModelConfig,
    WindowedModelConfig,
    attention_flops,
    kv_cache_bytes,
    linear_attention_flops,
    mla_cache_bytes,
)
from qkv.diagnostics import ScoreStats, entropy, score_stats, softmax_jacobian
from qkv.dot_product import Attention, attention, scale_factor, softmax
from qkv.kvcache import KVCache, WorkCounter, decode_with_cache, decode_without_cache
from qkv.masks import causal_mask, padding_mask, sliding_window_mask
from qkv.multihead import (
    MultiHeadWeights,
    grouped_attention,
    merge_heads,
    multi_head_attention,
    split_heads,
)
from qkv.positions import alibi_bias, alibi_slopes, sinusoidal_positions
from qkv.projections import Projections, cross_attention, project, self_attention
from qkv.rope import rope, rope_angles
from qkv.tiled import TiledAttention, elu_plus_one, linear_attention, online_softmax, tiled_attention

__all__ = [
    "DEEPSEEK_67B",
    "LATENT_MODELS",
    "MODELS",
    "WINDOWED_MODELS",
    "Attention",
    "KVCache",
    "LatentModelConfig",
    "ModelConfig",
    "MultiHeadWeights",
    "Projections",
    "ScoreStats",
    "TiledAttention",
    "WindowedModelConfig",
    "WorkCounter",
    "alibi_bias",
    "alibi_slopes",
    "attention",
    "attention_flops",
    "causal_mask",
    "cross_attention",
    "decode_with_cache",
    "decode_without_cache",
    "elu_plus_one",
    "entropy",
    "grouped_attention",
    "kv_cache_bytes",
    "linear_attention",
    "linear_attention_flops",
    "merge_heads",
    "mla_cache_bytes",
    "multi_head_attention",
    "online_softmax",
    "padding_mask",
    "project",
    "rope",
    "rope_angles",
    "scale_factor",
    "score_stats",
    "self_attention",
    "sinusoidal_positions",
    "sliding_window_mask",
    "softmax",
    "softmax_jacobian",
    "split_heads",
    "tiled_attention",
]

__version__ = "0.1.0"
