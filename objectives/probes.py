"""A fixed probe set every launch answers greedily, so its answers can be set beside the baseline's.

A lossy setting (an FP8 KV cache, a quantized model, another kernel's numerics) may change
what the model says; the only way to know is to ask. After its tiers, a launch answers the
same ``PROBE_COUNT`` prompts, one at a time, greedily (temperature 0, a fixed seed, exactly
``max_tokens`` tokens: ``ignore_eos``), through the endpoint the benchmark used. Answers are
token ids where the server names them (vLLM's ``return_tokens_as_token_ids``), else the
answer's text split into words; a virtual engine answers in its own ids.

The prompts are token ids drawn from ``PROBE_SEED`` inside the served model's vocabulary (the
same bound the benchmark's prompts keep, ``objectives.vocab``), so every launch of a study
asks exactly the same questions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import httpx
import numpy as np

from objectives.answer import fetch_sync
from objectives.datasets._synthetic import token_ids
from objectives.endpoint import Endpoint, auth_headers
from tuner.errors import InfraError

PROBE_COUNT = 8
PROBE_PROMPT_LEN = 32
PROBE_MAX_TOKENS = 16
PROBE_SEED = 20240  # apart from any workload's seed: probes never repeat a measured prompt
PROBE_TIMEOUT_S = 120.0
_ID_PREFIX = "token_id:"

Answer = list[int] | list[str]


@runtime_checkable
class Answering(Protocol):
    """A virtual engine that answers one prompt greedily (the simulated engine does)."""

    def answer(self, prompt: Sequence[int], max_tokens: int) -> list[int]:
        """The ``max_tokens`` ids a greedy decode of ``prompt`` gives."""
        ...


@dataclass(frozen=True)
class ProbeSet:
    """The prompts (token ids) and how long each answer is."""

    prompts: tuple[tuple[int, ...], ...]
    max_tokens: int = PROBE_MAX_TOKENS


def probe_set(
    vocab_size: int | None,
    count: int = PROBE_COUNT,
    max_tokens: int = PROBE_MAX_TOKENS,
    prompt_len: int = PROBE_PROMPT_LEN,
) -> ProbeSet:
    """The study's fixed probes: ``count`` prompts inside ``vocab_size`` (None: the default
    bound, as the simulator and chat prompts use)."""
    rng = np.random.default_rng(PROBE_SEED)
    drawn = [token_ids(rng, prompt_len, vocab_size) for _ in range(count)]
    prompts = tuple(tuple(int(i) for i in ids) for ids in drawn)
    return ProbeSet(prompts, max_tokens)


def answer_probes(endpoint: Endpoint, probes: ProbeSet) -> list[Answer]:
    """Every probe's greedy answer, one request at a time (none in flight together, so a
    batch's numerics never differ between launches).

    Raises:
        InfraError: the server did not answer a probe (the benchmark it just served says the
            config works, so this is not the config's fault).
    """
    virtual = endpoint.virtual
    if virtual is not None:
        if not isinstance(virtual, Answering):
            return []
        return [virtual.answer(p, probes.max_tokens) for p in probes.prompts]
    if endpoint.base_url is None:
        raise InfraError("probe answers need an endpoint with a base_url or a virtual engine")
    return [_ask(endpoint, list(p), probes.max_tokens) for p in probes.prompts]


def request_body(model: str, prompt: Sequence[int], max_tokens: int) -> dict[str, Any]:
    """The ``/v1/completions`` body of one greedy probe (also what ``scripts/answer_eval.py``
    sends, so its score and the built-in agreement read the same answers)."""
    return {
        "model": model,
        "prompt": list(prompt),
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "seed": PROBE_SEED,
        "ignore_eos": True,
        "logprobs": 1,
        "return_tokens_as_token_ids": True,
        "stream": False,
    }


def answer_tokens(body: dict[str, Any]) -> Answer:
    """The answer's tokens from a completions response: ids when the server named them
    (``token_id:123``), else the text's words."""
    choice = (body.get("choices") or [{}])[0]
    tokens = (choice.get("logprobs") or {}).get("tokens") or []
    if tokens and all(isinstance(t, str) and t.startswith(_ID_PREFIX) for t in tokens):
        return [int(t.removeprefix(_ID_PREFIX)) for t in tokens]
    return str(choice.get("text") or "").split()


def _ask(endpoint: Endpoint, prompt: list[int], max_tokens: int) -> Answer:
    assert endpoint.base_url is not None
    url = endpoint.base_url.rstrip("/") + "/v1/completions"
    body = request_body(endpoint.model, prompt, max_tokens)
    try:
        resp = fetch_sync(
            "POST", url, PROBE_TIMEOUT_S, headers=auth_headers(endpoint.api_key), json=body
        )
    except (httpx.HTTPError, TimeoutError) as err:
        raise InfraError(f"probe request to {url} failed: {err}") from err
    if resp.status_code != 200:
        raise InfraError(f"probe request to {url}: HTTP {resp.status_code}: {resp.text[:200]}")
    try:
        return answer_tokens(resp.json())
    except ValueError as err:  # a server that only streams, or a broken one
        raise InfraError(f"probe request to {url}: not a JSON answer: {resp.text[:200]}") from err
