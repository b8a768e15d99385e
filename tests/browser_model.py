"""What the browser tests of the explorer's trained mode share: qkv's own SmolLM2, loaded
once per worker, and a text's token ids as the page cuts them."""

from __future__ import annotations

from functools import cache
from urllib.parse import quote

from qkv_site.smollm2_data import MAX_TOKENS

from qkv import smollm2

PROB_SHOWN = 0.00005 + 1e-4  # four decimals, rounded once; plus the 1e-4 the worker may differ


@cache
def model():
    return smollm2.load()


@cache
def ids_of(text: str) -> tuple[int, ...]:
    """The ids the page runs: the text's tokens, no start token, at most MAX_TOKENS."""
    return tuple(model().tokenizer.encode(text, add_special_tokens=False).ids[:MAX_TOKENS])


def open_lab(page, site_url: str, text: str, **state) -> None:
    """Open the explorer on ``text`` (the reader's own) with the lab's address keys ``state``
    (values already quoted), load the model and wait for its first run."""
    query = "".join(f"&{k}={v}" for k, v in state.items())
    page.goto(f"{site_url}explorer/?model=smollm2&text={quote(text, safe='')}{query}")
    page.wait_for_selector("#qkv-explorer.qx-ready")
    page.get_by_test_id("load-model").click()
    page.wait_for_selector("#qkv-explorer .qx-trained[data-drawn^='own,']", timeout=120000)
