from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

from objectives import lag as lag_module
from objectives.client import StreamingClient, make_http_client, prepare
from objectives.drive import arrival_offsets, drive
from objectives.endpoint import Endpoint
from objectives.lag import ClientLag, Steal, client_limited, counted_lag
from objectives.records import BenchRequest, RequestRecord
from objectives.runner import run_benchmark
from objectives.workload import WorkloadSpec
from tests.objectives.servers import vllm_like_server


def workload(**kw: object) -> WorkloadSpec:
    body: dict[str, object] = {
        "dataset": {"kind": "random", "input_len": 32, "output_len": 5},
        "num_prompts": 8,
        "tiers": [1, 4],
        "warmup": 2,
        "request_timeout_s": 30,
    }
    body.update(kw)
    return WorkloadSpec.model_validate(body)


def test_arrivals_are_seeded_gamma_gaps() -> None:
    assert arrival_offsets(3, None, 1.0, 0) == [0.0, 0.0, 0.0]
    a = arrival_offsets(4000, 20.0, 1.0, seed=7)
    assert a == arrival_offsets(4000, 20.0, 1.0, seed=7) and a[0] == 0.0
    gaps = np.diff(a)
    assert gaps.mean() == pytest.approx(1 / 20, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.1)  # Poisson: CV 1
    bursty = np.diff(arrival_offsets(4000, 20.0, 0.25, seed=7))
    assert bursty.mean() == pytest.approx(1 / 20, rel=0.1)
    assert bursty.std() / bursty.mean() == pytest.approx(2.0, rel=0.15)  # CV = 1/sqrt(shape)


def test_http_tiers_against_a_real_server(paced_server: str) -> None:
    done: list[bool] = []
    warmed: list[float] = []
    results = run_benchmark(
        Endpoint("paced", base_url=paced_server + "/v1"),
        workload(),
        on_request=lambda rec: done.append(rec.success),
        on_warmup=warmed.append,
    )
    assert done == [True] * 16  # measured requests only, warm-up excluded
    assert len(warmed) == 1 and 0.0 < warmed[0] < results[0].metrics["duration"]
    assert [r.concurrency for r in results] == [1, 4]
    for r in results:
        m = r.metrics
        assert m["completed"] == 8 and m["failed"] == 0 and r.failures == {}
        assert m["total_output_tokens"] == 40
        assert 5.0 < m["median_itl_ms"] < 50.0 and 5.0 < m["median_tpot_ms"] < 50.0
        assert m["mean_ttft_ms"] >= 19.0
        # Server counters are deltas of this tier only (warm-up and other tiers excluded).
        assert r.server["generation_tokens"] == 40.0 and r.server["num_preemptions"] == 0.0
        assert "p99_loop_lag_ms" in r.client
        assert 0.0 <= r.client["steal_share"] < 1.0  # the machine's, over the tier
    one, four = results
    assert four.metrics["duration"] < one.metrics["duration"]  # four in flight


def test_failures_are_reported_per_tier(paced_server: str) -> None:
    (r,) = run_benchmark(Endpoint("short", base_url=paced_server), workload(tiers=[2]))
    assert r.failures == {"length not honoured": 8} and r.metrics["completed"] == 0
    assert r.has_failures


def test_open_loop_over_http(paced_server: str) -> None:
    (r,) = run_benchmark(
        Endpoint("paced", base_url=paced_server), workload(tiers=[8], request_rate=40.0, warmup=0)
    )
    assert r.metrics["completed"] == 8 and r.request_rate == 40.0
    assert r.client["max_send_lag_ms"] >= 0.0


def test_a_blocked_event_loop_marks_the_tier_client_saturated(paced_server: str) -> None:
    reqs = [BenchRequest([1, 2], 2, 20)] * 4

    async def go() -> ClientLag:
        async with make_http_client(paced_server, 30) as http:
            client = StreamingClient(http, "completions", 30)
            hog = asyncio.get_running_loop().call_later(0.05, _hog, asyncio.get_running_loop())
            _, lag = await drive(client, reqs, prepare(reqs, "paced", "completions"), 4, [0.0] * 4)
            hog.cancel()
            return lag

    lag = asyncio.run(go())
    summary = lag.summary()
    assert lag.saturated(median_itl_ms=10.0) and summary["max_loop_lag_ms"] >= 20
    assert "cpu_share" in summary


def _hog(loop: asyncio.AbstractEventLoop) -> None:
    # Stands for a client doing too much per event: it burns the loop's CPU 30 ms at a time.
    end = time.perf_counter() + 0.03
    while time.perf_counter() < end:
        pass
    loop.call_later(0.002, _hog, loop)


def test_saturation_rules() -> None:
    calm = ClientLag(loop_lag_s=[0.0005] * 99 + [0.004], cpu_s=1.0, wall_s=10.0)
    assert not calm.saturated(median_itl_ms=25.0)
    busy = ClientLag(loop_lag_s=[0.0005] * 10, cpu_s=9.0, wall_s=10.0)
    assert busy.saturated()  # CPU-bound
    # 20 ms of streaming before the engine died: one burst of parsing, not a busy client
    burst = ClientLag(loop_lag_s=[0.005] * 4, cpu_s=0.0175, wall_s=0.02)
    assert burst.summary()["cpu_share"] > 0.85 and not burst.saturated()
    # p99 loop lag 20 ms: harmless between 100 ms chunks, merges chunks 25 ms apart.
    tail = ClientLag(loop_lag_s=[0.0005] * 90 + [0.02] * 10, cpu_s=1.0, wall_s=10.0)
    assert tail.saturated(median_itl_ms=25.0) and not tail.saturated(median_itl_ms=100.0)
    assert tail.saturated()  # the 5 ms floor
    behind = ClientLag(loop_lag_s=[0.0], send_lag_s=[0.2] * 5, cpu_s=1.0, wall_s=10.0)
    assert behind.saturated()  # open-loop schedule missed


def test_a_workload_lag_limit_replaces_the_gap_based_rule() -> None:
    late_tail = ClientLag(loop_lag_s=[0.0005] * 90 + [0.04] * 10, cpu_s=1.0, wall_s=10.0)
    assert late_tail.saturated(median_itl_ms=20.0)
    assert not late_tail.saturated(median_itl_ms=20.0, lag_limit_ms=100.0)
    assert late_tail.saturated(median_itl_ms=400.0, lag_limit_ms=30.0)


def test_requests_refused_at_once_never_mark_the_client_saturated() -> None:
    # Every request fails at once while the loop is held 30 ms at a time: nothing was timed,
    # so nothing the client did distorted a measurement.
    reqs = [BenchRequest([101, 102], 2, 4)] * 24
    with vllm_like_server("--reject", "Token id 31991 is out of vocabulary") as url:

        async def go() -> tuple[list[RequestRecord], ClientLag]:
            async with make_http_client(url, 30) as http:
                client = StreamingClient(http, "completions", 30)
                loop = asyncio.get_running_loop()
                hog = loop.call_later(0.0, _hog, loop)
                try:
                    return await drive(
                        client, reqs, prepare(reqs, "tiny", "completions"), 8, [0.0] * 24
                    )
                finally:
                    hog.cancel()

        records, lag = asyncio.run(go())
        (tier,) = run_benchmark(
            Endpoint("tiny", base_url=url), workload(tiers=[16], num_prompts=64)
        )
    assert all(r.error == "HTTP 400: Token id 31991 is out of vocabulary" for r in records)
    assert not lag.saturated() and not client_limited(records, lag, 0.0, None)
    assert not tier.client_saturated
    assert tier.failures == {"HTTP 400: Token id 31991 is out of vocabulary": 64}


def _record(send: float, chunks: list[float]) -> RequestRecord:
    return RequestRecord(2, len(chunks), send, chunks, len(chunks), success=bool(chunks))


def test_lag_counts_only_while_a_stream_that_produced_tokens_was_in_flight() -> None:
    records = [
        _record(0.0, []),  # refused: its time says nothing
        _record(1.0, [1.1, 1.2, 2.0]),
        _record(1.5, [1.6, 3.0]),
        _record(5.0, []),
    ]
    # (wake time, loop lag, CPU s, wall s, page faults): big lags only while refused
    # requests ran.
    samples = [(0.5, 0.5, 0.5, 0.5, 9), (1.05, 0.001, 0.01, 0.05, 0), (2.5, 0.002, 0.1, 1.0, 2)]
    samples += [(3.02, 0.0, 0.01, 0.03, 1), (5.5, 0.4, 0.4, 0.4, 7)]
    lag = counted_lag(records, samples, {0: 0.3, 1: 0.001, 3: 0.9})
    assert lag.loop_lag_s == [0.001, 0.002, 0.0]  # the one waking at 3.02 began at 2.99
    assert lag.send_lag_s == [0.001]
    assert lag.cpu_s == pytest.approx(0.12) and lag.wall_s == pytest.approx(1.08)
    assert lag.major_faults == 3
    assert not lag.saturated()
    nothing = counted_lag(records[:1], samples, {0: 0.3})
    assert nothing.loop_lag_s == [] and nothing.summary()["cpu_share"] == 0.0


def test_a_tier_where_no_stream_produced_a_token_is_never_client_saturated() -> None:
    busy = ClientLag(loop_lag_s=[0.05] * 100, cpu_s=9.5, wall_s=10.0)
    assert busy.saturated()
    assert not client_limited([_record(0.0, [])] * 4, busy, 0.0, None)
    assert client_limited([_record(0.0, []), _record(0.0, [0.1])], busy, 0.0, None)


def test_steal_is_the_hypervisors_share_of_the_machines_cpu_time_over_the_span(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # /proc/stat's ticks: user nice system idle iowait irq softirq steal
    ticks = iter([[100, 0, 50, 800, 0, 0, 0, 50], [160, 0, 70, 920, 0, 0, 0, 50 + 12]])
    monkeypatch.setattr(lag_module, "_cpu_times", lambda: next(ticks))
    assert Steal().share() == pytest.approx(12 / 212)
    monkeypatch.setattr(lag_module, "_cpu_times", lambda: [])  # no /proc here
    assert Steal().share() == 0.0
