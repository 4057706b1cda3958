"""What one probe sends and how it is judged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from objectives.endpoint import Endpoint
from objectives.metrics import SLO
from objectives.result import TierResult
from objectives.workload import WorkloadSpec
from tests.tuner.conftest import SMALL_SPACE
from tuner.capacity.probe import Prober, capacity_slos, judge, probe_workload
from tuner.errors import SpaceError
from tuner.space.schema import Space
from tuner.storage.capacity import CONCURRENCY, REQUEST_RATE


def space(slos: list[dict[str, Any]], tiers: list[int] | None = None) -> Space:
    data = {**SMALL_SPACE, "slos": slos}
    data["workload"] = {**SMALL_SPACE["workload"], "tiers": tiers or [1, 4, 8]}
    return Space.model_validate(data)


def test_the_highest_tiers_slos_apply_at_every_load() -> None:
    slos = [
        {"metric": "p99_ttft_ms", "max": 500, "tiers": [1, 4]},
        {"metric": "p99_ttft_ms", "max": 2000, "tiers": [8]},
        {"metric": "p99_tpot_ms", "max": 80},  # every tier
        {"metric": "ttft", "max": 100},  # per request: goodput only
    ]
    picked, top = capacity_slos(space(slos))
    assert top == 8
    assert [(s.metric, s.max, s.tiers) for s in picked] == [
        ("p99_ttft_ms", 2000, None),
        ("p99_tpot_ms", 80, None),
    ]


def test_no_slo_at_the_highest_tier_is_one_clear_error() -> None:
    with pytest.raises(SpaceError, match=r"no per-tier SLO at its highest tier c8.*slos:"):
        capacity_slos(space([{"metric": "p99_ttft_ms", "max": 500, "tiers": [1]}]))


def workload(dataset: dict[str, Any], **kw: Any) -> WorkloadSpec:
    return WorkloadSpec.model_validate({"dataset": dataset, "tiers": [1, 4], **kw})


RANDOM = {"kind": "random", "input_len": 64, "output_len": 8}


def test_a_probe_sends_two_requests_per_user_and_the_warm_up_once() -> None:
    w = workload(RANDOM, num_prompts=16, warmup=3)
    first = probe_workload(w, 37, CONCURRENCY, 0, warm=True)
    assert first.tiers == [37] and first.num_prompts == 74 and first.warmup == 3
    later = probe_workload(w, 4, CONCURRENCY, 0, warm=False)
    assert later.num_prompts == 16 and later.warmup == 0  # never fewer than the study sent


def test_a_rate_probe_is_an_open_loop_capped_in_flight() -> None:
    w = probe_workload(workload(RANDOM, num_prompts=16), 2.5, REQUEST_RATE, 256, warm=False)
    assert w.tiers == [256] and w.request_rate == 2.5 and w.num_prompts == 50  # 20 s of it


def test_shared_prompts_grow_in_number_and_keep_how_often_each_is_sent() -> None:
    code = {"kind": "code_edit", "num_files": 4, "file_len": 256, "edits": 3, "output_len": 8}
    w = probe_workload(workload(code), 30, CONCURRENCY, 0, warm=False)
    assert w.num_prompts == 60 and w.dataset.num_files == 20 and w.dataset.edits == 3
    pre = {"kind": "prefix_repetition", "num_prefixes": 2, "prefix_len": 32, "repeats": 4}
    w = probe_workload(workload({**pre, "output_len": 8}), 9, CONCURRENCY, 0, warm=False)
    assert w.dataset.num_prefixes == 5 and w.dataset.repeats == 4 and w.num_prompts == 20


def tier(**metrics: float) -> TierResult:
    base = {"completed": 10, "failed": 0, "p99_ttft_ms": 900.0, "ttft_samples": 10}
    return TierResult(8, {**base, **metrics})


def test_a_probe_holds_only_with_every_slo_met_and_no_request_failed() -> None:
    slos = [SLO(metric="p99_ttft_ms", max=1000)]
    held = judge(tier(), 8, "bracket", slos)
    assert held.ok and held.values["p99_ttft_ms"] == 900.0 and held.values["ttft_samples"] == 10
    slow = tier(p99_ttft_ms=1200.0)
    slow.slo_violations = ["p99_ttft_ms 1200 (max of 10) > 1000.0"]
    broke = judge(slow, 8, "bisect", slos)
    assert not broke.ok and broke.violated == ["p99_ttft_ms"] and not broke.fatal
    failing = tier(failed=2, completed=8)
    failing.failures = {"timeout": 2}
    assert judge(failing, 8, "bisect", slos).broke == ["2 of 10 requests failed (2x timeout)"]


def test_a_probe_where_nothing_completed_ends_the_search() -> None:
    dead = tier(completed=0, failed=16)
    dead.failures = {"connection refused": 16}
    probe = judge(dead, 8, "bracket", [SLO(metric="p99_ttft_ms", max=1000)])
    assert not probe.ok and probe.fatal


class Limited:
    """run_benchmark's stand-in: the client limits the first ``limited`` runs."""

    def __init__(self, limited: int) -> None:
        self.limited = limited
        self.rounds: list[int] = []

    def __call__(self, endpoint: object, spec: object, slos: object, **kw: int) -> list[TierResult]:
        self.rounds.append(kw["first_round"])
        result = tier()
        result.client_saturated = len(self.rounds) <= self.limited
        return [result]


def prober(tmp_path: Path) -> Prober:
    w = workload(RANDOM, num_prompts=8)
    return Prober(
        Endpoint("m"), w, [SLO(metric="p99_ttft_ms", max=1000)], CONCURRENCY, 0, None, tmp_path
    )


def test_a_run_the_client_limited_is_measured_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tuner.capacity.probe.run_benchmark", fake := Limited(1))
    probe = prober(tmp_path)(4, "bracket")
    assert probe.ok and probe.retries == 1 and fake.rounds == [0, 1]  # fresh content again


def test_a_client_that_never_keeps_up_stops_the_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tuner.capacity.probe.run_benchmark", Limited(9))
    probe = prober(tmp_path)(4, "bracket")
    assert not probe.ok and probe.fatal and probe.client_limited and probe.retries == 2
    assert "a faster client must measure this" in probe.broke[-1]
