"""The steady-state window: TPOT, ITL and throughputs between a tier's ramp-up and its drain."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from objectives.metrics import SLO, compute_metrics
from objectives.records import RequestRecord
from objectives.result import TierResult
from objectives.steady import WINDOWED, steady_window
from objectives.tier import tier_result
from objectives.workload import WorkloadSpec


def req(send: float, ttft: float, tpot: float, tokens: int = 4) -> RequestRecord:
    chunks = [send + ttft + k * tpot for k in range(tokens)]
    return RequestRecord(10, tokens, send, chunks, tokens, success=True)


def closed_loop() -> list[RequestRecord]:
    """Two streams, seven requests: a slow ramp-up pair, three steady ones, a fast drain pair."""
    return [
        req(0.0, 0.5, 0.5),  # ramp-up: ends 2.0
        req(0.0, 1.5, 0.5),  # ramp-up: ends 3.0
        req(2.0, 1.7, 0.1),  # the window opens here, at the third arrival; ends 4.0
        req(3.0, 1.7, 0.1),  # ends 5.0
        req(4.0, 1.7, 0.1),  # ends 6.0
        req(5.0, 1.85, 0.05),  # drain: still running at the last arrival, ends 7.0
        req(6.0, 1.85, 0.05),  # the last arrival closes the window; ends 8.0
    ]


def workload(steady: bool, n: int = 7) -> WorkloadSpec:
    return WorkloadSpec.model_validate(
        {
            "dataset": {"kind": "random", "input_len": 10, "output_len": 4},
            "num_prompts": n,
            "tiers": [2],
            "steady_state": steady,
        }
    )


def test_the_window_holds_only_requests_between_ramp_up_and_drain() -> None:
    records = closed_loop()
    w = steady_window(records, 2)
    assert (w.start, w.end) == (2.0, 6.0)
    assert w.held == records[2:5]


def test_tpot_and_itl_rest_on_the_steady_requests_only() -> None:
    r = tier_result(closed_loop(), 2, workload(steady=True), [], {})
    m = r.metrics
    assert m["steady_requests"] == 3 and m["steady_window_s"] == pytest.approx(4.0)
    assert m["mean_tpot_ms"] == pytest.approx(100.0) and m["p99_tpot_ms"] == pytest.approx(100.0)
    assert m["tpot_samples"] == 3 and m["itl_samples"] == 9
    assert m["p99_itl_ms"] == pytest.approx(100.0)
    # TTFT, E2EL and the tier's duration still cover every request.
    assert m["ttft_samples"] == 7 and m["duration"] == pytest.approx(8.0)
    assert r.notes == []


def test_throughputs_count_what_happened_inside_the_window() -> None:
    m = tier_result(closed_loop(), 2, workload(steady=True), [], {}).metrics
    # Tokens streamed in [2, 6]: 1 of the first ramp-up request, 3 of the second, 4 x 3 steady.
    assert m["output_throughput"] == pytest.approx(16 / 4.0)
    assert m["request_throughput"] == pytest.approx(5 / 4.0)  # completions at 2, 3, 4, 5, 6
    assert m["total_token_throughput"] == pytest.approx((3 * 10 + 16) / 4.0)


def test_off_by_default_the_whole_tier_as_vllm_bench_serve() -> None:
    spec = WorkloadSpec.model_validate(
        {
            "dataset": {"kind": "random", "input_len": 10, "output_len": 4},
            "num_prompts": 7,
            "tiers": [2],
        }
    )
    assert spec.steady_state is False
    r = tier_result(closed_loop(), 2, spec, [], {})
    assert r.metrics == compute_metrics(closed_loop(), 8.0)
    assert r.metrics["tpot_samples"] == 7 and "steady_requests" not in r.metrics


def test_a_window_too_short_says_so_instead_of_a_figure() -> None:
    slos = [SLO(metric="p99_tpot_ms", max=500.0)]
    records = closed_loop()[:5]  # the last arrival at 4.0: one request in the window
    r = tier_result(records, 2, workload(steady=True, n=5), slos, {})
    assert r.metrics["steady_requests"] == 1
    assert not any(k in r.metrics for k in WINDOWED)
    assert r.metrics["p99_ttft_ms"] > 0  # what covers the whole tier stays
    assert len(r.notes) == 1 and "holds 1 requests, fewer than the tier's 2 streams" in r.notes[0]
    assert r.slo_violations == ["p99_tpot_ms not measured"]
    assert TierResult.from_dict(r.to_dict()) == r  # the note and the window's counts are kept


def test_the_option_is_a_checked_boolean() -> None:
    with pytest.raises(ValidationError):
        workload(steady="sometimes")  # type: ignore[arg-type]
    assert "ramp-up" in (WorkloadSpec.model_fields["steady_state"].description or "")
