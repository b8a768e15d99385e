"""Other ways to write position: sinusoidal position vectors, ALiBi's distance
penalty, and how far a stack of sliding-window layers reaches.

Run: python snippets/position_variants.py
"""

# --8<-- [start:sinusoid_shift]
import numpy as np

import qkv

pe = qkv.sinusoidal_positions(6000, 16)  # (6000, 16): one row per position
for k in (1, 7, 50):
    # the one matrix M_k with pe[p + k] = M_k @ pe[p], fitted on positions 0-2999
    fit, *_ = np.linalg.lstsq(pe[:3000], pe[k : 3000 + k], rcond=None)
    m_k = fit.T  # (16, 16)
    moved = pe[: 6000 - k] @ m_k.T  # M_k applied at every position, 3000 unseen
    error = np.abs(moved - pe[k:]).max()
    print(
        f"offset {k:>2}: M_k moves each position k ahead, worst error {error:.0e}"
    )
# the fitted M_k is a rotation of each (sin, cos) pair by k × its frequency
omega = 10_000.0 ** (-np.arange(0, 16, 2) / 16)  # (8,)
c, s = np.cos(k * omega), np.sin(k * omega)
rotation = np.zeros((16, 16))
rotation[0::2, 0::2] = np.diag(c)  # sin(a + b) = sin a cos b + cos a sin b
rotation[0::2, 1::2] = np.diag(s)
rotation[1::2, 0::2] = np.diag(-s)  # cos(a + b) = cos a cos b - sin a sin b
rotation[1::2, 1::2] = np.diag(c)
print(f"M_50 against the rotation by 50 ω_i: {np.abs(m_k - rotation).max():.0e}")
# --8<-- [end:sinusoid_shift]


# --8<-- [start:alibi]
slopes = qkv.alibi_slopes(8)
bias = qkv.alibi_bias(8, 8)  # (heads, 8, 8): minus slope times distance
print("slopes:", " ".join(f"1/{1 / m:.0f}" for m in slopes))
last = 7  # the last query, which may read all 8 tokens
for h in (0, 3, 7):
    penalty = 0.0 - bias[h, last, ::-1]  # at distance 0, 1, ..., 7
    steps = np.diff(penalty)
    w = qkv.softmax(bias[h, last])  # equal content scores: ALiBi alone
    print(
        f"head {h + 1}: penalty at distance 0-3 {penalty[:4].round(3)} ...,",
        f"each step {steps.min():.4f} to {steps.max():.4f};",
        f"weight on itself {w[last]:.3f}",
    )
# --8<-- [end:alibi]


# --8<-- [start:receptive]
t, window = 40, 4
one_layer = qkv.sliding_window_mask(t, window)  # (40, 40)
reach = np.eye(t, dtype=bool)  # before any layer, a token holds only itself
for n_layers in range(1, 5):
    # layer L reads layer L-1's outputs: compose the masks (boolean product)
    reach = (one_layer.astype(int) @ reach.astype(int)) > 0
    back = int(reach[-1].sum())  # how many tokens the last one depends on
    print(
        f"{n_layers} layer(s) of window {window}: the last token reaches",
        f"{back} tokens, (W-1)·L+1 = {(window - 1) * n_layers + 1}",
    )
mistral = (4096 - 1) * 32 + 1  # Mistral 7B: 32 layers, window 4096
print(f"Mistral 7B, 32 layers of window 4,096: {mistral:,} tokens")
# --8<-- [end:receptive]


# --8<-- [start:exercise_added]
from qkv import toy

x, p = toy.feature_embeddings(), toy.hand_built_projections()  # hand-built
order = [5, 4, 3, 2, 1, 0]  # the sentence backwards
rng = np.random.default_rng(1)
positions = rng.normal(0.0, 0.5, size=(6, x.shape[1]))  # one per slot
milk = toy.SENTENCE.index("milk")
reversed_at = order.index(milk)  # where milk sits in the reversed sentence
v_in_order = (x + positions) @ p.w_v  # position added to the embeddings
v_reversed = (x[order] + positions) @ p.w_v
print("milk's value in order: ", v_in_order[milk].round(2))
print("milk's value reversed: ", v_reversed[reversed_at].round(2))
# --8<-- [end:exercise_added]


# --8<-- [start:exercise_window]
t, window, n_layers = 120, 8, 6
step = qkv.sliding_window_mask(t, window).astype(int)
reach = np.eye(t, dtype=int)
for _ in range(n_layers):
    reach = ((step @ reach) > 0).astype(int)
sources = np.flatnonzero(reach[100])  # what position 100's top output draws on
print(f"position 100 draws on positions {sources[0]} to {sources[-1]},")
print(f"{len(sources)} tokens; a rolling cache holds {window} per layer")
# --8<-- [end:exercise_window]


# --8<-- [start:exercise_sinusoid_dot]
pe = qkv.sinusoidal_positions(300, 64)
for p, q in [(0, 10), (100, 110), (250, 260), (0, 40)]:
    print(f"PE({p:>3}) · PE({q:>3}) = {pe[p] @ pe[q]:.6f}")
# --8<-- [end:exercise_sinusoid_dot]
