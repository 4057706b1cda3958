"""One workload over HTTP (real server, real client) and in virtual time: same figures."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from launchers.simengine import SimEngine
from objectives.endpoint import Endpoint
from objectives.runner import run_benchmark
from objectives.workload import RandomDataset, WorkloadSpec

MODEL = "MiniMaxAI/MiniMax-M2.5"


@pytest.mark.slow  # the same workload over HTTP and virtual time: about 6 s
def test_http_and_virtual_time_agree(sim_server: Callable[..., str]) -> None:
    workload = WorkloadSpec(
        dataset=RandomDataset(kind="random", input_len=300, output_len=150),
        num_prompts=12,
        tiers=[4],
        warmup=0,
        endpoint="completions",
    )
    url = sim_server(seed=3)
    over_http = run_benchmark(Endpoint(model=MODEL, base_url=url), workload)[0].metrics
    engine = SimEngine.from_argv(["-tp", "4", "--enable-expert-parallel"], {}, "h200x4", 3)
    virtual = run_benchmark(Endpoint(model=MODEL, virtual=engine), workload)[0].metrics
    assert over_http["completed"] == virtual["completed"] == 12
    for key in ("median_tpot_ms", "output_throughput"):
        assert abs(over_http[key] / virtual[key] - 1) < 0.05, (key, over_http[key], virtual[key])
