"""The checker of the rotary position embedding (the position chapter's exercise)."""

from __future__ import annotations

import numpy as np

from qkv.exercises._verdict import (
    RANDOM_CASES,
    CheckResult,
    Wrong,
    as_array,
    call,
    close,
    first_match,
    verdict,
    worst,
)
from qkv.rope import rope, rope_angles

BASE = 10_000.0  # qkv.rope's default, which the exercise uses


def _rope_cases(rng):
    """(x, positions, description): a probe whose pairs are (1, 0) first, then random inputs."""
    probe = np.zeros((4, 8))
    probe[:, 0::2] = 1.0  # every pair (1, 0): its angle after the rotation is the angle turned
    yield probe, np.arange(4), "x of shape (4, 8) whose every pair is (1, 0), positions 0 to 3"
    yield rng.normal(size=(5, 6)), np.arange(5), "x of shape (5, 6), positions 0 to 4"
    yield (
        rng.normal(size=(3, 4)),
        np.array([7, 8, 9]),
        "x of shape (3, 4) at positions 7, 8, 9 (three tokens after seven cached ones)",
    )
    yield rng.normal(size=(2, 3, 5, 8)), np.arange(5), "x of shape (2, 3, 5, 8): 2 sequences, 3 heads"
    for _ in range(RANDOM_CASES // 2):
        lead = tuple(int(n) for n in rng.integers(1, 4, size=rng.integers(0, 3)))
        t, d = int(rng.integers(1, 7)), 2 * int(rng.integers(1, 6))
        start = int(rng.integers(0, 20))
        positions = np.arange(start, start + t)
        yield rng.normal(size=(*lead, t, d)), positions, f"x of shape {(*lead, t, d)} at positions {start} on"


def _rotate(x, angles, pairs="adjacent"):
    """x with its pairs turned by ``angles`` (T, d/2): adjacent pairs or the two halves."""
    d = x.shape[-1]
    cos, sin = np.cos(angles), np.sin(angles)
    out = np.empty_like(x)
    if pairs == "adjacent":
        a, b = x[..., 0::2], x[..., 1::2]
        out[..., 0::2], out[..., 1::2] = a * cos - b * sin, a * sin + b * cos
    else:
        a, b = x[..., : d // 2], x[..., d // 2 :]
        out[..., : d // 2], out[..., d // 2 :] = a * cos - b * sin, a * sin + b * cos
    return out


def _rope_mistakes(x, positions):
    d, t = x.shape[-1], x.shape[-2]
    pos = np.asarray(positions, dtype=float)
    right = rope_angles(positions, d, BASE)
    i = np.arange(d // 2)
    at_one = rope_angles([1], d, BASE)[0]
    yield (
        "Your output is your input: no pair is turned at any position.",
        "Turn pair i at position m by m * base**(-2i/d): out[2i] = x[2i] cos - x[2i+1] sin, "
        "out[2i+1] = x[2i] sin + x[2i+1] cos.",
        lambda: x,
    )
    yield (
        "Your rotation turns dimension i with dimension i + d/2 (the two halves, as Hugging Face's "
        "Llama code does), where qkv pairs adjacent dimensions, (0, 1), (2, 3) and so on.",
        "Rotate x[..., 0::2] with x[..., 1::2], the even and odd dimensions.",
        lambda: _rotate(x, right, "halves"),
    )
    yield (
        "Your rotation turns every pair the other way: pair i at position m is turned by -m * base**(-2i/d).",
        "out[2i] = x[2i] cos - x[2i+1] sin and out[2i+1] = x[2i] sin + x[2i+1] cos: the minus sign "
        "is in the even output.",
        lambda: _rotate(x, -right),
    )
    yield (
        f"Your frequencies fall too slowly: at position 1 your pair 1 turns by "
        f"{BASE ** (-1 / d):.4g} rad where it should turn by {at_one[1] if d > 2 else 0:.4g}, as if "
        f"the exponent were -i/d, not -2i/d.",
        "Pair i turns by base**(-2i/d) per position: the exponents are np.arange(0, d, 2) / d.",
        lambda: _rotate(x, pos[:, None] * BASE ** (-i / d)[None, :]),
    )
    yield (
        "Your frequencies rise instead of falling: the last pair turns fastest, where pair 0 turns "
        "by 1 rad per position and the others ever more slowly.",
        "Pair i turns by base**(-2i/d) per position, a negative exponent.",
        lambda: _rotate(x, pos[:, None] * BASE ** (2 * i / d)) if d > 2 else None,
    )
    yield (
        "Every pair of yours turns by the same angle, one radian per position: the frequencies "
        "do not depend on the pair.",
        "Pair i turns by base**(-2i/d) per position, slower for each later pair.",
        lambda: _rotate(x, np.broadcast_to(pos[:, None], right.shape)) if d > 2 else None,
    )
    yield (
        f"Your rotation ignores the positions it is given: with positions starting at "
        f"{int(pos[0]) if t else 0} it turns row m as if it were at position m.",
        "Use the positions argument (a KV cache passes the absolute positions of the new tokens), "
        "not np.arange(T).",
        lambda: rope(x) if t and pos[0] != 0 else None,
    )
    yield (
        "Your rotation is the right one at positions one later: row m is turned by (m + 1) times "
        "its pair's frequency.",
        "Position m turns by m * frequency: the first token, at position 0, is not turned.",
        lambda: _rotate(x, rope_angles(pos + 1, d, BASE)),
    )


def _rope_case(fn, x, positions, what: str) -> None:
    batched = x.ndim > 2
    fix = (
        "it passes without leading axes, so index the pairs with x[..., 0::2] and let the angles "
        "(T, d/2) broadcast over the leading axes"
        if batched
        else ""
    )
    got = as_array(call(fn, f"on {what}", x.copy(), positions.copy(), hint=fix), what)
    want = rope(x, positions)
    if got.shape != want.shape:
        raise Wrong(
            f"On {what}, your output has shape {got.shape}, not x's shape {x.shape}.",
            "RoPE turns each pair in place: the output has the input's shape.",
        )
    if close(got, want):
        return
    first_match(got, _rope_mistakes(x, positions))
    norms_in = np.linalg.norm(x, axis=-1)
    norms_out = np.linalg.norm(got, axis=-1)
    if not np.allclose(norms_in, norms_out, rtol=1e-9, atol=1e-12):
        gap, where = worst(norms_out, norms_in)
        raise Wrong(
            f"On {what}, your output changes the length of row {where}: its norm moves by "
            f"{gap:.3g}, which no rotation does.",
            "A rotation of each pair keeps its length: out[2i] = x[2i] cos - x[2i+1] sin and "
            "out[2i+1] = x[2i] sin + x[2i+1] cos, with the same angle in both.",
        )
    gap, where = worst(got, want)
    raise Wrong(
        f"On {what}, your entry {where} is off by {gap:.3g} (lengths kept, so a rotation, but not "
        f"by the right angles).",
        "Pair i = (x[2i], x[2i+1]) at position m turns by m * base**(-2i/d), base 10,000.",
    )


def check_rope(fn, hint: bool = False) -> CheckResult:
    """Check your ``rope(x, positions)`` against :func:`qkv.rope` (base 10,000).

    ``x`` of shape ``(..., T, d)``, ``d`` even, holds queries or keys; ``positions`` the
    ``T`` positions of its rows. Pair ``i``, the adjacent dimensions ``(2i, 2i + 1)``, at
    position ``m`` is turned by the angle ``m * 10000**(-2i/d)``, counter-clockwise. The
    output has ``x``'s shape.

    Parameters
    ----------
    fn : callable
        Your function, called as ``fn(x, positions)``.
    hint : bool
        ``True`` adds the fix to a failure's message; without it the message names
        the mistake only (``result.hint()`` gives the fix afterwards).

    Returns
    -------
    CheckResult

    Raises
    ------
    ValueError
        If ``fn`` cannot be called.

    Examples
    --------
    >>> from qkv import rope
    >>> check_rope(rope)
    Passed: your rope matches qkv.rope on 50 random inputs, with and without batch and head
    axes, and at positions after cached tokens.
    """
    return verdict(
        "check_rope",
        fn,
        lambda f: [_rope_case(f, *case) for case in _rope_cases(np.random.default_rng(8))],
        f"Passed: your rope matches qkv.rope on {RANDOM_CASES // 2} random inputs, with and without "
        "batch and head axes, and at positions after cached tokens.",
        hint=hint,
    )
