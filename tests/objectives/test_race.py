"""Racing a tier: the paired test, when a launch is out of contention, and where a tier stops."""

from __future__ import annotations

from pathlib import Path

import pytest

from launchers.sim import SimLauncher, SimSettings
from objectives.race import (
    END,
    Race,
    RaceRule,
    first_ended,
    series_of,
    signed_rank_p,
    statistic,
)
from objectives.runner import run_benchmark
from objectives.workload import WorkloadSpec
from tests.objectives.sim_engine import sim_config

INCUMBENT = [0.010 + 0.0001 * (i % 7) for i in range(40)]


def series(scale: float, n: int = 40) -> dict[str, list[float | None]]:
    return {"tpot": [v * scale for v in INCUMBENT[:n]], END: [float(i) for i in range(n)]}


def test_signed_rank_p_is_small_only_for_differences_above_zero() -> None:
    assert signed_rank_p([0.1 * (i + 1) for i in range(12)]) < 0.002  # exact: 1/4096
    assert signed_rank_p([-0.1 * (i + 1) for i in range(12)]) > 0.99
    mixed = [(-1) ** i * 0.1 * (i + 1) for i in range(12)]
    assert 0.2 < signed_rank_p(mixed) < 0.8
    assert signed_rank_p([0.0, 0.0]) == 1.0


def test_a_launch_slower_than_the_margin_stops_after_the_fewest_pairs() -> None:
    race = Race("p99_tpot_ms", {1: INCUMBENT})
    assert race.stop_after(1, series(1.10)) == RaceRule().min_pairs


@pytest.mark.parametrize("scale", [0.95, 1.0, 1.02])
def test_a_launch_within_the_margin_is_measured_in_full(scale: float) -> None:
    assert Race("p99_tpot_ms", {1: INCUMBENT}).stop_after(1, series(scale)) is None


def test_a_tail_objective_races_against_the_incumbents_whole_tail() -> None:
    """A p99 objective: a launch slower request for request still beats an incumbent whose
    tail is one stall in a request not yet sent, so it is not stopped; a median objective
    compares the same requests and is."""
    incumbent = [*INCUMBENT[:39], 0.5]  # one stall, in the last request
    mine = series(1.10)
    assert Race("p99_tpot_ms", {1: incumbent}).stop_after(1, mine) is None
    assert Race("median_tpot_ms", {1: incumbent}).stop_after(1, mine) == RaceRule().min_pairs


def test_no_incumbent_or_a_whole_tier_objective_is_not_raced() -> None:
    assert Race("p99_tpot_ms", {4: INCUMBENT}).stop_after(1, series(2.0)) is None
    assert Race("output_throughput", {1: INCUMBENT}).stop_after(1, series(2.0)) is None
    assert series_of("output_throughput") is None
    assert series_of("median_ttft_ms") == "ttft"


def test_a_tier_past_an_slo_on_its_longest_gap_stops_at_the_request_that_passed_it() -> None:
    """No incumbent needed and no pairs: a maximum only grows. The request that passed the
    limit is the third to end (ends run backwards here), so the tier stops after three."""
    mine = {**series(1.0, 20), END: [float(20 - i) for i in range(20)]}
    gaps: list[float | None] = [0.5] * 20
    mine["max_gap"] = gaps
    race = Race("p99_tpot_ms", ceilings={1: {"max_gap": 2.0}})
    assert race.stop_after(1, mine) is None  # every gap within the limit
    gaps[17] = 2.5
    assert race.stop_after(1, mine) == 3
    assert race.stop_after(4, mine) is None  # no ceiling at that tier
    gaps[17], gaps[0] = 0.5, 2.5  # only the last to end passed it: measured in full anyway
    assert race.stop_after(1, mine) is None


def test_statistic_and_the_first_requests_to_end() -> None:
    assert statistic("median_tpot_ms", [0.001, 0.002, 0.003]) == pytest.approx(2.0)
    assert first_ended([3.0, 1.0, None, 2.0], 2) == ([1, 3], 2.0)


def test_a_simulated_tier_out_of_contention_is_cut_where_it_was_decided(tmp_path: Path) -> None:
    workload = WorkloadSpec.model_validate(
        {
            "dataset": {"kind": "random", "input_len": 500, "output_len": 32},
            "num_prompts": 30,
            "tiers": [1],
            "warmup": 0,
            "seed": 2,
        }
    )
    with SimLauncher(SimSettings()) as launcher:
        launcher.start(sim_config(), tmp_path)
        endpoint = launcher.wait_ready(5.0)
        [full] = run_benchmark(endpoint, workload)
        assert full.decided_after is None and len(full.requests["tpot"]) == 30
        faster = {1: [None if v is None else v / 2 for v in full.requests["tpot"]]}
        [cut] = run_benchmark(endpoint, workload, race=Race("p99_tpot_ms", faster))
    assert cut.decided_after == RaceRule().min_pairs and cut.requests == {}
    assert cut.metrics["completed"] == cut.decided_after
    assert cut.metrics["duration"] < full.metrics["duration"] / 2


def test_a_tier_over_http_out_of_contention_is_cut_too() -> None:
    from objectives.endpoint import Endpoint
    from tests.objectives.servers import paced_server

    workload = short_workload(30)
    with paced_server(itl_ms=5, ttft_ms=5) as url:
        endpoint = Endpoint(model="paced", base_url=url)
        faster = {1: [0.0001] * 30}  # an incumbent far ahead: the tier is decided early
        [cut] = run_benchmark(endpoint, workload, race=Race("p99_tpot_ms", faster))
    assert cut.decided_after == RaceRule().min_pairs


def test_a_tier_over_http_past_its_longest_gap_stops_at_once() -> None:
    from objectives.endpoint import Endpoint
    from tests.objectives.servers import paced_server

    workload = short_workload(12)
    with paced_server(itl_ms=20, ttft_ms=5) as url:
        endpoint = Endpoint(model="paced", base_url=url)
        race = Race("p99_tpot_ms", ceilings={1: {"max_gap": 0.010}})
        [cut] = run_benchmark(endpoint, workload, race=race)
    assert cut.decided_after == 1 and cut.metrics["max_itl_ms"] > 10


def short_workload(num_prompts: int) -> WorkloadSpec:
    """Short prompts and answers at one user, for the paced HTTP server."""
    dataset = {"kind": "random", "input_len": 16, "output_len": 8, "vocab_size": 200}
    spec = {"dataset": dataset, "num_prompts": num_prompts, "tiers": [1], "warmup": 0, "seed": 2}
    return WorkloadSpec.model_validate(spec)
