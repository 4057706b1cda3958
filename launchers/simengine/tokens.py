"""Deterministic stand-in tokenization for the HTTP server.

A text prompt counts one token per whitespace-led word (``" word"``), which is how the
project's synthetic datasets render token ids as text, so a dataset's ``prompt_len`` and the
server's ``usage.prompt_tokens`` agree. A list of ints is taken as token ids. Full KV blocks are
hashed as a chain (each block's hash covers every token before it), as vLLM hashes them for
prefix caching. Generated text cycles through a fixed word list, one word per token. How much
of a prompt recurs (``recurring_share``) is what prompt-lookup speculative decoding can draft.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

import numpy as np

_WORD = re.compile(r"\s*\S+|\s+$")
_OUT_WORDS = (" the", " code", " returns", " a", " value", " and", " then", " it", " runs")


def token_ids(prompt: str | Sequence[int]) -> list[int]:
    """Token ids of a prompt: given ids, or one stable id per whitespace-led word."""
    if isinstance(prompt, str):
        return [zlib.crc32(w.encode()) for w in _WORD.findall(prompt) if w]
    return [int(t) for t in prompt]


def chat_prompt(messages: Sequence[dict[str, object]]) -> str:
    """A chat turned into one prompt text (role markers count as tokens, as templates do)."""
    parts = []
    for m in messages:
        content = m.get("content", "")
        if isinstance(content, list):  # OpenAI content parts
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        parts.append(f" <|{m.get('role', 'user')}|> {content}")
    return "".join(parts) + " <|assistant|>"


def block_hashes(ids: Sequence[int], block_size: int) -> list[int]:
    """Chained hashes of every full block of ``ids``."""
    out: list[int] = []
    parent = 0
    for start in range(0, len(ids) - block_size + 1, block_size):
        parent = hash((parent, tuple(ids[start : start + block_size])))
        out.append(parent)
    return out


def output_text(start: int, count: int) -> str:
    """``count`` generated tokens, the ``start``-th onwards."""
    return "".join(_OUT_WORDS[(start + i) % len(_OUT_WORDS)] for i in range(count))


def natural_length(ids: Sequence[int], max_tokens: int) -> int:
    """Where a request without ``ignore_eos`` stops: a stable draw from its prompt."""
    seed = zlib.crc32(repr(list(ids[-64:])).encode())
    return max(1, min(max_tokens, 16 + seed % 496))


def recurring_share(ids: Sequence[int] | np.ndarray, n: int = 3) -> float:
    """The share of the prompt's ``n``-grams that occur in it more than once: what a drafter
    that looks the context up (n-gram matching, suffix trees) can propose from. Uniformly
    random ids give about 0; code, which repeats its idioms, a half or more."""
    a = np.asarray(ids, dtype=np.int64)
    if len(a) <= n:
        return 0.0
    keys = a[: len(a) - n + 1].copy()
    for i in range(1, n):
        keys = keys * 1_000_003 + a[i : len(a) - n + 1 + i]
    _, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    return float((counts[inverse] > 1).mean())
