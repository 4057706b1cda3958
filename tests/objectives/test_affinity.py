"""The client on a core of its own, and a client-limited refusal that says what to set."""

from __future__ import annotations

import os

import pytest

from objectives.affinity import client_limit_reason, pinned
from objectives.result import TierResult

needs_two = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")


@needs_two
def test_the_client_runs_on_its_cores_while_it_measures_then_where_it_was() -> None:
    before = os.sched_getaffinity(0)
    core = min(before)
    with pinned([core]):
        assert os.sched_getaffinity(0) == {core}
    assert os.sched_getaffinity(0) == before
    with pinned([]):
        assert os.sched_getaffinity(0) == before


def limited(share: float, lag: float = 120.0, c: int = 4) -> TierResult:
    client = {"p99_loop_lag_ms": lag, "cpu_share": share}
    return TierResult(concurrency=c, metrics={}, client=client, client_saturated=True)


def test_a_client_kept_off_its_core_names_the_engine_and_the_fields_to_set() -> None:
    ok = TierResult(concurrency=1, metrics={})
    assert client_limit_reason([ok], []) is None
    why = client_limit_reason([ok, limited(0.06, 190.0, 16), limited(0.05)], [1])
    assert why is not None
    assert why.startswith("the benchmark client, not the engine, limited a tier (c16,c4: ")
    assert "190 ms late at P99 with 6% of a core" in why
    assert "another process (the engine, on this machine) took its core; keep core 1" in why
    assert "workload.client_cpus" in why and "target.engine_nice" in why


def test_a_busy_client_is_told_apart_from_a_starved_one() -> None:
    why = client_limit_reason([limited(0.95)], [])
    assert why is not None and "the client itself was busy" in why
    assert "engine_nice" not in why


def test_a_client_that_waited_on_the_disk_says_so_rather_than_blame_the_engine() -> None:
    waited = limited(0.06)
    waited.client["major_faults"] = 12.0
    why = client_limit_reason([waited], [1])
    assert why is not None and "waited on 12 page faults read from disk" in why
    assert "took its core" not in why


def test_a_client_on_a_virtual_machine_whose_cpu_was_stolen_says_so() -> None:
    stolen = limited(0.12, 6.0)
    stolen.client["steal_share"] = 0.04
    why = client_limit_reason([stolen], [1])
    assert why is not None and "hypervisor gave 4% of its CPU time to other machines" in why
    assert "workload.client_lag_limit_ms above 6" in why and "took its core" not in why
    stolen.client["steal_share"] = 0.002  # a trace of steal explains no lag
    assert "took its core" in (client_limit_reason([stolen], [1]) or "")
