"""capacity.json's data and its text: labels, the headline line, replicas, a bad file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner.errors import StudyError
from tuner.export.capacity_text import (
    capacity_text,
    figure,
    headline,
    replicas_line,
    slo_label,
)
from tuner.storage.capacity import (
    HELD_TO_BOUND,
    CapacityReport,
    ConfigCapacity,
    Probe,
    read_capacity,
    write_capacity,
)

SLO = {"metric": "p99_ttft_ms", "max": 2000.0}


def runs(load: float, held: int, broke: int, ttft: float) -> list[Probe]:
    kinds = [True] * held + [False] * broke
    return [Probe(load, ok, 2 * int(load), "repeat", {"p99_ttft_ms": ttft}) for ok in kinds]


def config(label: str, c: int, tiers: list[int], **kw: object) -> ConfigCapacity:
    probes = runs(c, 3, 0, 1800.0) + runs(c + 1, 1, 2, 2100.0)
    fields = {"capacity": c, "above": c + 1, "exact": True, "bound_by": "p99_ttft_ms"}
    return ConfigCapacity(label, tiers, {"seqs": c}, probes=probes, **{**fields, **kw})  # type: ignore[arg-type]


def report(*configs: ConfigCapacity, mode: str = "concurrency") -> CapacityReport:
    return CapacityReport("s", mode, [SLO], 40, 256, 16, 3, "sim", 8, configs=list(configs))


def test_slos_and_figures_read_as_people_write_them() -> None:
    assert slo_label(SLO) == "P99 TTFT <= 2 s"
    assert slo_label({"metric": "median_tpot_ms", "max": 80}) == "median TPOT <= 80 ms"
    assert slo_label({"metric": "output_throughput", "min": 500}) == "output throughput >= 500"
    assert figure("p99_ttft_ms", 1820.0) == "1.82 s" and figure("p99_tpot_ms", 61.23) == "61.2 ms"


def test_the_headline_says_users_per_replica_against_the_defaults() -> None:
    pick, base = config("c40", 37, [40], trial=12), config("defaults", 28, [], baseline=True)
    r = report(pick, base)
    assert headline(r, pick) == (
        "c40 pick (trial 12): c=37 users per replica at P99 TTFT <= 2 s (held 3 of 3 runs, "
        "38 broke 2 of 3); 28 for the defaults: 1.3x"
    )
    assert replicas_line(r, 500) == "replicas for 500 users: c40 14, defaults 18"


def test_a_pick_that_held_at_the_bound_is_a_lower_bound() -> None:
    pick = config("c40", 256, [40], above=None, bound_by=HELD_TO_BOUND)
    base = config("defaults", 64, [], baseline=True)
    line = headline(report(pick, base), pick)
    assert "c=256 users per replica or more" in line and line.endswith("at least 4x")


def test_a_config_that_did_not_start_or_serves_nobody_says_so() -> None:
    dead = ConfigCapacity("c1", [1], {}, failure="did not start: refused")
    none = config("defaults", 0, [], baseline=True, above=1)
    r = report(dead, none)
    assert (
        replicas_line(r, 10)
        == "replicas for 10 users: c1 not measured, defaults: no count serves it"
    )
    assert "c1: did not start: refused" in capacity_text(r)


def test_a_rate_answer_is_in_requests_per_second() -> None:
    pick = config("c4", 3, [4])
    pick.capacity, pick.above = 3.2, 3.3
    for p in pick.probes:
        p.load = 3.2 if p.load == 3 else 3.3
    text = capacity_text(report(pick, mode="request_rate"), demand=10)
    assert "rate=3.2 req/s per replica at P99 TTFT <= 2 s" in text
    assert "replicas for 10 req/s: c4 4" in text


def test_capacity_json_round_trips_and_a_bad_one_is_one_line(tmp_path: Path) -> None:
    r = report(config("c40", 37, [40]), config("defaults", 28, [], baseline=True))
    write_capacity(tmp_path, r)
    assert read_capacity(tmp_path) == r and read_capacity(tmp_path / "none") is None
    (tmp_path / "capacity.json").write_text('{"study": 1}')
    with pytest.raises(StudyError, match=r"capacity\.json is not a capacity file"):
        read_capacity(tmp_path)
