"""SimEngine in virtual time: closed/open loop, chunks, counters, failures under load, noise."""

from __future__ import annotations

import numpy as np
import pytest

from launchers.simengine import SimEngine
from launchers.simengine.scheduler import SimRequest
from objectives.records import BenchRequest, RequestRecord
from tuner.errors import FailureKind, LaunchError

BASE = ["-tp", "4", "--enable-expert-parallel"]


def workload(n: int = 12, prompt: int = 8000, out: int = 50) -> list[BenchRequest]:
    return [BenchRequest("", prompt + 500 * i, out) for i in range(n)]


def in_flight_max(records: list[RequestRecord]) -> int:
    events = sorted(
        [(r.send_time, 1) for r in records] + [(r.chunk_times[-1], -1) for r in records],
        key=lambda e: (e[0], e[1]),
    )
    level = peak = 0
    for _, step in events:
        level += step
        peak = max(peak, level)
    return peak


def test_closed_loop_keeps_concurrency_in_flight_and_streams_every_token() -> None:
    engine = SimEngine.from_argv(BASE, {}, "h200x4", 0)
    records = engine.run(workload(), concurrency=3)
    assert all(r.success and r.output_tokens == 50 and len(r.chunk_times) == 50 for r in records)
    assert in_flight_max(records) == 3
    assert all(np.all(np.diff(r.chunk_times) > 0) for r in records)
    counters = engine.server_counters()
    assert counters["vllm:generation_tokens"] == 12 * 50
    assert counters["vllm:num_requests_running"] == 0


def test_open_loop_arrivals_follow_the_rate() -> None:
    engine = SimEngine.from_argv(BASE, {}, "h200x4", 0)
    records = engine.run(workload(20, 2000, 10), concurrency=20, request_rate=2.0)
    sends = sorted(r.send_time for r in records)
    assert 5 < sends[-1] < 20  # 19 gaps of ~0.5 s
    assert all(r.success for r in records)


def test_speculative_decoding_emits_several_tokens_per_chunk() -> None:
    spec = '{"method": "mtp", "num_speculative_tokens": 3}'
    engine = SimEngine.from_argv([*BASE, "--speculative-config", spec], {}, "h200x4", 0)
    records = engine.run(workload(out=200), concurrency=4)
    assert all(r.output_tokens == 200 for r in records)
    chunks = sum(len(r.chunk_times) for r in records)
    assert chunks < 0.7 * 12 * 200
    c = engine.server_counters()
    accepted = c["vllm:spec_decode_num_accepted_tokens"] / c["vllm:spec_decode_num_draft_tokens"]
    assert 0.4 < accepted < 0.9


def test_prefix_sharing_requests_hit_the_cache() -> None:
    engine = SimEngine.from_argv(BASE, {}, "h200x4", 0)
    reqs = [BenchRequest("", 20_000, 5, "doc", 20_000) for _ in range(4)]
    engine.run(reqs, concurrency=1)
    c = engine.server_counters()
    assert c["vllm:prefix_cache_hits"] == 3 * (19_999 // 16) * 16


def test_moe_kernel_crash_under_load_kills_the_engine() -> None:
    args = [*BASE, "--moe-backend", "triton", "--max-num-batched-tokens", "131072"]
    engine = SimEngine.from_argv(args, {}, "h200x4", 0, version="0.17.1")
    assert all(r.success for r in engine.run(workload(2, 4000, 5), concurrency=2))  # small: fine
    with pytest.raises(LaunchError) as info:
        engine.run([BenchRequest("", 100_000, 5)], concurrency=1)
    assert info.value.kind is FailureKind.CRASH
    assert "illegal memory access" in str(info.value)
    with pytest.raises(LaunchError):
        engine.run(workload(1), concurrency=1)  # stays dead


def test_too_little_headroom_runs_out_of_memory_under_load() -> None:
    engine = SimEngine.from_argv([*BASE, "--gpu-memory-utilization", "0.98"], {}, "h200x4", 0)
    with pytest.raises(LaunchError) as info:
        engine.run(workload(4, 20_000, 5), concurrency=4)
    assert info.value.kind is FailureKind.OOM


def test_mc2_without_a_big_enough_hccl_buffer_fails_on_prefill() -> None:
    # A prefill step of 8K tokens (the 64 GB die's default budget is 2K) outgrows the buffer.
    args = ["-tp", "16", "--enable-expert-parallel", "--max-num-batched-tokens", "8192"]
    env = {"VLLM_ASCEND_ENABLE_FUSED_MC2": "1"}
    with pytest.raises(LaunchError):
        SimEngine.from_argv(args, env, "910c", 0).run(workload(1, 20_000, 5), 1)
    env["HCCL_BUFFSIZE"] = "1024"
    assert SimEngine.from_argv(args, env, "910c", 0).run(workload(1, 20_000, 5), 1)[0].success


def test_preemption_under_kv_pressure() -> None:
    args = [*BASE, "--max-model-len", "131072", "--gpu-memory-utilization", "0.55"]
    engine = SimEngine.from_argv(args, {}, "h200x4", 0)
    records = engine.run([BenchRequest("", 90_000, 800) for _ in range(4)], concurrency=4)
    assert all(r.success for r in records)
    assert engine.server_counters()["vllm:num_preemptions"] > 0


def _median_tpot(seed: int) -> float:
    engine = SimEngine.from_argv(BASE, {}, "h200x4", seed)
    records = engine.run(workload(6, 5000, 100), concurrency=2)
    return float(np.median([(r.chunk_times[-1] - r.chunk_times[0]) / 99 for r in records]))


def test_run_to_run_noise_is_seeded_and_a_few_percent() -> None:
    runs = [_median_tpot(s) for s in range(6)]
    assert _median_tpot(0) == runs[0]
    spread = (max(runs) - min(runs)) / np.mean(runs)
    assert 0.005 < spread < 0.1


def test_chunk_size_trade_off_points_the_way_vllm_does() -> None:
    """Big chunks: best median TPOT at low load; small chunks: best P99 TPOT at high load."""
    fi = [*BASE, "--attention-backend", "FLASHINFER", "--max-num-seqs", "40"]
    small = [*fi, "--max-num-batched-tokens", "64000", "--long-prefill-token-threshold", "6000"]
    large = [*fi, "--max-num-batched-tokens", "262144"]
    rng = np.random.default_rng(5)
    outs = np.where(np.arange(30) % 4 == 0, 4, rng.integers(100, 600, 30))  # some short answers
    reqs = [
        BenchRequest("", int(p), int(o))
        for p, o in zip(rng.integers(30_000, 60_000, 30), outs, strict=True)
    ]

    def tpot(args: list[str], conc: int, q: float) -> float:
        records = SimEngine.from_argv(args, {}, "h200x4", 0).run(reqs, conc)
        per = [(r.chunk_times[-1] - r.chunk_times[0]) / (r.output_tokens - 1) for r in records]
        return float(np.percentile(per, q))

    assert tpot(large, 2, 50) < tpot(small, 2, 50)
    assert tpot(small, 16, 99) < 0.5 * tpot(large, 16, 99)
    assert tpot(large, 16, 99) > 2.0  # multi-second stalls behind whole-prompt prefills


def test_stats_line_counts_whole_prompts_served_cached_part_included() -> None:
    # vLLM's "Avg prompt throughput" adds a request's prompt length when its first token comes
    # out: four identical prompts prefilled once still show as four prompts.
    args = [*BASE, "--max-num-batched-tokens", "32768"]
    engine = SimEngine.from_argv(args, {}, "h200x4", 0)
    core = engine.core
    core.bulk = False
    for _ in range(4):
        core.add(SimRequest(core.new_rid(), 20_000, 2000, "doc", 20_000))
    while not engine.lines or "prompt throughput" not in engine.lines[-1]:
        core.step()
    rate = float(engine.lines[-1].split("Avg prompt throughput: ")[1].split()[0])
    assert rate * core.clock == pytest.approx(4 * 20_000, rel=0.01)
    assert core.sched.counters["hits"] == 3 * (19_999 // 16) * 16


def test_a_run_reports_the_waiting_peak_a_scrape_would_see() -> None:
    """More users than seats: the requests a step leaves unscheduled are waiting, and the run's
    peaks say how many, with the running peak at the seat limit. With a seat for every user,
    requests still wait for the prefill token budget at first, but every user gets to run."""
    few = SimEngine.from_argv([*BASE, "--max-num-seqs", "4"], {}, "h200x4", 0)
    few.run(workload(16, prompt=2000), concurrency=16)
    assert few.gauge_peaks()["vllm:num_requests_waiting"] >= 11
    assert few.gauge_peaks()["vllm:num_requests_running"] == 4
    many = SimEngine.from_argv([*BASE, "--max-num-seqs", "64"], {}, "h200x4", 0)
    many.run(workload(16, prompt=2000), concurrency=16)
    assert many.gauge_peaks()["vllm:num_requests_running"] == 16


def _acceptance(method: str, prompts: list[list[int]]) -> float:
    spec = f'{{"method": "{method}", "num_speculative_tokens": 3}}'
    engine = SimEngine.from_argv([*BASE, "--speculative-config", spec], {}, "h200x4", 0)
    engine.run([BenchRequest(p, len(p), 200) for p in prompts], concurrency=2)
    c = engine.server_counters()
    return c["vllm:spec_decode_num_accepted_tokens"] / c["vllm:spec_decode_num_draft_tokens"]


def test_prompt_lookup_drafts_are_accepted_only_where_the_context_repeats() -> None:
    """n-gram and suffix drafters propose what the context repeats: on uniformly random token
    ids they are almost never right, on code that reuses its lines they often are; a draft
    model (MTP) does not care."""
    rng = np.random.default_rng(0)
    random_ids = [rng.integers(100, 150_000, 4000).tolist() for _ in range(4)]
    lines = rng.integers(100, 150_000, (40, 12))
    code = [lines[rng.integers(0, 40, 330)].ravel().tolist() for _ in range(4)]
    for method in ("ngram", "suffix"):
        assert _acceptance(method, random_ids) < 0.02
        assert _acceptance(method, code) > 0.1
    assert abs(_acceptance("mtp", random_ids) - _acceptance("mtp", code)) < 0.05


def test_a_closed_loop_sends_its_first_wave_one_client_send_apart() -> None:
    """As a client's loop sends them: the first request prefills alone, the others join
    beside its decodes, so equal requests do not stay in phase for the whole run."""
    engine = SimEngine.from_argv(BASE, {}, "h200x4", 0)
    equal = [BenchRequest("", 300, 150) for _ in range(12)]
    records = engine.run(equal, concurrency=4)
    assert [r.send_time for r in records[:4]] == pytest.approx([0.0, 0.0005, 0.001, 0.0015])
    first, others = records[0].ttft, [r.ttft for r in records[1:4]]
    assert first is not None and all(t is not None and t > first for t in others)
    later = [r.send_time for r in records[4:]]
    assert len({round(t, 6) for t in later}) > 2  # the waves no longer finish at one instant
