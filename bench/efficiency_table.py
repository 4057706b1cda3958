"""sample_efficiency.py's tables: launches per tier and method, their spread, and one search
launch by launch (``--trace``)."""

from __future__ import annotations

import argparse
import math
import statistics
from collections.abc import Sequence
from typing import Any

import numpy as np

from bench.efficiency_truth import Record, trials_to_reach
from tuner.space.schema import Space


def trace_rows(
    launches: Sequence[tuple[str, Record]],
    truth: list[dict[str, float]],
    tol: float,
    maximize: bool,
) -> list[dict[str, Any]]:
    """One row per launch: knob values, outcome, true value / tier's best (None: infeasible
    on some engine seed), and the tiers whose pick comes within ``tol`` at that launch."""
    pick = max if maximize else min
    bests = [pick(t.values()) for t in truth]
    reached = [trials_to_reach(launches, t, i, tol, maximize) for i, t in enumerate(truth)]
    return [
        {
            "launch": n,
            "params": dict(rec.get("params", {})),
            "kind": rec["kind"] or "ok",
            "vs_best": [
                t[key] / b if key in t else None for t, b in zip(truth, bests, strict=True)
            ],
            "reached": [i for i, r in enumerate(reached) if r == n],
        }
        for n, (key, rec) in enumerate(launches, start=1)
    ]


def render_trace(rows: Sequence[dict[str, Any]], tiers: Sequence[int]) -> str:
    """The trace as a table: a column per knob, per-tier true/best, reached tiers."""
    names = list(rows[0]["params"]) if rows else []
    cols = [[str(r["params"].get(n, "")) for r in rows] for n in names]
    widths = [max(len(n), *map(len, c)) for n, c in zip(names, cols, strict=True)]
    head = ["#".rjust(3), *(n.ljust(w) for n, w in zip(names, widths, strict=True)), "kind  "]
    head += [f"c{t}".rjust(5) for t in tiers] + ["reached"]
    out = [" ".join(head)]
    for i, r in enumerate(rows):
        cells = [str(r["launch"]).rjust(3)]
        cells += [c[i].ljust(w) for c, w in zip(cols, widths, strict=True)]
        cells.append(f"{r['kind']:<6}")
        cells += ["    -" if v is None else f"{v:5.2f}" for v in r["vs_best"]]
        cells.append(",".join(f"c{tiers[t]}" for t in r["reached"]))
        out.append(" ".join(cells))
    return "\n".join(out)


def median_cell(counts: Sequence[int | None], budget: int) -> tuple[float, str]:
    med = statistics.median([math.inf if c is None else c for c in counts])
    return med, (f">{budget}" if math.isinf(med) else f"{med:g}")


def results_table(
    space: Space,
    runs: dict[str, list[list[tuple[str, Record]]]],
    truth: list[dict[str, float]],
    args: argparse.Namespace,
    maximize: bool,
) -> str:
    methods = list(runs)
    out = [
        "",
        f"median launches to come within {args.tolerance:.0%} of each tier's best "
        f"(>{args.budget}: not reached by half the seeds)",
        f"{'tier':>6}"
        + "".join(f"{m:>10}" for m in methods)
        + f"{'random/tune':>13}"
        + f"{'90% interval':>16}",
    ]
    rows: list[tuple[str, list[list[int | None]]]] = []
    for i, tier in enumerate(space.workload.tiers):
        rows.append(
            (
                f"c{tier}",
                [
                    [trials_to_reach(lr, truth[i], i, args.tolerance, maximize) for lr in runs[m]]
                    for m in methods
                ],
            )
        )
    every = [
        [slowest(c) for c in zip(*(cells[j] for _, cells in rows), strict=True)]
        for j in range(len(methods))
    ]
    rows.append(("all", every))
    for label, cells in rows:
        meds = [median_cell(c, args.budget) for c in cells]
        line = f"{label:>6}" + "".join(f"{text:>10}" for _, text in meds)
        if "tune" in methods and "random" in methods:
            t, r = methods.index("tune"), methods.index("random")
            line += f"{ratio(meds[r][0], meds[t][0], args.budget):>13}"
            line += f"{ratio_interval(cells[t], cells[r]):>16}"
        out.append(line)
    out += [
        "",
        "first to third quartile across seeds (the spread behind each median)",
        f"{'tier':>6}" + "".join(f"{m:>12}" for m in methods),
    ]
    for label, cells in rows:
        out.append(f"{label:>6}" + "".join(f"{spread_cell(c, args.budget):>12}" for c in cells))
    return "\n".join(out)


def spread_cell(counts: Sequence[int | None], budget: int) -> str:
    """Nearest-rank quartiles of the launches the seeds needed ('>budget': never reached)."""
    ranked = sorted(math.inf if c is None else c for c in counts)
    quartiles = (ranked[round(q * (len(ranked) - 1))] for q in (0.25, 0.75))
    return "..".join(f">{budget}" if math.isinf(v) else f"{v:g}" for v in quartiles)


def ratio(random: float, tune: float, budget: int) -> str:
    """How many times fewer launches tune needed than random search ('>' when censored)."""
    if math.isinf(tune):
        return "-"
    return f"{random / tune:.1f}x" if math.isfinite(random) else f">{budget / tune:.1f}x"


def ratio_interval(
    tune: Sequence[int | None], random: Sequence[int | None], draws: int = 2000, level: float = 0.9
) -> str:
    """The central ``level`` interval of the random/tune ratio of medians when each method's
    seeds are resampled with replacement: with ten seeds a median moves by several launches,
    so a ratio near a bar is read against this ("inf": random's median not reached)."""
    rng = np.random.default_rng(0)
    t, r = (
        np.array([math.inf if c is None else c for c in x], dtype=float) for x in (tune, random)
    )
    med_t = np.median(rng.choice(t, (draws, t.size)), axis=1)
    med_r = np.median(rng.choice(r, (draws, r.size)), axis=1)
    with np.errstate(invalid="ignore"):  # inf / inf where neither reached: counted as 0
        ratios = np.where(np.isinf(med_t), 0.0, med_r / med_t)
    bounds = np.quantile(ratios, [(1 - level) / 2, (1 + level) / 2], method="inverted_cdf")
    return "..".join("inf" if math.isinf(b) else f"{b:.1f}x" for b in bounds)


def slowest(counts: Sequence[int | None]) -> int | None:
    """The most launches any of ``counts`` needed (None: one never got there)."""
    return None if any(c is None for c in counts) else max(c for c in counts if c is not None)
