"""Cold against warm: launches to each tier's best with and without a warm start's prior.

The truth is the exhaustive table ``sample_efficiency.py`` builds: every distinct launch of the
discretised minimax_h200 space on the shipped simulated h200x4 profile, each config's true
value the mean over ``--replicates`` engine seeds (cached under results/bench/ with that
bench's key, so either bench fills the cache for the other).

Each prior is an earlier study on a perturbed copy of the profile (``bench.warm_start_priors``),
written to a temporary folder: ``helpful`` a neighbouring deployment that ranks configs mostly
as the truth does, ``misleading`` one whose kernels rank the other way round. For every seed the
earlier study is a real ``tune run`` (``run_study``, ``--prior-budget`` trials, the default
sampler, confirmations off) stored in SQLite, and the warm search reads it back through
``load_warm_start``: its picks queued after the baseline, its measurements the sampler's
``Prior``, as ``tune run --warm-start`` does. How far a prior agrees with the truth is shown
per tier: the rank correlation (Spearman) of the earlier study's values against the true
values of the same configs, and the true value of the earlier study's best config at the
tier over the tier's best.

Cold and warm then search the same space from the same seeds, ``--budget`` launches each,
against the table as ``sample_efficiency.py`` does (``bench.table_search``): a launch shows
one replicate drawn at random, configs breaking a rule or rendering to a launch already made
cost nothing, and the queued picks are launches like any other. The figure per tier is the
number of launches until the search's pick is truly within ``--tolerance`` of the tier's best.

    python -m bench.warm_start [--seeds 4] [--budget 60] [--prior-budget 35] [--workers 2]
"""

from __future__ import annotations

import argparse
import copy
import math
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import optuna

from bench.efficiency_truth import Record, truths
from bench.ranks import spearman
from bench.sweep import (
    LaunchKey,
    cache_path,
    launch_key,
    load,
    map_jobs,
    measure_all,
    quiet,
    replicate_names,
    save,
)
from bench.table_search import Launches, TableObjective, search
from bench.warm_start_priors import PRIORS, earlier_space_file, perturbed_profile, space_data
from bench.warm_start_table import PriorResult, header, reached, render
from objectives.objective import get_objective
from tuner.run.study import RunOptions, run_study
from tuner.run.warm import WarmStart, load_warm_start
from tuner.samplers.registry import DEFAULT_SAMPLER, make_sampler
from tuner.space.schema import Space

# --- the earlier studies --------------------------------------------------------------------


@dataclass(frozen=True)
class Setup:
    """What every search and earlier study of one bench run shares."""

    data: dict[str, Any]  # the truth's space as YAML data (seed 0)
    table: dict[str, Record]
    replicates: tuple[str, ...]
    budget: int
    prior_budget: int
    folder: Path  # the perturbed profiles, earlier spaces and studies
    # How a config is found in ``table`` (the simulator's resolved launch by default; the
    # rendered command for a table measured on a real engine), and the stem of the
    # perturbed profiles' files in ``folder``.
    key: LaunchKey = launch_key
    profile: str = "h200x4"

    def space(self, seed: int) -> Space:
        data = copy.deepcopy(self.data)
        data["study"]["seed"] = seed
        return Space.model_validate(data)


def study_name(prior: str, seed: int) -> str:
    return f"{prior}-{seed}"


def earlier_study(job: tuple[Setup, str, int]) -> str:
    """The earlier study of prior ``name`` and ``seed``: a real, budget-limited ``tune run``
    on the perturbed profile, its engine noise other than the truth's."""
    setup, name, seed = job
    data = copy.deepcopy(setup.data)
    data["study"]["seed"] = seed
    profile = setup.folder / f"{setup.profile}_{name}.yaml"
    path = earlier_space_file(data, profile, 1000 + seed, setup.folder)
    opts = RunOptions(
        space_path=path,
        results_dir=setup.folder,
        study=study_name(name, seed),
        trials=setup.prior_budget,
        confirm=0,
    )
    run_study(opts, report=lambda _: None)
    return study_name(name, seed)


def warm_start(setup: Setup, prior: str, seed: int) -> WarmStart:
    """The earlier study read back as ``tune run --warm-start`` reads it."""
    space = setup.space(seed)
    objective = get_objective(space.study.objective or "")
    return load_warm_start(study_name(prior, seed), None, setup.folder, space, objective)


# --- the searches -----------------------------------------------------------------------------


def search_table(setup: Setup, seed: int, warm: WarmStart | None) -> tuple[Launches, optuna.Study]:
    """One search of the truth's space: the launches it made, in order, with what each
    showed, and its study (the warm start's picks queued after the baseline, as tune run)."""
    space = setup.space(seed)

    def lookup(key: str, values: dict[str, Any], replicate: str) -> Record:
        return setup.table[f"{replicate}|{key}"]

    rng = np.random.default_rng(seed)
    objective = TableObjective(space, rng, setup.replicates, lookup, setup.key)
    sampler = make_sampler(DEFAULT_SAMPLER, space, warm.prior if warm else None)
    study = search(objective, sampler, setup.budget, warm)
    return objective.launches, study


Job = tuple[Setup, int, str | None]
Done = tuple[str | None, int, Launches, int, list[float]]


def search_job(job: Job) -> Done:
    """A search in a worker: cold (``prior`` None) or warm from that prior's earlier study;
    also how many picks were queued and the weights the prior ended on."""
    setup, seed, prior = job
    warm = warm_start(setup, prior, seed) if prior else None
    launches, study = search_table(setup, seed, warm)
    tiers = len(setup.data["workload"]["tiers"])
    return prior, seed, launches, len(warm.queue) if warm else 0, final_weights(study, tiers)


def final_weights(study: optuna.Study, tiers: int) -> list[float]:
    """Per tier, the earlier fit's weight (0, 1/2, 1) the evidence chose last (NaN: no fit
    yet). Read from the sampler's private state: it is the why behind a slow warm tier."""
    fits = getattr(study.sampler, "_fits", {})
    return [float(fits[i][1][0]) if i in fits else math.nan for i in range(tiers)]


# --- how far each prior agrees with the truth -----------------------------------------------


def agreement(
    warm: WarmStart,
    space: Space,
    truth: list[dict[str, float]],
    maximize: bool,
    key: LaunchKey = launch_key,
) -> list[tuple[float, float]]:
    """Per tier: the rank correlation of the earlier study's values with the true values of
    the same configs, and the true value of the earlier study's best config over the tier's
    best (inf: that config is infeasible here, nan: the earlier study found none)."""
    keys = [key(space, dict(p)) for p in warm.prior.points]
    out = []
    for i, tier_truth in enumerate(truth):
        seen = warm.prior.values[:, i]
        pairs = [(s, tier_truth[k]) for s, k in zip(seen, keys, strict=True) if k in tier_truth]
        rho = spearman(*zip(*pairs, strict=True)) if pairs else math.nan
        out.append((rho, _pick_vs_best(seen, keys, tier_truth, maximize)))
    return out


def _pick_vs_best(
    seen: np.ndarray, keys: Sequence[str], truth: dict[str, float], maximize: bool
) -> float:
    if not np.isfinite(seen).any():
        return math.nan
    best_at = int(np.nanargmax(seen) if maximize else np.nanargmin(seen))
    best = max(truth.values()) if maximize else min(truth.values())
    return truth[keys[best_at]] / best if keys[best_at] in truth else math.inf


# --- main -------------------------------------------------------------------------------------


def run_bench(args: Any, narrow: dict[str, list[Any]] | None = None) -> tuple[str, dict]:
    """The whole bench; returns the printed text and the figures by prior."""
    data = space_data(args.prompts, 0, narrow)
    space = Space.model_validate(data)
    maximize = get_objective(space.study.objective or "").direction == "maximize"
    table, keys, truth = _truth(space, args)
    priors = args.priors.split(",")
    with tempfile.TemporaryDirectory(prefix="warm_start_") as tmp:
        folder = Path(tmp)
        for name in priors:
            perturbed_profile(name, folder)
        setup = Setup(data, table, tuple(replicate_names(args.replicates)), args.budget,
                      args.prior_budget, folder)  # fmt: skip
        jobs = [(setup, name, s) for name in priors for s in range(args.seeds)]
        for i, study in enumerate(map_jobs(earlier_study, jobs, args.workers, quiet, ()), 1):
            print(f"  earlier study {study} ({i}/{len(jobs)})", file=sys.stderr)
        runs = searches(setup, priors, args)
        results = {name: prior_result(name, setup, runs, truth, args, maximize) for name in priors}
    text = [header(space, keys, truth, args)]
    text += [render(r, space.workload.tiers, args.budget) for r in results.values()]
    return "\n\n".join(text), results


def _truth(space: Space, args: Any) -> tuple[dict[str, Record], list[str], list[dict[str, float]]]:
    path = cache_path(space)
    table = load(path)
    replicates = replicate_names(args.replicates)
    keys = measure_all(space, table, replicates, args.workers)
    save(path, table)
    return table, keys, truths(table, keys, len(space.workload.tiers), replicates)


def searches(setup: Setup, priors: Sequence[str], args: Any) -> dict[str | None, dict[int, Done]]:
    """Cold (None) and every prior's warm searches, by seed."""
    jobs = [(setup, s, p) for p in (None, *priors) for s in range(args.seeds)]
    runs: dict[str | None, dict[int, Done]] = {p: {} for p in (None, *priors)}
    start = time.perf_counter()
    for i, done in enumerate(map_jobs(search_job, jobs, args.workers, quiet, ()), 1):
        runs[done[0]][done[1]] = done
        took = time.perf_counter() - start
        print(f"  {i}/{len(jobs)} searches ({done[0] or 'cold'} {done[1]}, {took:.0f} s)",
              file=sys.stderr)  # fmt: skip
    print(f"  {len(jobs)} searches in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return runs


def prior_result(
    name: str, setup: Setup, runs: dict, truth: list[dict[str, float]], args: Any, maximize: bool
) -> PriorResult:
    seeds = range(args.seeds)
    warms = [warm_start(setup, name, s) for s in seeds]
    return PriorResult(
        name=name,
        cold=reached([runs[None][s][2] for s in seeds], truth, args.tolerance, maximize),
        warm=reached([runs[name][s][2] for s in seeds], truth, args.tolerance, maximize),
        agreement=[agreement(w, setup.space(0), truth, maximize, setup.key) for w in warms],
        queued=[runs[name][s][3] for s in seeds],
        earlier_launches=[len(w.prior.points) for w in warms],
        weights=[runs[name][s][4] for s in seeds],
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--budget", type=int, default=60, help="Launches per search.")
    ap.add_argument("--prior-budget", type=int, default=35, help="Trials of each earlier study.")
    ap.add_argument("--priors", default=",".join(PRIORS), help=", ".join(PRIORS))
    ap.add_argument("--prompts", type=int, default=20, help="Measured requests per tier.")
    ap.add_argument("--replicates", type=int, default=2, help="Engine seeds behind the truth.")
    ap.add_argument("--tolerance", type=float, default=0.03)
    ap.add_argument("--workers", type=int, default=2)
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    quiet()
    text, _ = run_bench(parse_args(argv))
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
