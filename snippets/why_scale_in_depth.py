"""The scale in depth: the spread of scores, softmax's saturation and
its gradient at initialisation, and one cell of the training sweep.

Run: python snippets/why_scale_in_depth.py
"""

# --8<-- [start:spread]
import numpy as np

import qkv
from qkv.lab.scaling import draw_queries_keys, saturation, score_samples

# q and k with independent N(0, 1) components; 20,000 pairs per d_k
print(" d_k  std(q.k)  sqrt(d_k)  std(q.k / sqrt(d_k))")
spread = {}
for d_k in [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]:
    raw = score_samples(d_k, scale=False)  # q.k of each pair
    spread[d_k] = raw.std()
    scaled = (raw / np.sqrt(d_k)).std()  # the same scores, divided by sqrt(d_k)
    print(f"{d_k:4}  {spread[d_k]:8.2f}  {np.sqrt(d_k):9.2f}  {scaled:20.3f}")
ratio = spread[64] / spread[1]
print(f"std at d_k=64 / std at d_k=1 = {ratio:.2f}   (sqrt(64) = 8)")
# --8<-- [end:spread]


# --8<-- [start:saturation]
n_keys = 6  # one query over six keys, like the toy sentence; 10,000 draws
print(
    f"uniform weights over {n_keys} keys: max weight {1 / n_keys:.3f},",
    f"entropy {np.log(n_keys):.3f} nats",
)
print(" d_k  scaled  mean max w  max w > 0.99  mean entropy  median |J|")
for d_k in [1, 64]:
    for scale in [True, False]:
        s = saturation(d_k, scale=scale, n_keys=n_keys)
        near_one_hot = (s.max_weight > 0.99).mean()
        print(
            f"{d_k:4}  {scale!s:6}  {s.max_weight.mean():10.3f}",
            f"{near_one_hot:13.1%}  {s.entropy.mean():12.3f}",
            f"{np.median(s.jacobian_norm):11.4f}",
        )
# --8<-- [end:saturation]


# --8<-- [start:query_gradient]
print("        median |dw/dq|        mean |dw/dq|")
print(" d_k   scaled  unscaled     scaled  unscaled")
for d_k in [64, 256, 512]:
    scaled = saturation(d_k, scale=True).query_gradient_norm
    raw = saturation(d_k, scale=False).query_gradient_norm
    print(
        f"{d_k:4}  {np.median(scaled):7.4f}  {np.median(raw):8.4f}",
        f"  {scaled.mean():8.3f}  {raw.mean():8.3f}",
    )
# --8<-- [end:query_gradient]


# --8<-- [start:keys]
from qkv.lab.scaling import scale_effect

# one query over n_keys keys at d_k = 64; the same 10,000 draws with and
# without scaling (over six keys, the draws of the table above)
print("        share copying one value    median |dw/dq|")
print("n_keys  unscaled  scaled          unscaled  scaled")
for n_keys in [6, 64, 512]:
    e = scale_effect(d_k=64, n_keys=n_keys, threshold=0.95, n_draws=10_000)
    print(
        f"{n_keys:6}  {e.copying[0]:8.1%}  {e.copying[1]:6.1%}",
        f"        {e.median_query_gradient[0]:8.4f}  "
        f"{e.median_query_gradient[1]:6.4f}",
    )
# --8<-- [end:keys]


# --8<-- [start:settings]
from qkv.lab.training import SCALE_SWEEP as SWEEP
from qkv.lab.training import train

for name, value in SWEEP._asdict().items():  # fixed before the first run
    print(f"{name:15} {value}")
# --8<-- [end:settings]


# --8<-- [start:training]
# d_k = 64, T = 64 pairs, seed 0: one head per learning rate, both arms
curves = train(
    64,
    64,
    SWEEP.learning_rates,
    seed=0,
    steps=SWEEP.steps,
    batch_size=SWEEP.batch_size,
)
print("        held-out loss after training   recall accuracy")
print(" rate     unscaled  scaled             unscaled  scaled")
for i, rate in enumerate(SWEEP.learning_rates):
    loss, accuracy = curves.loss[:, i, -1], curves.accuracy[:, i, -1]
    print(
        f"{rate:5g}  {loss[0]:10.3f}  {loss[1]:6.3f}",
        f"            {accuracy[0]:8.0%}  {accuracy[1]:6.0%}",
    )
# --8<-- [end:training]


# --8<-- [start:keys_widths]
# the same measurement at d_k = 16 and 256, 300 draws each
print(" d_k  n_keys  copying: unscaled  scaled   |dw/dq|: unscaled  scaled")
for d_k in [16, 256]:
    for n_keys in [6, 64, 512]:
        e = scale_effect(d_k=d_k, n_keys=n_keys, n_draws=300)
        print(
            f"{d_k:4}  {n_keys:6}  {e.copying[0]:17.1%}  {e.copying[1]:6.1%}",
            f"  {e.median_query_gradient[0]:17.4f}  "
            f"{e.median_query_gradient[1]:6.4f}",
        )
# --8<-- [end:keys_widths]


# --8<-- [start:d_k_one]
print("scale factor at d_k=1:", qkv.scale_factor(True, 1))
rng = np.random.default_rng(0)
q, k = rng.normal(size=(6, 1)), rng.normal(size=(6, 1))  # six tokens, d_k = 1
v = rng.normal(size=(6, 3))
with_scale = qkv.attention(q, k, v, scale=True).weights
without = qkv.attention(q, k, v, scale=False).weights
same = np.array_equal(with_scale, without)
print("weights with and without scaling are identical:", same)
# --8<-- [end:d_k_one]


# --8<-- [start:assumptions]
q, k = next(draw_queries_keys(d_k=64, n_draws=2000))  # unit variance
q, k = q[:, 0], k[:, 0]  # (2000, 64) each: one query-key pair per row
for sigma in [1.0, 2.0]:  # std 2: what training may well produce
    dots = ((sigma * q) * (sigma * k)).sum(axis=-1)
    scores = dots * qkv.scale_factor(True, 64)
    print(f"component std {sigma}: std of scaled scores = {scores.std():.2f}")
# --8<-- [end:assumptions]
