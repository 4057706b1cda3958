"""``run_benchmark`` against the simulated vLLM engine in virtual time."""

from __future__ import annotations

from pathlib import Path

from launchers.sim import SimLauncher, SimSettings
from objectives.runner import run_benchmark
from objectives.workload import WorkloadSpec
from tests.objectives.sim_engine import sim_config


def sim_endpoint_run(tmp_path: Path, workload: WorkloadSpec, *args: str) -> list:  # type: ignore[type-arg]
    with SimLauncher(SimSettings()) as launcher:
        launcher.start(sim_config(*args), tmp_path)
        return run_benchmark(launcher.wait_ready(5.0), workload)


def test_scenario_two_prefix_repetition_on_the_sim(tmp_path: Path) -> None:
    # domain.md scenario 2, scaled down: prompts of 20K tokens each sent 3 times.
    workload = WorkloadSpec.model_validate(
        {
            "dataset": {
                "kind": "prefix_repetition",
                "num_prefixes": 4,
                "prefix_len": 20_000,
                "suffix_len": 200,
                "repeats": 3,
                "output_len": 64,
            },
            "tiers": [1, 4],
            "warmup": 1,
            "seed": 3,
        }
    )
    results = sim_endpoint_run(tmp_path, workload)
    assert [r.concurrency for r in results] == [1, 4]
    for r in results:
        m = r.metrics
        assert m["completed"] == 12 and m["failed"] == 0 and not r.client_saturated
        assert m["total_output_tokens"] == 12 * 64
        assert 0 < m["median_tpot_ms"] <= m["p99_tpot_ms"]
        assert m["mean_ttft_ms"] > m["median_tpot_ms"]  # a 20K prefill outlasts a decode step
        # 8 of 12 requests reuse a 20K prefix: the engine's own counters say so.
        assert 0.4 < r.server["prefix_cache_hit_rate"] < 0.75
        assert r.server["generation_tokens"] == 12 * 64
        # Gauges sampled during the tier: a 20K prompt holds KV while it runs.
        assert 0 < r.server["kv_cache_usage_peak"] <= 1
        assert 1 <= r.server["num_requests_running_peak"] <= r.concurrency
    one, four = results
    assert four.metrics["output_throughput"] > one.metrics["output_throughput"]


def test_same_seed_same_numbers(tmp_path: Path) -> None:
    workload = WorkloadSpec.model_validate(
        {
            "dataset": {"kind": "random", "input_len": 8000, "output_len": 32, "range_ratio": 0.5},
            "num_prompts": 10,
            "tiers": [2],
            "seed": 1,
        }
    )
    (a,) = sim_endpoint_run(tmp_path / "a", workload)
    (b,) = sim_endpoint_run(tmp_path / "b", workload)
    assert a.metrics == b.metrics
