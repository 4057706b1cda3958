"""How many trials each search needs to find every tier's best config, on the simulated engine.

A search space (``--space``, by default minimax_h200) is discretised (``bench/discretise.py``:
a handful of values per knob, chosen per space, or by a generic rule for a space it does not
name) and run on the simulated engine of the space's ``sim:`` profile with a shortened workload
(``--prompts`` per tier). The number of distinct launches is printed before any is measured.
Every distinct launch of the discretised space is measured on ``--replicates`` engine seeds
(replicates ``a``, ``b``, ...); a launch's true value at a tier is the mean over them, and only
a launch feasible at that tier on every seed counts there. Feasible at a tier is what ``tune
run``'s per-tier recommendations read: every request of the tier served and the tier's own SLOs
met, so a config that misses the TTFT SLO at c20 can still be the answer at c1. That exhaustive
table gives each tier's true best config and the configs within ``--tolerance`` of it. One seed
is not enough: at some tiers a single measurement varies by about as much as the tolerance, so
a one-seed "best" is largely the luckiest draw, and a search would be scored on finding that
draw rather than the config. Then each method searches the same space for ``--seeds`` seeds,
``--budget`` launches each:

- ``tune``: the study's default sampler (``tuner.samplers.registry``), one objective per tier, the
  loop's constraints (rules, engine, failed_requests, slo), the baseline first;
- ``random``: random search (same baseline first);
- ``grid``: a nested-loop walk like vLLM's auto_tune script (``tuner.samplers.grid``), seeded
  value order;
- any sampler name of ``tuner.samplers.registry.SAMPLERS`` (``--methods tpe,gp,nsga2``
  compares them).

A launch shows a method one noisy draw: one of the replicates, picked at random per trial. As
in ``tune run``, configs that break a rule and configs rendering to a launch already made cost
no launch. After each launch a method's pick for a tier is its best observed value among the
launches feasible at that tier; the figure is the number of launches until that pick is truly
(replicate mean) within the tolerance of the tier's best, and a search stops once it has
reached every tier, since later launches change no figure. The table prints each method's
median over seeds, random's median over tune's, and that ratio's 90% interval when the seeds
are resampled (bootstrap): with ten seeds a ratio near a bar can sit well inside its noise.
Measurements are cached under results/bench/ (``bench.sweep``), so reruns skip the sweep;
searches run through ``bench.table_search``.

    python -m bench.sample_efficiency [--space search_spaces/minimax_910c.yaml] [--seeds 10]
        [--budget 100] [--replicates 4] [--workers 2]

``--trace SEED`` instead prints one search of the first of ``--methods`` launch by launch: the
knob values, the outcome, each launch's true value over each tier's best, and where each tier
is reached: where a search spends its launches, which the medians do not show.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import optuna

from bench.discretise import bench_space, default_prompts
from bench.efficiency_table import render_trace, results_table, trace_rows
from bench.efficiency_truth import Goal, Record, reached_all, truths, within
from bench.sweep import (
    SPACE,
    all_points,
    cache_path,
    init_measure,
    load,
    measure,
    measure_all,
    replicate_names,
    save,
)
from bench.table_search import Launches, TableObjective, search
from objectives.objective import get_objective
from tuner.errors import StudyError
from tuner.samplers.registry import DEFAULT_SAMPLER, SAMPLERS, grid_values, make_sampler
from tuner.space.schema import Space

# --- the searches, in worker processes ----------------------------------------------------

_W: dict[str, Any] = {}


def _init_worker(
    space: Space,
    path: Path,
    table: dict[str, Record],
    replicates: Sequence[str] = ("a",),
    goal: Goal | None = None,
) -> None:
    init_measure(space)
    _W.update(path=path, space=space, table=table, replicates=list(replicates), goal=goal)


def _search(job: tuple[str, int, int]) -> tuple[str, int, Launches, dict[str, Record]]:
    """One method, one seed: the launches it made, in order, with what it observed, and the
    launches it measured that the table lacked."""
    method, seed, budget = job
    space = bench_space(_W["path"], _W["space"].workload.num_prompts, seed)
    new: dict[str, Record] = {}

    def lookup(key: str, values: dict[str, Any], replicate: str) -> Record:
        name = f"{replicate}|{key}"
        if name not in _W["table"]:
            new[name] = _W["table"][name] = measure(values, replicate)
        return dict(_W["table"][name])

    rng = np.random.default_rng(seed)
    objective = TableObjective(space, rng, _W["replicates"], lookup)
    sampler = make_sampler(DEFAULT_SAMPLER if method == "tune" else method, space)
    search(objective, sampler, budget, done=lambda launches: reached_all(launches, _W["goal"]))
    return method, seed, objective.launches, new


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--space", type=Path, default=SPACE, help="A space the simulated engine serves."
    )
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--budget", type=int, default=100, help="Launches per method and seed.")
    ap.add_argument("--methods", default="tune,random,grid", help=f"tune, {', '.join(SAMPLERS)}")
    ap.add_argument(
        "--prompts", type=int, default=None, help="Measured requests per tier (per space)."
    )
    ap.add_argument("--tolerance", type=float, default=0.03)
    ap.add_argument(
        "--replicates", type=int, default=4, help="Engine seeds behind each true value."
    )
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--trace",
        type=int,
        default=None,
        metavar="SEED",
        help="Instead, print one search (the first method, this seed) launch by launch.",
    )
    args = ap.parse_args(argv)
    if args.prompts is None:
        args.prompts = default_prompts(args.space)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = bench_space(args.space, args.prompts)
    objective = get_objective(space.study.objective or "")
    methods = args.methods.split(",")
    if problem := unavailable(methods, space):
        print(problem, file=sys.stderr)
        return 2
    path = cache_path(space)
    table = load(path)
    replicates = replicate_names(args.replicates)
    keys = measure_all(space, table, replicates, args.workers, args.space.stem)
    save(path, table)
    truth = truths(table, keys, len(space.workload.tiers), replicates)
    if args.trace is not None:
        _init_worker(space, args.space, table, replicates)
        _, _, launches, _ = _search((methods[0], args.trace, args.budget))
        rows = trace_rows(launches, truth, args.tolerance, objective.direction == "maximize")
        print(render_trace(rows, space.workload.tiers))
        return 0
    jobs = [(m, seed, args.budget) for m in methods for seed in range(args.seeds)]
    runs: dict[str, list[list[tuple[str, Record]]]] = {m: [] for m in methods}
    start = time.perf_counter()
    goal = (truth, args.tolerance, objective.direction == "maximize")
    init = (space, args.space, table, replicates, goal)
    with multiprocessing.Pool(args.workers, _init_worker, init) as pool:
        for i, (method, seed, launches, new) in enumerate(pool.imap_unordered(_search, jobs), 1):
            runs[method].append(launches)
            table.update(new)
            took = time.perf_counter() - start
            print(f"  {i}/{len(jobs)} searches ({method} {seed}, {took:.0f} s)", file=sys.stderr)
    save(path, table)
    print(header(space, keys, truth, objective.name, args, time.perf_counter() - start))
    print(results_table(space, runs, truth, args, objective.direction == "maximize"))
    return 0


def unavailable(methods: Sequence[str], space: Space) -> str | None:
    """Why a method cannot search here (an unknown name, ``gp`` without torch), found by
    building its sampler once: before the sweep, not in a worker after it."""
    for method in methods:
        try:
            make_sampler(DEFAULT_SAMPLER if method == "tune" else method, space)
        except StudyError as e:
            return f"--methods {method}: {e}"
    return None


def header(
    space: Space,
    keys: Sequence[str],
    truth: list[dict[str, float]],
    name: str,
    args: argparse.Namespace,
    search_s: float,
) -> str:
    grid = grid_values(space)
    size = math.prod(len(v) for v in grid.values())
    lines = [
        f"space: {args.space.stem} discretised to {size} points, {len(all_points(space))} obeying "
        f"the rules, {len(keys)} distinct launches ({sum(k.startswith('refused') for k in keys)} "
        f"refused at start-up); {args.prompts} prompts per tier on the simulated "
        f"{space.target.settings()['profile']} engine",
        f"objective {name}; {args.seeds} seeds x budget {args.budget} launches per method; "
        f"searches took {search_s:.0f} s",
        "",
        f"true best per tier (exhaustive, mean of {args.replicates} engine seeds), configs within "
        f"{args.tolerance:.0%} of it:",
    ]
    for tier, values in zip(space.workload.tiers, truth, strict=True):
        best = min(values.values()) if values else math.nan
        close = sum(within(v, best, args.tolerance, False) for v in values.values())
        lines.append(f"  c{tier:<3} {best:8.1f}   {close:4d} of {len(values)} feasible launches")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
