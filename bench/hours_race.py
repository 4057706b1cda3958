"""A search's launches charged in hardware hours, measured in full or raced.

A table record (``bench.sweep``) holds a launch's start-up, warm-up and tier seconds on the
hardware's clock and, per tier, its requests' objective values and when each ended. Measured
in full, a launch costs all of it. Raced (``objectives.race``, the rule ``tune run`` applies),
each tier is cut where the launch fell out of contention against the tier's incumbent: the best
launch so far measured in full and feasible there. The tier then costs the seconds until its
deciding request ended, the sampler is told the objective over the requests it served, and the
tier can never be the search's pick there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bench.efficiency_truth import Goal, Record, feasible_at
from objectives.race import END, Race, RaceRule, first_ended, series_of, statistic

Launch = tuple[str, Record]


def full_cost(rec: Record) -> Record:
    """``rec`` measured in full, with what it cost (``cost_s``) and no tier decided early."""
    seconds = rec.get("startup_s", 0.0) + rec.get("warmup_s", 0.0) + sum(rec.get("tier_s", []))
    return {**rec, "cost_s": seconds, "decided": [None] * len(rec["values"])}


def raced(
    rec: Record,
    launches: Sequence[Launch],
    key: str,
    rule: RaceRule,
    limits: Mapping[int, Mapping[str, float]] | None = None,
) -> Record:
    """``rec`` as a race against ``launches``' incumbents and the space's SLOs on a longest
    figure (``limits``, per tier index) would have measured it."""
    out = full_cost(rec)
    if not rec.get("requests") or series_of(key) is None:
        return out
    values, tier_s = list(rec["values"]), list(rec["tier_s"])
    for i, requests in enumerate(rec["requests"]):
        if not requests[END]:
            continue
        incumbent = incumbent_values(launches, i)
        series = {**requests, series_of(key) or "": requests["value"]}
        race = Race(key, {i: incumbent} if incumbent else {}, rule, (limits or {}))
        n = race.stop_after(i, series)
        if n is None:
            continue
        kept, tier_s[i] = first_ended(requests[END], n)
        values[i] = statistic(key, [requests["value"][j] for j in kept])
        out["decided"][i] = n
    out["values"], out["tier_s"] = values, tier_s
    out["cost_s"] = rec.get("startup_s", 0.0) + rec.get("warmup_s", 0.0) + sum(tier_s)
    return out


def counts_at(rec: Record, tier: int) -> bool:
    """Whether a launch may be the pick at ``tier``: feasible there and measured in full."""
    decided = rec.get("decided") or []
    return feasible_at(rec, tier) and not (tier < len(decided) and decided[tier] is not None)


def pick(launches: Sequence[Launch], tier: int, maximize: bool = False) -> Launch | None:
    """The search's pick at ``tier``: its best observed value among the launches that count."""
    best: Launch | None = None
    for key, rec in launches:
        if not counts_at(rec, tier):
            continue
        seen = float(rec["values"][tier])
        if best is None or (
            seen > best[1]["values"][tier] if maximize else seen < best[1]["values"][tier]
        ):
            best = (key, rec)
    return best


def incumbent_values(launches: Sequence[Launch], tier: int) -> list[float | None] | None:
    """The per-request values of the pick at ``tier`` (what a raced launch is paired against)."""
    best = pick(launches, tier)
    requests = best[1].get("requests") if best else None
    return list(requests[tier]["value"]) if requests else None


def hours_to_reach(launches: Sequence[Launch], goal: Goal) -> tuple[float, int] | None:
    """Hours and launches until every tier's pick is truly within the tolerance of its best
    at once; None when the search never got there."""
    hours = 0.0
    for n in range(1, len(launches) + 1):
        hours += launches[n - 1][1]["cost_s"] / 3600
        if reached(launches[:n], goal):
            return hours, n
    return None


def reached(launches: Sequence[Launch], goal: Goal | None) -> bool:
    if goal is None:
        return False
    truth, tol, maximize = goal
    return all(pick_ratio(launches, t, i, maximize) <= 1 + tol for i, t in enumerate(truth))


def pick_ratio(
    launches: Sequence[Launch], truth: dict[str, float], tier: int, maximize: bool = False
) -> float:
    """The pick's true value over the tier's true best (inf: no pick, or one infeasible on
    some engine seed); the other way round for a maximised objective, so 1 is best."""
    best_value = (max if maximize else min)(truth.values())
    chosen = pick(launches, tier, maximize)
    if chosen is None or chosen[0] not in truth:
        return float("inf")
    value = truth[chosen[0]]
    return best_value / value if maximize else value / best_value
