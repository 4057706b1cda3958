"""warm_start.py's figures and table: per prior, launches to each tier's best, cold and warm."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from bench.efficiency_table import median_cell, slowest, spread_cell
from bench.efficiency_truth import Record, trials_to_reach, within
from objectives.objective import get_objective
from tuner.space.schema import Space

Launches = list[tuple[str, Record]]


@dataclass
class PriorResult:
    """One prior's figures: per tier, launches to the tolerance of cold and warm searches
    (None: not reached) by seed, and the prior's agreement with the truth by seed."""

    name: str
    cold: list[list[int | None]]  # [tier][seed]
    warm: list[list[int | None]]
    agreement: list[list[tuple[float, float]]]  # [seed][tier]
    queued: list[int]  # picks queued per seed
    earlier_launches: list[int]
    weights: list[list[float]]  # [seed][tier]: the prior's weight at the warm search's end


def reached(
    runs: Sequence[Launches], truth: list[dict[str, float]], tol: float, maximize: bool
) -> list[list[int | None]]:
    """Per tier, per run: launches to come truly within ``tol`` of the tier's best."""
    return [[trials_to_reach(r, t, i, tol, maximize) for r in runs] for i, t in enumerate(truth)]


def render(result: PriorResult, tiers: Sequence[int], budget: int) -> str:
    """One prior's agreement with the truth and its cold/warm table."""
    rho = [_median(a[i][0] for a in result.agreement) for i in range(len(tiers))]
    pick = [_median(a[i][1] for a in result.agreement) for i in range(len(tiers))]
    kept = [_median(w[i] for w in result.weights) for i in range(len(tiers))]
    lines = [
        f"prior {result.name}: earlier studies of {_span(result.earlier_launches)} launches, "
        f"{_span(result.queued)} picks queued after the baseline",
        "  rank correlation with the truth (median over seeds): " + _tiers(tiers, rho, "{:.2f}"),
        "  its best config's true value / best (median):        " + _tiers(tiers, pick, "{:.2f}"),
        "  weight kept at the warm search's end (median):       " + _tiers(tiers, kept, "{:.2f}"),
        f"{'tier':>6}{'cold':>8}{'warm':>8}{'warm/cold':>11}{'cold q1..q3':>14}{'warm q1..q3':>14}",
    ]
    labels = [*(f"c{t}" for t in tiers), "all"]
    colds, warms = [*result.cold, _every(result.cold)], [*result.warm, _every(result.warm)]
    for label, cold, warm in zip(labels, colds, warms, strict=True):
        lines.append(_row(label, cold, warm, budget))
    return "\n".join(lines)


def _median(values: Iterable[float]) -> float:
    """The median of the values that are not NaN (NaN when none is)."""
    known = [v for v in values if not math.isnan(v)]
    return statistics.median(known) if known else math.nan


def _row(label: str, cold: list[int | None], warm: list[int | None], budget: int) -> str:
    (c, ctext), (w, wtext) = median_cell(cold, budget), median_cell(warm, budget)
    ratio = "-" if math.isinf(c) or math.isinf(w) else f"{w / c:.2f}"
    spreads = f"{spread_cell(cold, budget):>14}{spread_cell(warm, budget):>14}"
    return f"{label:>6}{ctext:>8}{wtext:>8}{ratio:>11}{spreads}"


def _every(per_tier: list[list[int | None]]) -> list[int | None]:
    """Per seed: launches until every tier is reached (None: some tier never was)."""
    return [slowest(s) for s in zip(*per_tier, strict=True)]


def _tiers(tiers: Sequence[int], values: Sequence[float], fmt: str) -> str:
    return "  ".join(f"c{t} {fmt.format(v)}" for t, v in zip(tiers, values, strict=True))


def _span(counts: Sequence[int]) -> str:
    return f"{min(counts)}" if min(counts) == max(counts) else f"{min(counts)}-{max(counts)}"


def header(space: Space, keys: Sequence[str], truth: list[dict[str, float]], args: Any) -> str:
    maximize = get_objective(space.study.objective or "").direction == "maximize"
    tol = args.tolerance
    close = [sum(within(v, _best(d, maximize), tol, maximize) for v in d.values()) for d in truth]
    lines = [
        f"truth: {len(keys)} distinct launches of the discretised minimax_h200 space on the "
        f"simulated h200x4 engine, {args.prompts} prompts per tier, mean of {args.replicates} "
        f"engine seeds; {args.seeds} seeds x budget {args.budget} launches, cold and warm",
        f"configs within {args.tolerance:.0%} of each tier's best: "
        + _tiers(space.workload.tiers, close, "{}"),
    ]
    return "\n".join(lines)


def _best(values: dict[str, float], maximize: bool) -> float:
    return max(values.values()) if maximize else min(values.values())
