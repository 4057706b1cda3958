"""hours_to_answer's charging: a launch in full, a raced tier cut where it was decided, and
picks that never rest on a tier stopped early."""

from __future__ import annotations

from typing import Any

from bench.hours_race import full_cost, hours_to_reach, pick, raced
from objectives.race import RaceRule


def record(scale: float, n: int = 20) -> dict[str, Any]:
    values = [0.01 * scale * (1 + 0.01 * (i % 5)) for i in range(n)]
    ends = [10.0 * (i + 1) for i in range(n)]
    return {
        "values": [max(values) * 1000],
        "constraints": {"slo": 0.0},
        "kind": None,
        "tier_ok": [True],
        "startup_s": 600.0,
        "warmup_s": 60.0,
        "tier_s": [ends[-1]],
        "requests": [{"value": values, "end": ends}],
    }


def test_a_launch_in_full_costs_its_start_up_warm_up_and_tiers() -> None:
    rec = full_cost(record(1.0))
    assert rec["cost_s"] == 600 + 60 + 200 and rec["decided"] == [None]


def test_a_raced_loser_is_charged_until_its_deciding_request_and_is_never_the_pick() -> None:
    base = ("base", full_cost(record(1.0)))
    loser = raced(record(1.2), [base], "p99_tpot_ms", RaceRule())
    assert loser["decided"] == [RaceRule().min_pairs]
    assert loser["cost_s"] == 600 + 60 + 10.0 * RaceRule().min_pairs
    lucky = dict(loser, values=[1.0])  # however good its estimate reads
    assert pick([base, ("lucky", lucky)], 0) == base
    close = raced(record(1.01), [base], "p99_tpot_ms", RaceRule())
    assert close["decided"] == [None] and close["cost_s"] == 860


def test_hours_count_until_every_tier_is_within_the_tolerance() -> None:
    launches = [("slow", full_cost(record(1.5))), ("best", full_cost(record(1.0)))]
    truth = [{"slow": 15.0, "best": 10.0}]
    assert hours_to_reach(launches, (truth, 0.03, False)) == (2 * 860 / 3600, 2)
    assert hours_to_reach(launches[:1], (truth, 0.03, False)) is None


def test_a_tier_past_a_longest_gap_limit_is_charged_until_the_request_that_passed_it() -> None:
    """Before any incumbent (the baseline infeasible there): the fourth request met a 2.5 s
    gap against a 2 s limit, so the tier costs its first four requests and is no pick."""
    rec = record(1.0)
    rec["requests"][0]["max_gap"] = [0.5, 0.5, 0.5, 2.5] + [0.5] * 16
    rec["tier_ok"] = [False]
    cut = raced(rec, [], "p99_tpot_ms", RaceRule(), {0: {"max_gap": 2.0}})
    assert cut["decided"] == [4] and cut["cost_s"] == 600 + 60 + 40
    assert raced(rec, [], "p99_tpot_ms", RaceRule())["decided"] == [None]  # no limit: in full
