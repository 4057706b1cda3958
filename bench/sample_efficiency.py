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
Measurements are cached under results/bench/ keyed by the discretised space (its knobs,
rules, workload and engine profile, so two spaces never share a table) and the simulator's
source, each launch by the engine config the simulator resolves, so reruns skip the sweep.

    python bench/sample_efficiency.py [--space search_spaces/minimax_910c.yaml] [--seeds 10]
        [--budget 100] [--replicates 4] [--workers 2]

``--trace SEED`` instead prints one search of the first of ``--methods`` launch by launch: the
knob values, the outcome, each launch's true value over each tier's best, and where each tier
is reached: where a search spends its launches, which the medians do not show.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import multiprocessing
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import optuna

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.discretise import bench_space, default_prompts  # noqa: E402
from bench.efficiency_table import (  # noqa: E402
    render_trace,
    results_table,
    trace_rows,
)
from bench.efficiency_truth import (  # noqa: E402
    Goal,
    Record,
    reached_all,
    truths,
    within,
)
from launchers.simengine import EngineRefused, load_profile  # noqa: E402
from launchers.simengine.config import resolve  # noqa: E402
from objectives.objective import get_objective  # noqa: E402
from tuner.engine import EngineConfig  # noqa: E402
from tuner.errors import StudyError  # noqa: E402
from tuner.record.trial import CONSTRAINT_KEYS, TrialOutcome, write_tier_ok  # noqa: E402
from tuner.run.trial import TrialRunner  # noqa: E402
from tuner.samplers.registry import (  # noqa: E402
    DEFAULT_SAMPLER,
    SAMPLERS,
    grid_values,
    make_sampler,
)
from tuner.space import render_engine_config  # noqa: E402
from tuner.space.sample import rules_violation, suggest, violated_rules  # noqa: E402
from tuner.space.schema import Space  # noqa: E402

SPACE = REPO / "search_spaces" / "minimax_h200.yaml"
CACHE_DIR = REPO / "results" / "bench"
RECORD_FORMAT = "tier_ok"  # in the cache key: tables written before it lack per-tier feasibility


def launch_key(space: Space, values: dict[str, Any]) -> str:
    """The engine config the simulator resolves (irrelevant knobs drop out), hashed."""
    config = render_engine_config(space, values)
    try:
        cfg = resolve(config.args, config.env, load_profile(space.target.settings()["profile"]))
    except EngineRefused:
        return "refused:" + config.fingerprint()
    return hashlib.sha256(repr(replace(cfg, notes=(), port=0, host="")).encode()).hexdigest()


def cache_path(space: Space) -> Path:
    digest = hashlib.sha256(space.model_dump_json().encode())
    digest.update(RECORD_FORMAT.encode())
    for src in sorted((REPO / "launchers" / "simengine").rglob("*")):
        if src.is_file() and src.suffix in (".py", ".yaml"):
            digest.update(src.read_bytes())
    return CACHE_DIR / f"sample_efficiency_{digest.hexdigest()[:12]}.json"


# --- measuring (worker processes) ---------------------------------------------------------

_W: dict[str, Any] = {}


def replicate_names(n: int) -> list[str]:
    """The engine seeds' labels: ``a``, ``b``, ... (``a`` and ``b`` as earlier tables hold)."""
    return [chr(ord("a") + i) for i in range(n)]


def _init_worker(
    path: Path,
    prompts: int,
    table: dict[str, Record],
    replicates: Sequence[str] = ("a",),
    goal: Goal | None = None,
) -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = bench_space(path, prompts)
    _W.update(space=space, path=path, table=table, dir=Path(tempfile.mkdtemp(prefix="sample_eff_")))
    _W["replicates"] = list(replicates)
    _W["goal"] = goal
    _W["runner"] = TrialRunner(space, get_objective(space.study.objective or ""), 60.0)


def _measure(values: dict[str, Any], replicate: str) -> Record:
    return launch_record(_W["runner"], _W["space"], values, replicate, _W["dir"] / "trial")


def launch_record(
    runner: TrialRunner, space: Space, values: dict[str, Any], replicate: str, folder: Path
) -> Record:
    """One launch of ``values`` on engine seed ``replicate``, as the exhaustive table holds it."""
    return record_of(space, runner.run(replicate_config(space, values, replicate), folder))


def replicate_config(space: Space, values: dict[str, Any], replicate: str) -> EngineConfig:
    """``values`` rendered for engine seed ``replicate`` (the simulator seeds on the label)."""
    return render_engine_config(space, values, labels={"trial": replicate})


def record_of(space: Space, out: TrialOutcome) -> Record:
    """A launch's outcome as the exhaustive table holds it."""
    # empty when nothing was measured (a refusal): feasible_at then reads the constraints
    tier_ok = [bool(out.tier_ok.get(str(c))) for c in space.workload.tiers] if out.tier_ok else []
    return {
        "values": out.values,
        "constraints": out.constraints,
        "kind": out.failure_kind,
        "tier_ok": tier_ok,
    }


def _measure_job(job: tuple[str, dict[str, Any], str]) -> tuple[str, Record]:
    key, values, replicate = job
    return f"{replicate}|{key}", _measure(values, replicate)


def _lookup(key: str, values: dict[str, Any], replicate: str, new: dict[str, Record]) -> Record:
    name = f"{replicate}|{key}"
    if name not in _W["table"]:
        new[name] = _W["table"][name] = _measure(values, replicate)
    return dict(_W["table"][name])


# --- the searches -------------------------------------------------------------------------


def _search(job: tuple[str, int, int]) -> tuple[str, int, list[tuple[str, Record]], dict]:
    """One method, one seed: the launches it made, in order, with what it observed."""
    method, seed, budget = job
    space = bench_space(_W["path"], _W["space"].workload.num_prompts, seed)
    objective = get_objective(space.study.objective or "")
    sampler = make_sampler(DEFAULT_SAMPLER if method == "tune" else method, space)
    directions = [objective.direction] * len(space.workload.tiers)
    study = optuna.create_study(directions=directions, sampler=sampler)
    study.enqueue_trial(space.defaults())
    rng = np.random.default_rng(seed)
    launches: list[tuple[str, Record]] = []
    seen: dict[str, Record] = {}
    new: dict[str, Record] = {}

    def run_trial(trial: optuna.Trial) -> list[float]:
        values = suggest(trial, space)
        if violated_rules(space, values):  # refused before any launch, as in tune run
            constraints = dict.fromkeys(CONSTRAINT_KEYS, 0.0)
            constraints["rules"] = rules_violation(space, values)
            worst = [objective.worst] * len(space.workload.tiers)
            rec: Record = {"values": worst, "kind": "rules", "constraints": constraints}
        else:
            fingerprint = render_engine_config(space, values).fingerprint()
            if fingerprint not in seen:  # a launch already made is answered from the study
                key = launch_key(space, values)
                seen[fingerprint] = _lookup(key, values, str(rng.choice(_W["replicates"])), new)
                seen[fingerprint]["params"] = dict(values)  # for --trace; the table keeps none
                launches.append((key, seen[fingerprint]))
            rec = seen[fingerprint]
        for name, value in rec["constraints"].items():
            trial.set_constraint(name, value)
        if rec.get("tier_ok"):  # as tune run records it: the sampler reads feasibility per tier
            tiers = space.workload.tiers
            write_tier_ok(trial, dict(zip(map(str, tiers), rec["tier_ok"], strict=True)))
        return list(rec["values"])

    for _ in range(budget * 20):  # rules and duplicates are free, but bounded
        if len(launches) >= budget or reached_all(launches, _W["goal"]):
            break
        study.optimize(run_trial, n_trials=1)
    return method, seed, launches, new


# --- scoring ------------------------------------------------------------------------------


# --- main ---------------------------------------------------------------------------------


def all_points(space: Space) -> list[dict[str, Any]]:
    grid = grid_values(space)
    points = (dict(zip(grid, combo, strict=True)) for combo in itertools.product(*grid.values()))
    return [p for p in points if not violated_rules(space, p)]


def distinct_launches(
    space: Space, key: Callable[[Space, dict[str, Any]], str] = launch_key
) -> dict[str, dict[str, Any]]:
    """One point per distinct launch the rules allow, by ``key`` (the simulator's resolved
    launch by default)."""
    keyed: dict[str, dict[str, Any]] = {}
    for point in all_points(space):
        keyed.setdefault(key(space, point), point)
    return keyed


def exhaustive(
    space: Space, table: dict[str, Record], workers: int, path: Path, replicates: Sequence[str]
) -> list[str]:
    """Measure every distinct launch of the space on every replicate; returns the launch keys."""
    keyed = distinct_launches(space)
    print(f"{path.stem}: {len(keyed)} distinct launches", file=sys.stderr)
    todo = [(k, p, r) for r in replicates for k, p in keyed.items() if f"{r}|{k}" not in table]
    if todo:
        print(f"measuring {len(todo)} launches (exhaustive sweep)...", file=sys.stderr)
        start = time.perf_counter()
        init = (path, space.workload.num_prompts, {})
        with multiprocessing.Pool(workers, _init_worker, init) as pool:
            for i, (name, rec) in enumerate(pool.imap_unordered(_measure_job, todo, 8), 1):
                table[name] = rec
                if i % 200 == 0:
                    took = time.perf_counter() - start
                    print(f"  {i}/{len(todo)} ({took:.0f} s)", file=sys.stderr)
    return list(keyed)


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
    table: dict[str, Record] = json.loads(path.read_text()) if path.exists() else {}
    replicates = replicate_names(args.replicates)
    keys = exhaustive(space, table, args.workers, args.space, replicates)
    save(path, table)
    truth = truths(table, keys, len(space.workload.tiers), replicates)
    if args.trace is not None:
        _init_worker(args.space, args.prompts, table, replicates)
        _, _, launches, _ = _search((methods[0], args.trace, args.budget))
        rows = trace_rows(launches, truth, args.tolerance, objective.direction == "maximize")
        print(render_trace(rows, space.workload.tiers))
        return 0
    jobs = [(m, seed, args.budget) for m in methods for seed in range(args.seeds)]
    runs: dict[str, list[list[tuple[str, Record]]]] = {m: [] for m in methods}
    start = time.perf_counter()
    goal = (truth, args.tolerance, objective.direction == "maximize")
    init = (args.space, args.prompts, table, replicates, goal)
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


def save(path: Path, table: dict[str, Record]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(table))


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
