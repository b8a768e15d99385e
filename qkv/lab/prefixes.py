"""Texts that begin alike run their shared beginning once.

An experiment on minimal pairs runs many texts that differ late: the same sentence with two
nouns, say. A causal model's early positions never see the later ones, so the shared
beginning gives the same keys and values in every text of a family. :func:`shared_prefixes`
groups texts into such families, and a :class:`PrefixCache` holds one layer's keys and
values of each family's beginning, copied to every text of the family, for the rest of each
text to attend to (as :class:`qkv.KVCache` does for one text). :mod:`qkv.lab.scoring` and
:mod:`qkv.lab.patching` both run their batches this way.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["PrefixCache", "shared_prefixes"]


def shared_prefixes(texts: Sequence, first_row: Sequence[int]) -> list[tuple[int, list[int]]]:
    """Texts that share a beginning, as (length of the shared beginning, indices of the texts).

    ``texts`` are sequences of token ids (any lengths); ``first_row[i]`` is the first
    position text ``i`` needs computed, so its beginning stops before it. Sorted, the texts
    of one family are neighbours; a text joins the family before it when it keeps the whole
    beginning that family shares, so two families that begin with the same word or two stay
    apart. A beginning is at least 2 tokens long; a text that shares none is a family of its
    own, with a beginning of length 0. Every text is in exactly one family.

    Examples
    --------
    Two texts that differ at their fourth token share three; the third text shares only its
    first token with them, and stays alone:

    >>> shared_prefixes([[5, 1, 2, 3], [5, 1, 2, 4], [5, 9, 9, 9]], [3, 3, 3])
    [(3, [0, 1]), (0, [2])]

    A text's beginning stops before the first position it needs:

    >>> shared_prefixes([[5, 1, 2, 3], [5, 1, 2, 4]], [2, 3])
    [(2, [0, 1])]
    """
    if len(texts) != len(first_row):
        raise ValueError(f"give one first row per text: {len(texts)} texts, {len(first_row)} first rows")
    order = sorted(range(len(texts)), key=lambda i: tuple(int(t) for t in texts[i]))
    families: list[tuple[int, list[int]]] = []
    for i in order:
        if families:
            shared, members = families[-1]
            lead = texts[members[0]]
            common = 0
            limit = min(len(lead), len(texts[i]), first_row[i])
            while common < limit and lead[common] == texts[i][common]:
                common += 1
            if len(members) == 1 and common >= 2:
                families[-1] = (min(common, first_row[members[0]]), [*members, i])
                continue
            if len(members) > 1 and common >= shared:
                members.append(i)
                continue
        families.append((0, [i]))
    return families


class PrefixCache:
    """One layer's keys and values for a batch of texts (or of variants of one text).

    It starts with the earlier positions' keys and values, (batch, n_kv_heads, P, d_head),
    and :func:`qkv.smollm2.decoder_layer` appends each new position's own, as it does to a
    :class:`qkv.KVCache`.

    Examples
    --------
    >>> cache = PrefixCache(np.zeros((2, 1, 3, 4)), np.zeros((2, 1, 3, 4)))
    >>> cache.append(np.ones((2, 1, 1, 4)), np.ones((2, 1, 1, 4)))
    >>> cache.keys.shape                 # (batch, n_kv_heads, P + 1, d_head)
    (2, 1, 4, 4)
    """

    def __init__(self, keys, values):
        keys, values = np.asarray(keys), np.asarray(values)
        if keys.ndim != 4 or keys.shape != values.shape:
            raise ValueError(
                "keys and values must both be (batch, n_kv_heads, P, d_head), got shapes "
                f"{keys.shape} and {values.shape}"
            )
        self.keys, self.values = keys, values

    def append(self, k, v) -> None:
        """Add new positions' keys and values, (batch, n_kv_heads, t, d_head) each."""
        self.keys = np.concatenate([self.keys, k], axis=-2)
        self.values = np.concatenate([self.values, v], axis=-2)
