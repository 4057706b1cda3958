from __future__ import annotations

import pytest

from objectives.endpoint import Endpoint
from objectives.lag import ClientLag
from objectives.runner import run_benchmark
from objectives.workers import merge, split
from objectives.workload import WorkloadSpec


def test_split_spreads_requests_and_concurrency() -> None:
    assert split(10, 5, 2) == [([0, 2, 4, 6, 8], 3), ([1, 3, 5, 7, 9], 2)]
    assert split(3, 8, 4) == [([0], 3), ([1], 3), ([2], 2)]  # no idle worker
    assert split(4, 1, 3) == [([0, 1, 2, 3], 1)]
    shares = split(1000, 256, 3)
    assert sum(c for _, c in shares) == 256
    assert sorted(i for idx, _ in shares for i in idx) == list(range(1000))


def test_merge_lags() -> None:
    a = ClientLag([0.001], [], cpu_s=1.0, wall_s=4.0)
    b = ClientLag([0.003], [0.01], cpu_s=3.0, wall_s=5.0)
    m = merge([a, b])
    assert m.summary()["cpu_share"] == pytest.approx(4.0 / 10.0)
    assert m.summary()["workers"] == 2.0 and m.send_lag_s == [0.01]


def test_two_client_processes_measure_one_tier(paced_server: str) -> None:
    workload = WorkloadSpec.model_validate(
        {
            "dataset": {"kind": "random", "input_len": 16, "output_len": 6, "range_ratio": 0.5},
            "num_prompts": 12,
            "tiers": [4],
            "warmup": 1,
            "request_timeout_s": 30,
        }
    )
    seen: list[int] = []
    (r,) = run_benchmark(
        Endpoint("paced", base_url=paced_server),
        workload,
        on_request=lambda rec: seen.append(rec.output_len),
        client_workers=2,
    )
    assert r.metrics["completed"] == 12 and r.failures == {}
    assert r.client["workers"] == 2.0
    assert len(seen) == 12
    assert r.server["generation_tokens"] == r.metrics["total_output_tokens"]
    assert 0 < r.metrics["duration"] < 30
