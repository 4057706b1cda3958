from __future__ import annotations

import pytest

from objectives.endpoint import Endpoint
from objectives.metrics import SLO
from objectives.result import TierResult
from objectives.runner import partial_results, run_benchmark, tier_duration
from objectives.workload import WorkloadSpec
from tests.objectives.paced_engine import PacedEngine
from tuner.errors import TunerError


def workload(**kw: object) -> WorkloadSpec:
    body: dict[str, object] = {
        "dataset": {"kind": "random", "input_len": 64, "output_len": 11},
        "num_prompts": 8,
        "tiers": [1, 4],
        "warmup": 2,
    }
    body.update(kw)
    return WorkloadSpec.model_validate(body)


def test_virtual_tiers_measure_the_known_pacing() -> None:
    engine = PacedEngine(ttft_s=0.1, itl_s=0.01)
    seen: list[TierResult] = []
    results = run_benchmark(Endpoint("m", virtual=engine), workload(), on_tier=seen.append)
    assert seen == results and [r.concurrency for r in results] == [1, 4]
    assert engine.runs == [(2, 1, None), (8, 1, None), (8, 4, None)]  # warm-up first
    one, four = (r.metrics for r in results)
    assert one["completed"] == 8 and one["failed"] == 0
    assert one["mean_ttft_ms"] == pytest.approx(100.0)
    assert one["p99_tpot_ms"] == pytest.approx(10.0) and one["median_itl_ms"] == pytest.approx(10)
    assert one["mean_e2el_ms"] == pytest.approx(200.0)
    assert one["duration"] == pytest.approx(8 * 0.2)  # last completion - first send
    assert four["duration"] == pytest.approx(2 * 0.2)
    assert four["output_throughput"] == pytest.approx(88 / 0.4)
    assert results[0].server["prefix_cache_hit_rate"] == 0.0
    assert not results[0].client_saturated and not results[0].has_failures


def test_the_warm_up_reports_its_virtual_seconds_and_none_is_not_reported() -> None:
    warmed: list[float] = []
    endpoint = Endpoint("m", virtual=PacedEngine(ttft_s=0.1, itl_s=0.01))
    run_benchmark(endpoint, workload(), on_warmup=warmed.append)
    assert warmed == [pytest.approx(2 * 0.2)]  # two requests one after the other
    run_benchmark(endpoint, workload(warmup=0), on_warmup=warmed.append)
    assert len(warmed) == 1


def test_prefix_counters_are_per_tier_deltas() -> None:
    ds = {
        "kind": "prefix_repetition",
        "num_prefixes": 2,
        "prefix_len": 30,
        "suffix_len": 10,
        "repeats": 3,
        "output_len": 4,
    }
    results = run_benchmark(
        Endpoint("m", virtual=PacedEngine()), workload(dataset=ds, num_prompts=None)
    )
    for r in results:  # 4 of 6 requests reuse 30 of 40 tokens, fresh prefixes per tier
        assert r.server["prefix_cache_hit_rate"] == pytest.approx(4 * 30 / (6 * 40))
        assert r.server["num_preemptions"] == 0.0


def test_first_round_moves_content_on_for_a_caller_that_measures_one_engine_again() -> None:
    ds = {"kind": "prefix_repetition", "num_prefixes": 2, "prefix_len": 30, "repeats": 3}
    spec = workload(dataset={**ds, "output_len": 4}, num_prompts=None, tiers=[4], warmup=0)
    endpoint = Endpoint("m", virtual=PacedEngine())
    (fresh,) = run_benchmark(endpoint, spec)
    (again,) = run_benchmark(endpoint, spec)  # round 0 once more: every prefix is cached
    (moved,) = run_benchmark(endpoint, spec, first_round=1)
    assert fresh.server["prefix_cache_hit_rate"] == pytest.approx(4 / 6)
    assert again.server["prefix_cache_hit_rate"] == pytest.approx(1.0)
    assert moved.server["prefix_cache_hit_rate"] == pytest.approx(4 / 6)


def test_open_loop_rate_is_passed_and_recorded() -> None:
    engine = PacedEngine()
    (r,) = run_benchmark(
        Endpoint("m", virtual=engine),
        workload(tiers=[4], request_rate=2.0, burstiness=0.5, warmup=0),
    )
    assert engine.runs == [(8, 4, 2.0)]
    assert r.request_rate == 2.0 and r.to_dict()["request_rate"] == 2.0


def test_failures_and_slos_per_tier() -> None:
    slos = [SLO(metric="p99_ttft_ms", max=50, tiers=[4]), SLO(metric="ttft", max=50)]
    results = run_benchmark(Endpoint("m", virtual=PacedEngine(cap=5)), workload(), slos)
    for r in results:
        assert r.failures == {"length not honoured": 8} and r.metrics["completed"] == 0
    engine = PacedEngine()
    one, four = run_benchmark(Endpoint("m", virtual=engine), workload(), slos)
    assert one.slo_violations == [] and four.slo_violations == ["p99_ttft_ms 100 (max of 8) > 50.0"]
    assert one.metrics["request_goodput"] == 0.0


class Interrupting(PacedEngine):
    def run(self, requests, concurrency, request_rate=None, burstiness=1.0):  # type: ignore[no-untyped-def]
        if len(self.runs) == 2:
            raise KeyboardInterrupt
        return super().run(requests, concurrency, request_rate, burstiness)


def test_interrupt_keeps_completed_tiers() -> None:
    with pytest.raises(KeyboardInterrupt) as info:
        run_benchmark(Endpoint("m", virtual=Interrupting()), workload(tiers=[1, 2, 4]))
    assert [r.concurrency for r in partial_results(info.value)] == [1]


def test_endpoint_without_target_is_a_user_error() -> None:
    with pytest.raises(TunerError, match="neither a base_url nor a virtual"):
        run_benchmark(Endpoint("m"), workload())


def test_duration_of_empty_and_failed_records() -> None:
    from objectives.records import RequestRecord

    assert tier_duration([]) == 0.0
    assert tier_duration([RequestRecord(1, 1, 2.0), RequestRecord(1, 1, 5.0, [6.5])]) == 4.5
