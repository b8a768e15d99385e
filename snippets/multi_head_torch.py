"""The multi-head layer of docs/multi-head.md in PyTorch, checked against qkv.

Needs torch (the test extra). Run it as `python snippets/multi_head_torch.py`.
On the page, `x` and `w` come from the blocks above; run alone, this builds
the same ones.
"""

# --8<-- [start:imports]
import numpy as np
import torch
import torch.nn.functional as F

import qkv

# --8<-- [end:imports]
rng = np.random.default_rng(0)
w = qkv.MultiHeadWeights.random(rng, d_model=512, n_heads=8)
x = rng.normal(size=(6, 512))

# --8<-- [start:torch]
def torch_multi_head(x, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """Multi-head self-attention around F.scaled_dot_product_attention."""

    def split(m):  # (..., T, heads * d_head) -> (..., heads, T, d_head)
        return m.unflatten(-1, (n_heads, -1)).transpose(-3, -2)

    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    if mask is not None:
        mask = mask.unsqueeze(-3)  # (..., 1, Tq, Tk): same for every head
    heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return heads.transpose(-3, -2).flatten(-2) @ w_o  # (..., T, d_model)


t = torch.from_numpy  # float64 stays float64: only rounding can differ
causal = qkv.causal_mask(6)  # True where a query may attend, as in SDPA
theirs = torch_multi_head(t(x), t(w.w_q), t(w.w_k), t(w.w_v), t(w.w_o),
                          n_heads=8, mask=t(causal))
ours = qkv.multi_head_attention(x, x, w, mask=causal).output
print(f"max |torch - qkv| = {np.abs(theirs.numpy() - ours).max():.1e}")
# --8<-- [end:torch]
