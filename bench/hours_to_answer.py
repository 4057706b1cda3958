"""Engine-hours until every tier's pick is truly within 3% of its best: measuring every tier of
every launch in full (today's measurement) against racing each tier (``objectives.race``).

On the exhaustive tables ``bench/sample_efficiency.py`` builds (``bench.hours_spaces``: the
H200 space thinned to keep the sweep short, the held-out 910C space whole), each method
searches a space ``--seeds`` times with at most ``--budget`` launches, through the tool's own
study code (``bench.table_search``: the baseline first, rules and repeats free, one engine
seed's draw per launch). Every launch is charged the hardware seconds it would cost
(``bench.hours_race``): its start-up, warm-up and tiers as the simulated engine clocked them,
a raced tier only until the request that decided it. The figure is the hours until every
tier's pick (the best observed launch feasible there and measured in full) is truly, as the
table's mean over engine seeds, within ``--tolerance`` of the tier's best at once; a search
stops there. Methods, side by side in one run:

- ``today``: the default sampler, every tier measured in full;
- ``adaptive``: the default sampler, every tier raced against its incumbent (the baseline is
  measured in full, and a tier stopped early is never a pick);
- ``random``, ``tpe``: those samplers, every tier in full, for reference.

    python -m bench.hours_to_answer [--seeds 10] [--budget 100] [--replicates 2] [--workers 2]
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import optuna

from bench.efficiency_truth import Goal, Record, truths
from bench.hours_race import Launch, full_cost, hours_to_reach, pick_ratio, raced, reached
from bench.hours_spaces import SPACES, hours_space
from bench.sweep import cache_path, init_measure, load, measure, measure_all, replicate_names, save
from bench.table_search import TableObjective, search
from objectives.objective import get_objective
from objectives.race import RaceRule
from tuner.run.race import ceilings
from tuner.samplers.registry import DEFAULT_SAMPLER, make_sampler

METHODS = {"today": DEFAULT_SAMPLER, "adaptive": DEFAULT_SAMPLER, "random": "random", "tpe": "tpe"}
RACED = {"adaptive"}

_W: dict[str, Any] = {}


def _init(path: Path, table: dict[str, Record], replicates: list[str], goal: Goal) -> None:
    space = hours_space(path)
    init_measure(space)
    # The SLOs on a longest figure, per tier index (a table's records list tiers in order).
    limits = {space.workload.tiers.index(t): v for t, v in ceilings(space).items()}
    _W.update(path=path, table=table, replicates=replicates, goal=goal, space=space, limits=limits)


def one_search(job: tuple[str, int, int]) -> tuple[str, int, list[Launch]]:
    """One method, one seed: its launches in order, each with what it cost."""
    method, seed, budget = job
    space = hours_space(_W["path"], seed)
    key = get_objective(space.study.objective or "").key
    rule = RaceRule(space.study.race_alpha, space.study.race_margin)
    launches: list[Launch] = []

    def lookup(launch_key: str, values: dict[str, Any], replicate: str) -> Record:
        name = f"{replicate}|{launch_key}"
        if name not in _W["table"]:
            _W["table"][name] = measure(values, replicate)
        rec = _W["table"][name]
        # The baseline (the first launch) is always measured in full: the yardstick.
        if method in RACED and launches:
            return raced(rec, launches, key, rule, _W["limits"])
        return full_cost(rec)

    objective = TableObjective(space, np.random.default_rng(seed), _W["replicates"], lookup)
    objective.launches = launches
    sampler = make_sampler(METHODS[method], space)
    search(objective, sampler, budget, done=lambda done: reached(done, _W["goal"]))
    return method, seed, launches


def run_space(path: Path, args: argparse.Namespace) -> str:
    """Sweep (cached) and search one space; its table as text."""
    space = hours_space(path)
    maximize = get_objective(space.study.objective or "").direction == "maximize"
    table = load(cache_path(space))
    replicates = replicate_names(args.replicates)
    keys = measure_all(space, table, replicates, args.workers, path.stem)
    save(cache_path(space), table)
    goal: Goal = (truths(table, keys, len(space.workload.tiers), replicates), args.tol, maximize)
    jobs = [(m, seed, args.budget) for m in args.methods for seed in range(args.seeds)]
    runs: dict[str, list[list[Launch]]] = {m: [] for m in args.methods}
    with multiprocessing.Pool(args.workers, _init, (path, table, replicates, goal)) as pool:
        for method, _, launches in pool.imap_unordered(one_search, jobs):
            runs[method].append(launches)
    head = (
        f"{path.stem}: {len(keys)} distinct launches, truth the mean of {args.replicates} "
        f"engine seeds; {args.seeds} seeds x at most {args.budget} launches"
    )
    return head + "\n" + render(rows(runs, goal, space.workload.tiers), space.workload.tiers)


def rows(
    runs: dict[str, list[list[Launch]]], goal: Goal, tiers: Sequence[int]
) -> list[dict[str, Any]]:
    """Per method: hours and launches to the answer (median, quartiles), how many seeds got
    there, the ratio to today's median, and each tier's pick over its best at the end."""
    out = []
    base: float | None = None
    for method, searches in runs.items():
        reach = [hours_to_reach(s, goal) for s in searches]
        hours = [r[0] if r else float("inf") for r in reach]
        median = float(np.median(hours))
        base = median if method == "today" else base
        out.append(
            {
                "method": method,
                "hours": median,
                "q": (quantile(hours, 0.25), quantile(hours, 0.75)),
                "launches": float(np.median([r[1] if r else float("inf") for r in reach])),
                "reached": sum(r is not None for r in reach),
                "seeds": len(searches),
                "ratio": median / base if base and np.isfinite(base) else None,
                "picks": [
                    statistics.median(pick_ratio(s, goal[0][i], i, goal[2]) for s in searches)
                    for i in range(len(tiers))
                ],
                "spent": float(
                    np.median([sum(r["cost_s"] for _, r in s) / 3600 for s in searches])
                ),
            }
        )
    return out


def quantile(values: Sequence[float], q: float) -> float:
    """A quantile that reads ``inf`` where unreached searches lie (numpy's gives nan)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def render(table: Sequence[dict[str, Any]], tiers: Sequence[int]) -> str:
    picks = " ".join(f"c{t:<5}" for t in tiers)
    lines = [
        f"{'method':<9} {'hours to 3%':>11} {'(quartiles)':>15} {'vs today':>8} "
        f"{'launches':>8} {'reached':>7}  pick/best at the end: {picks}"
    ]
    for r in table:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}x"
        q = f"{r['q'][0]:.1f}-{r['q'][1]:.1f}"
        cells = " ".join(f"{p:6.3f}" for p in r["picks"])
        lines.append(
            f"{r['method']:<9} {r['hours']:>11.1f} {q:>15} {ratio:>8} {r['launches']:>8.1f} "
            f"{r['reached']:>3}/{r['seeds']:<3}  {' ' * 22}{cells}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spaces", default=",".join(str(p) for p in SPACES))
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--budget", type=int, default=100, help="Launches per method and seed.")
    ap.add_argument("--methods", default=",".join(METHODS), help=", ".join(METHODS))
    ap.add_argument("--tolerance", dest="tol", type=float, default=0.03)
    ap.add_argument("--replicates", type=int, default=2, help="Engine seeds behind the truth.")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    args.methods = args.methods.split(",")
    if unknown := [m for m in args.methods if m not in METHODS]:
        print(f"--methods: unknown {unknown[0]!r}; valid: {', '.join(METHODS)}", file=sys.stderr)
        return 2
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    for path in args.spaces.split(","):
        print(run_space(Path(path), args) + "\n", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
