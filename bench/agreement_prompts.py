"""The prompt file both clients of ``bench.vllm_agreement`` read: ShareGPT records of English
words, each prompt exactly ``input_len`` tokens as the server counts them."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

# vLLM's ShareGPT loader drops prompts outside these (datasets.py, is_valid_sequence).
VLLM_MIN_PROMPT, VLLM_MAX_PROMPT, VLLM_MAX_TOTAL = 4, 1024, 2048
# Common English words, 2 to 4 tokens each in the model's byte-level BPE; " a" is one token,
# so every prompt can end on exactly its target.
_WORD_TEXT = (
    "a the of and to in is it you that he was for on are with as his they be at one have this"
    " from or had by word but what some we can out other were all there when up use your"
    " how said an each she which do their time if will way about many then them write would"
    " like so these her long make thing see him two has look more day could go come did"
    " number sound no most people my over know water than call first who may down side been"
)
WORDS = tuple(w for w in _WORD_TEXT.split())


def word_costs(count: Callable[[str], int], words: Sequence[str] = WORDS) -> dict[str, int]:
    """Tokens of each ``" word"``: a byte-level BPE splits text before every space, so a
    prompt of such words has the sum of their counts (the server checks every prompt after)."""
    return {" " + w: count(" " + w) for w in words}


def compose(costs: Mapping[str, int], target: int, rng: random.Random) -> str:
    """Random words whose token counts add up to exactly ``target``."""
    words, left, big = [], target, max(costs.values())
    pool = sorted(costs)
    while left > 0:
        # Far from the end any word fits; near it, only words that do not overshoot.
        fits = pool if left >= big else [w for w in pool if costs[w] <= left]
        if not fits:
            raise ValueError(f"no word of at most {left} tokens to end a prompt with")
        words.append(rng.choice(fits))
        left -= costs[words[-1]]
    return "".join(words)


def sharegpt_entries(prompts: Sequence[tuple[str, int]], output_len: int) -> list[dict[str, Any]]:
    """ShareGPT records both loaders read: a human turn (the prompt) and a reply.

    ``token_count`` is the server's count: tune takes it as the prompt length (instead of its
    characters / 4 estimate); vLLM ignores it. The reply only has to exist (both clients get a
    fixed output length).
    """
    reply = {"from": "gpt", "value": " ok" * output_len, "token_count": output_len}
    return [
        {
            "id": f"agreement-{i}",
            "conversations": [{"from": "human", "value": text, "token_count": n}, dict(reply)],
        }
        for i, (text, n) in enumerate(prompts)
    ]


def check_lengths(input_len: int, output_len: int) -> None:
    """Refuse lengths vLLM's ShareGPT loader would silently drop (fewer prompts sent)."""
    if not VLLM_MIN_PROMPT <= input_len <= VLLM_MAX_PROMPT:
        raise SystemExit(f"--input-len must be {VLLM_MIN_PROMPT}..{VLLM_MAX_PROMPT} tokens")
    if input_len + output_len > VLLM_MAX_TOTAL:
        raise SystemExit(f"--input-len + --output-len must be at most {VLLM_MAX_TOTAL}")


def write_prompt_file(
    path: Path, count: Callable[[str], int], n: int, input_len: int, output_len: int, seed: int
) -> list[int]:
    """Writes ``n`` prompts of ``input_len`` tokens to ``path``; their counts by ``count``."""
    costs, rng = word_costs(count), random.Random(seed)
    prompts = [compose(costs, input_len, rng) for _ in range(n)]
    counted = [(text, count(text)) for text in prompts]
    path.write_text(json.dumps(sharegpt_entries(counted, output_len), indent=1) + "\n")
    return [c for _, c in counted]
