from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from objectives.metrics import (
    LENGTH_NOT_HONOURED,
    METRIC_KEYS,
    SLO,
    compute_metrics,
    count_failures,
    merge_failures,
    slo_violations,
)
from objectives.records import RequestRecord
from objectives.result import TierResult
from objectives.tails import samples_key, tail_note


def rec(
    send: float, chunks: list[float], out: int, prompt: int = 10, **kw: object
) -> RequestRecord:
    return RequestRecord(
        prompt_len=prompt,
        output_len=out,
        send_time=send,
        chunk_times=chunks,
        output_tokens=kw.pop("tokens", out),
        success=kw.pop("success", True),
        **kw,
    )  # type: ignore[arg-type]


def test_keys_are_vllm_bench_serve_keys() -> None:
    m = compute_metrics([rec(0.0, [0.1, 0.2], 2)], 1.0)
    assert tuple(m) == METRIC_KEYS
    for key in (
        "median_tpot_ms",
        "p99_tpot_ms",
        "mean_ttft_ms",
        "p99_itl_ms",
        "p90_e2el_ms",
        "std_ttft_ms",
        "output_throughput",
        "total_token_throughput",
        "request_goodput",
    ):
        assert key in m


def test_input_tokens_are_the_servers_count_where_it_reported_one() -> None:
    # A text prompt's length is an estimate; vllm bench serve counts usage.prompt_tokens.
    a = rec(0.0, [0.5, 0.6], 2, prompt=55)
    a.prompt_tokens = 128
    b = rec(1.0, [1.2, 1.3], 2, prompt=50)  # no usage reported: the estimate stands
    assert compute_metrics([a, b], 2.0)["total_input_tokens"] == 178


def test_formulas_on_hand_made_records() -> None:
    a = rec(0.0, [0.5, 0.6, 0.8, 1.1], 4, prompt=100)  # ttft .5, e2el 1.1, tpot .2
    b = rec(1.0, [1.2, 1.3], 2, prompt=50)  # ttft .2, e2el .3, tpot .1
    m = compute_metrics([a, b], 2.0)
    assert m["completed"] == 2 and m["failed"] == 0
    assert m["total_input_tokens"] == 150 and m["total_output_tokens"] == 6
    assert m["request_throughput"] == 1.0
    assert m["output_throughput"] == 3.0
    assert m["total_token_throughput"] == 78.0
    assert m["mean_ttft_ms"] == pytest.approx(350.0)
    assert m["median_ttft_ms"] == pytest.approx(350.0)
    assert m["std_ttft_ms"] == pytest.approx(150.0)  # population std, as numpy's default
    assert m["p99_ttft_ms"] == pytest.approx(np.percentile([500, 200], 99))
    assert m["mean_tpot_ms"] == pytest.approx(150.0)
    assert m["mean_e2el_ms"] == pytest.approx(700.0)
    itls = [100, 200, 300, 100]  # flattened gaps of both requests, per chunk
    assert m["mean_itl_ms"] == pytest.approx(np.mean(itls))
    assert m["p90_itl_ms"] == pytest.approx(np.percentile(itls, 90))
    assert m["median_itl_ms"] == pytest.approx(150.0)


def test_one_token_outputs_have_no_tpot_or_itl() -> None:
    m = compute_metrics([rec(0.0, [0.25], 1), rec(0.0, [0.75], 1)], 1.0)
    assert m["completed"] == 2
    assert m["mean_ttft_ms"] == pytest.approx(500.0)
    assert m["mean_e2el_ms"] == pytest.approx(500.0)
    # vLLM's np.mean(x or 0): empty lists count as zero.
    assert m["mean_tpot_ms"] == 0.0 and m["p99_itl_ms"] == 0.0


def test_each_tail_rests_on_its_own_count() -> None:
    # A p99 over 20 values is their maximum: the count is kept beside every figure.
    records = [
        rec(0.0, [0.5, 0.6, 0.8, 1.1], 4),  # 3 gaps
        rec(1.0, [1.2, 1.3], 2),  # 1 gap
        rec(2.0, [2.4], 1),  # one token: a TTFT and an E2EL, no TPOT, no gap
        rec(3.0, [], 4, success=False, error="timeout"),  # counts nowhere
    ]
    m = compute_metrics(records, 4.0)
    assert m["ttft_samples"] == 3 and m["e2el_samples"] == 3
    assert m["tpot_samples"] == 2
    assert m["itl_samples"] == 4
    assert TierResult.from_dict(TierResult(1, m).to_dict()).metrics["tpot_samples"] == 2


def test_tpot_uses_reported_tokens_not_chunks() -> None:
    # Two chunks carrying 5 tokens (speculative decoding): TPOT over 4 token gaps.
    m = compute_metrics([rec(0.0, [0.1, 0.5], 5)], 1.0)
    assert m["mean_tpot_ms"] == pytest.approx(100.0)
    assert m["mean_itl_ms"] == pytest.approx(400.0)


def test_failures_are_counted_by_reason_and_not_averaged() -> None:
    ok = rec(0.0, [0.1, 0.2], 2)
    records = [
        ok,
        rec(0.0, [], 2, success=False, error="http 500"),
        rec(0.0, [], 2, success=False, error="http 500"),
        rec(0.0, [0.1], 2, success=False, error="stream broken"),
        rec(0.0, [9.0, 10.0], 2, success=False, error="timeout"),
        rec(0.0, [5.0, 6.0, 7.0], 2, tokens=3),  # ignored max_tokens
    ]
    m = compute_metrics(records, 1.0)
    assert m["completed"] == 1 and m["failed"] == 5
    assert m["mean_ttft_ms"] == pytest.approx(100.0)
    assert m["total_output_tokens"] == 2
    assert count_failures(records) == {
        "http 500": 2,
        "stream broken": 1,
        "timeout": 1,
        LENGTH_NOT_HONOURED: 1,
    }


def test_server_messages_differing_only_in_numbers_count_as_one_verbatim_reason() -> None:
    def refused(message: str) -> RequestRecord:
        return rec(0.0, [], 2, success=False, error=message)

    records = [
        refused("HTTP 400: Token id 31991 is out of vocabulary"),
        refused("HTTP 400: Token id 31987 is out of vocabulary"),
        refused("HTTP 400: This model's maximum context length is 2048 tokens"),
        refused("HTTP 500: Token id 31991 is out of vocabulary"),
        refused("HTTP 400: Token id 960 is out of vocabulary"),
    ]
    assert count_failures(records) == {
        "HTTP 400: Token id 31991 is out of vocabulary": 3,
        "HTTP 400: This model's maximum context length is 2048 tokens": 1,
        "HTTP 500: Token id 31991 is out of vocabulary": 1,
    }
    tiers = [
        {"HTTP 400: Token id 5 is out of vocabulary": 2},
        {"HTTP 400: Token id 7 is out of vocabulary": 3, "timeout": 1},
    ]
    assert merge_failures(tiers) == {"HTTP 400: Token id 5 is out of vocabulary": 5, "timeout": 1}


def test_empty_tier_is_all_zero() -> None:
    m = compute_metrics([], 0.0)
    assert m["completed"] == 0 and m["failed"] == 0
    assert all(m[k] == 0 for k in METRIC_KEYS)
    assert count_failures([]) == {}


def test_goodput_counts_requests_meeting_every_per_request_slo() -> None:
    fast = rec(0.0, [0.1, 0.2, 0.3], 3)  # ttft 100 ms, tpot 100 ms
    slow_first = rec(0.0, [0.9, 1.0], 2)  # ttft 900 ms
    single = rec(0.0, [0.2], 1)  # tpot counts as 0 for goodput
    slos = [
        SLO(metric="ttft", max=500),
        SLO(metric="tpot", max=150),
        SLO(metric="p99_ttft_ms", max=1),
    ]  # per-tier SLOs do not touch goodput
    m = compute_metrics([fast, slow_first, single], 2.0, slos)
    assert m["request_goodput"] == 1.0 and m["request_throughput"] == 1.5
    assert compute_metrics([fast, slow_first], 2.0)["request_goodput"] == 1.0


def test_per_tier_slo_violations() -> None:
    m = compute_metrics([rec(0.0, [0.8, 0.9], 2)], 1.0)
    slos = [
        SLO(metric="p99_ttft_ms", max=500, tiers=[8]),
        SLO(metric="output_throughput", min=10),
        SLO(metric="ttft", max=1),
    ]
    assert slo_violations(m, slos, 8) == [
        "p99_ttft_ms 800 (max of 1) > 500.0",
        "output_throughput 2 < 10.0",
    ]
    assert slo_violations(m, slos, 1) == ["output_throughput 2 < 10.0"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"metric": "p98_ttft_ms", "max": 1}, "is not one of"),
        ({"metric": "ttft"}, "needs max or min"),
        ({"metric": "tpot", "min": 3}, "takes max only"),
        ({"metric": "ttft", "max": 1, "unit": "s"}, "Extra inputs"),
    ],
)
def test_slo_rules(body: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        SLO.model_validate(body)


def test_tier_result_json_round_trip_keeps_vllm_keys() -> None:
    m = compute_metrics([rec(0.0, [0.1, 0.2], 2)], 1.0)
    t = TierResult(
        8,
        m,
        {"timeout": 1},
        {"num_preemptions": 2.0},
        True,
        {"lag_p99_ms": 3.0},
        ["p99_ttft_ms 1 > 0"],
        request_rate=None,
    )
    data = t.to_dict()
    assert data["max_concurrency"] == 8 and data["request_rate"] == "inf"
    assert data["median_tpot_ms"] == m["median_tpot_ms"] and data["completed"] == 1
    assert TierResult.from_json(t.to_json()) == t
    assert t.has_failures


def test_a_stall_shows_as_the_longest_gap_and_a_long_gap_count() -> None:
    # 1,200 smooth 10 ms gaps hide one 3 s stall from the P99 ITL; the longest gap and the
    # count of gaps over the threshold show it, per request.
    smooth = [rec(0.0, [0.01 * i for i in range(1, 602)], 601) for _ in range(2)]
    stalled = rec(0.0, [0.1, 3.1, 3.11, 4.5], 4)
    m = compute_metrics([*smooth, stalled], 6.0, long_gap_s=1.0)
    assert m["p99_itl_ms"] == pytest.approx(10.0)
    assert m["max_itl_ms"] == pytest.approx(3000.0)
    assert m["p99.9_itl_ms"] > 10.0
    assert (m["long_gaps"], m["max_long_gaps"], m["long_gap_requests"]) == (2, 2, 1)
    assert compute_metrics([stalled], 5.0, long_gap_s=2.0)["long_gaps"] == 1


def test_the_longest_gap_and_p99_9_say_what_they_rest_on() -> None:
    m = {"max_itl_ms": 900.0, "p99.9_itl_ms": 800.0, "itl_samples": 600}
    assert tail_note("p99.9_itl_ms", m) == "max of 600"
    assert tail_note("p99.9_itl_ms", {**m, "itl_samples": 1000}) == "n=1000"
    assert samples_key("max_itl_ms") == "itl_samples"
    assert SLO(metric="max_itl_ms", max=2000).violated_by(2500.0)
