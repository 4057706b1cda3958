"""The exhaustive table's truth, as sample_efficiency.py and the benches built on it score it.

A record is one launch of one engine seed (replicate): its values per tier, its constraints,
its failure kind and its per-tier feasibility. A config's true value at a tier is the mean over
the replicates, counted only where it is feasible at that tier on every one of them.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from typing import Any

Record = dict[str, Any]  # values (per tier), constraints, failure_kind, tier_ok (per tier)
Goal = tuple[list[dict[str, float]], float, bool]  # each tier's truth, the tolerance, maximize


def feasible(rec: Record) -> bool:
    return all(v <= 0 for v in rec["constraints"].values())


def feasible_at(rec: Record, tier: int) -> bool:
    """Served every request of the tier and met its SLOs, as tune's recommendations count it:
    a config that misses the c20 TTFT SLO can still be the answer at c1."""
    ok = rec.get("tier_ok")
    return bool(ok[tier]) if ok else feasible(rec)


def truths(
    table: dict[str, Record], keys: Iterable[str], tiers: int, replicates: Sequence[str]
) -> list[dict[str, float]]:
    """Per tier: the true value (mean over ``replicates``) of every launch key feasible at
    the tier on every replicate: a config that misses an SLO on some seeds is no safe
    recommendation."""
    out: list[dict[str, float]] = [{} for _ in range(tiers)]
    for key in keys:
        recs = [table[f"{r}|{key}"] for r in replicates]
        for i in range(tiers):
            if all(feasible_at(rec, i) for rec in recs):
                out[i][key] = statistics.fmean(float(rec["values"][i]) for rec in recs)
    return out


def within(value: float, best: float, tol: float, maximize: bool) -> bool:
    return value >= best * (1 - tol) if maximize else value <= best * (1 + tol)


def trials_to_reach(
    launches: Sequence[tuple[str, Record]],
    truth: dict[str, float],
    tier: int,
    tol: float,
    maximize: bool,
) -> int | None:
    """Launches until the method's pick for ``tier`` is truly within ``tol`` of the best."""
    best = max(truth.values()) if maximize else min(truth.values())
    pick: tuple[float, str] | None = None
    for n, (key, rec) in enumerate(launches, start=1):
        if feasible_at(rec, tier):
            seen = float(rec["values"][tier])
            if pick is None or (seen > pick[0] if maximize else seen < pick[0]):
                pick = (seen, key)
        if pick is not None and pick[1] in truth and within(truth[pick[1]], best, tol, maximize):
            return n
    return None


def reached_all(launches: Sequence[tuple[str, Record]], goal: Goal | None) -> bool:
    """Whether every tier's pick has come truly within the tolerance: a search can stop there,
    since no later launch changes a figure the table prints (each is the first launch that
    reached). Without a goal (``--trace``), a search spends its whole budget."""
    if goal is None:
        return False
    truth, tol, maximize = goal
    reached = (trials_to_reach(launches, t, i, tol, maximize) for i, t in enumerate(truth))
    return all(n is not None for n in reached)
