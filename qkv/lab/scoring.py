"""How likely does SmolLM2 find a piece of text? Log-probabilities of continuations.

A language model's behaviour is read from its next-token probabilities. Two ways of asking
it something, both here:

- :func:`continuation_logprobs`: ``log P(continuation | prompt)``, the sum over the
  continuation's tokens of each one's log-probability given everything before it. Put each
  candidate in a pronoun's place and compare how likely the model finds the rest of the
  sentence after each: *substitution scoring* (Trinh and Le 2018; the way the LM
  evaluation harness scores WinoGrande).
- :func:`answer_logprobs`: the log-probability of each candidate answer's first token
  right after a prompt that asks a question.

Texts asked together share their longest common prefix (:mod:`qkv.lab.prefixes`): it runs
once, and the rest of every text runs as one batch that attends to the prefix's keys and
values, copied to every text of the batch. Logits are computed only at the positions
scored: the output matrix is the largest in the model.

Examples
--------
With the model installed (not run here, since the model is optional)::

    from qkv import smollm2
    from qkv.lab import scoring
    model = smollm2.load()
    prompts = ["The trophy did not fit in the suitcase because the trophy",
               "The trophy did not fit in the suitcase because the suitcase"]
    scoring.continuation_logprobs(model, prompts, [" was too big."] * 2)  # (2,) nats
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from qkv.lab.prefixes import PrefixCache, shared_prefixes
from qkv.smollm2 import Model, check_ids, output_logits, run_layers

__all__ = ["answer_logprobs", "continuation_logprobs", "log_probs"]


def log_probs(model: Model, texts: Sequence, rows: Sequence) -> list[np.ndarray]:
    """Next-token log-probabilities at chosen positions of several texts, in batches.

    ``texts`` are token id arrays (any lengths); ``rows[i]`` lists positions of text ``i``.
    Returns, per text, an array (len(rows[i]), vocab_size): the log-probability of every
    token coming next after each of those positions.

    Texts that begin alike (the same sentence with two nouns, say) form a family whose
    shared prefix runs once; families whose prefixes are equally long run together, and
    the rest of each text runs in one batch, padded at the end (a causal model's earlier
    positions never see the padding).
    """
    texts = [check_ids(np.asarray(t), model.config) for t in texts]
    if not texts or len(texts) != len(rows):
        raise ValueError(f"give one list of rows per text: {len(texts)} texts, {len(rows)} lists of rows")
    rows = [np.asarray(r, dtype=int).reshape(-1) for r in rows]
    for r, t in zip(rows, texts, strict=True):
        if r.size == 0 or r.min() < 0 or r.max() >= len(t):
            raise ValueError(f"rows {r.tolist()} must be positions of a text of {len(t)} tokens")
    out: list[np.ndarray | None] = [None] * len(texts)
    by_length: dict[int, list[list[int]]] = {}
    for shared, members in shared_prefixes(texts, [int(r.min()) for r in rows]):
        by_length.setdefault(shared, []).append(members)
    for shared, families in sorted(by_length.items()):
        members = [i for family in families for i in family]
        family_of = np.repeat(np.arange(len(families)), [len(family) for family in families])
        width = max(len(texts[i]) for i in members) - shared
        batch = np.zeros((len(members), width), dtype=int)  # the rest of each text, padded with 0
        for b, i in enumerate(members):
            batch[b, : len(texts[i]) - shared] = texts[i][shared:]
        caches = None
        if shared:
            heads = np.stack([texts[family[0]][:shared] for family in families])  # (families, P)
            _, seen = run_layers(model, model.embedding[heads], np.arange(shared))
            caches = [PrefixCache(s.k[family_of], s.v[family_of]) for s in seen]  # one per text
        x, _ = run_layers(model, model.embedding[batch], np.arange(shared, shared + width), caches=caches)
        which = np.concatenate([np.full(rows[i].size, b) for b, i in enumerate(members)])
        where = np.concatenate([rows[i] - shared for i in members])
        logits = output_logits(model, x[which, where])  # (rows, vocab_size), float32
        top = logits.max(axis=-1, keepdims=True)
        total = np.log(np.exp(logits - top).sum(axis=-1, keepdims=True, dtype=np.float64))
        logp = logits - top - total  # float64: log-softmax of each row
        for i, piece in zip(
            members, np.split(logp, np.cumsum([rows[i].size for i in members])[:-1]), strict=True
        ):
            out[i] = piece
    return out


def continuation_logprobs(model: Model, prompts: Sequence[str], continuations: Sequence[str]) -> np.ndarray:
    """``log P(continuation | prompt)`` in nats for each pair of strings, (n,).

    The prompt and the continuation are tokenized apart and joined, as the LM evaluation
    harness does, so every text scores the same continuation tokens.
    """
    if len(prompts) != len(continuations) or not prompts:
        raise ValueError(f"give one continuation per prompt: {len(prompts)} and {len(continuations)}")
    texts, rows, wanted = [], [], []
    for prompt, continuation in zip(prompts, continuations, strict=True):
        p, c = model.encode(prompt), model.encode(continuation)
        if len(p) == 0 or len(c) == 0:
            raise ValueError(
                f"prompt and continuation must each hold a token, got {prompt!r}, {continuation!r}"
            )
        texts.append(np.concatenate([p, c]))
        rows.append(np.arange(len(p) - 1, len(p) + len(c) - 1))  # each row predicts the next
        wanted.append(c)
    logp = log_probs(model, texts, rows)
    return np.array([lp[np.arange(len(c)), c].sum() for lp, c in zip(logp, wanted, strict=True)])


def answer_logprobs(model: Model, prompts: Sequence[str], answers: Sequence[Sequence[str]]) -> np.ndarray:
    """Log-probability of each answer's first token right after each prompt, (n, k).

    ``answers[i]`` holds the k candidates for prompt ``i`` (" trophy", " suitcase"); their
    first tokens must differ, or the comparison would say nothing.
    """
    if len(prompts) != len(answers) or not prompts:
        raise ValueError(f"give one list of answers per prompt: {len(prompts)} and {len(answers)}")
    firsts = [[int(model.encode(a)[0]) for a in candidates] for candidates in answers]
    for candidates, ids in zip(answers, firsts, strict=True):
        if len(set(ids)) != len(ids):
            raise ValueError(f"answers {list(candidates)} begin with the same token")
    texts = [model.encode(p) for p in prompts]
    logp = log_probs(model, texts, [[len(t) - 1] for t in texts])
    return np.array([lp[0, ids] for lp, ids in zip(logp, firsts, strict=True)])
