"""The benchmark client sends the endpoint's API key with every request it makes."""

from __future__ import annotations

import socket

from objectives.endpoint import Endpoint
from objectives.runner import run_benchmark
from objectives.vocab import query_server
from objectives.workload import WorkloadSpec
from tests.objectives.servers import keyed_server

KEY = "sk-bench-42"


def workload() -> WorkloadSpec:
    body = {
        "dataset": {"kind": "random", "input_len": 8, "output_len": 3, "vocab_size": 500},
        "num_prompts": 4,
        "tiers": [1, 2],
        "warmup": 1,
    }
    return WorkloadSpec.model_validate(body)


def test_every_request_carries_the_key() -> None:
    with keyed_server(KEY) as url:
        results = run_benchmark(Endpoint("m", base_url=url, api_key=KEY), workload())
    assert [r.metrics["completed"] for r in results] == [4, 4]
    assert not any(r.failures for r in results)


def test_without_the_key_every_request_fails_as_401() -> None:
    with keyed_server(KEY) as url:
        results = run_benchmark(Endpoint("m", base_url=url), workload())
    assert all(r.metrics["completed"] == 0 for r in results)
    assert all(reason.startswith("HTTP 401") for r in results for reason in r.failures)


def test_the_model_list_is_asked_with_the_key() -> None:
    with keyed_server(KEY) as url:
        without, _ = query_server(url, "m")
        keyed, _ = query_server(url, "m", api_key=KEY)
    assert without is None
    assert keyed is not None and keyed.size == 777


def test_nobody_listening_is_recorded_as_a_refused_connection() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"  # bound, never listening
        results = run_benchmark(Endpoint("m", base_url=url), workload())
    assert [r.failures for r in results] == [{"connection refused": 4}] * 2
