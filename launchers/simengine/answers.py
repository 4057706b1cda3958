"""What the simulated engine answers to a greedy prompt, and how a lossy setting changes it.

A greedy decode of one prompt is a fixed token sequence for the model as served by default: a
stable draw from the prompt alone, so every launch of a study answers it the same way. A lossy
setting (an FP8 KV cache, another kernel's numerics) changes the answer of a share of prompts,
as the profile's ``answers`` section declares: for each prompt and setting a stable draw says
whether this answer is one that setting changes and from which token on, and from that token
the answer goes its own way (a greedy decode that took another token conditions every later
one on it). Several lossy settings at once: the earliest change wins.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

import numpy as np

FIRST_ID = 100  # as the benchmark's prompts keep clear of special tokens


def greedy_answer(
    prompt: Sequence[int],
    max_tokens: int,
    vocab: int,
    changes: Mapping[str, float],
) -> list[int]:
    """The ``max_tokens`` ids answering ``prompt``; ``changes`` maps each lossy setting in
    force (``kv_cache_dtype=fp8``) to the share of answers it changes."""
    key = ",".join(map(str, prompt)).encode()
    tokens = _draw(key, max_tokens, vocab)
    starts = [_change_at(key, setting, share, max_tokens) for setting, share in changes.items()]
    first = min((s for s in starts if s is not None), default=None)
    if first is None:
        return tokens
    own = "|".join(sorted(changes)).encode()
    tail = _draw(key + b"/" + own, max_tokens - first, vocab)
    # The first changed token differs by construction: a greedy change is another token.
    if tail and tail[0] == tokens[first]:
        tail[0] = FIRST_ID + (tail[0] - FIRST_ID + 1) % max(1, vocab - FIRST_ID)
    return tokens[:first] + tail


def _change_at(key: bytes, setting: str, share: float, max_tokens: int) -> int | None:
    """Where ``setting`` changes this answer (None: it leaves it alone)."""
    digest = hashlib.blake2b(key + b"@" + setting.encode(), digest_size=16).digest()
    u = int.from_bytes(digest[:8], "little") / 2**64
    if u >= share:
        return None
    return int.from_bytes(digest[8:], "little") % max_tokens


def _draw(key: bytes, n: int, vocab: int) -> list[int]:
    seed = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little")
    rng = np.random.default_rng(seed)
    low = FIRST_ID if vocab > 2 * FIRST_ID else 0
    return [int(t) for t in rng.integers(low, vocab, size=n)]
