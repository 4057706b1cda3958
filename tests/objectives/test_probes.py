"""The probe set: the same greedy questions for every launch, answers read as token ids."""

from __future__ import annotations

from typing import Any

import pytest

from objectives.endpoint import Endpoint
from objectives.probes import answer_probes, answer_tokens, probe_set, request_body
from tuner.errors import InfraError


def test_every_launch_asks_the_same_prompts_inside_the_vocabulary() -> None:
    a, b = probe_set(1000, count=4, max_tokens=8), probe_set(1000, count=4, max_tokens=8)
    assert a == b and len(a.prompts) == 4 and a.max_tokens == 8
    assert all(100 <= i < 1000 for p in a.prompts for i in p)
    assert probe_set(50000).prompts != probe_set(1000).prompts


def test_a_probe_is_greedy_seeded_and_asks_for_token_ids() -> None:
    body = request_body("tiny", [5, 6], 16)
    assert body["temperature"] == 0.0 and body["ignore_eos"] and body["max_tokens"] == 16
    assert body["return_tokens_as_token_ids"] and body["logprobs"] == 1
    assert isinstance(body["seed"], int) and body["prompt"] == [5, 6]


def test_answers_are_ids_where_the_server_names_them_else_words() -> None:
    ids = {"choices": [{"text": "x", "logprobs": {"tokens": ["token_id:7", "token_id:12"]}}]}
    assert answer_tokens(ids) == [7, 12]
    text = {"choices": [{"text": "the cat sat", "logprobs": None}]}
    assert answer_tokens(text) == ["the", "cat", "sat"]


class _Echo:
    """A virtual engine answering each prompt with its first tokens."""

    def run(self, *args: Any, **kwargs: Any) -> list[Any]:
        return []

    def server_counters(self) -> dict[str, float]:
        return {}

    def gauge_peaks(self) -> dict[str, float]:
        return {}

    def answer(self, prompt: Any, max_tokens: int) -> list[int]:
        return list(prompt[:max_tokens])


def test_a_virtual_engine_answers_in_its_own_ids() -> None:
    probes = probe_set(None, count=3, max_tokens=5)
    answers = answer_probes(Endpoint(model="m", virtual=_Echo()), probes)
    assert answers == [list(p[:5]) for p in probes.prompts]


def test_a_server_that_cannot_answer_is_an_infrastructure_fault() -> None:
    dead = Endpoint(model="m", base_url="http://127.0.0.1:9")
    with pytest.raises(InfraError, match="probe request"):
        answer_probes(dead, probe_set(None, count=1))
