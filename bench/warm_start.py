"""Cold against warm: launches to each tier's best with and without a warm start's prior.

The truth is the exhaustive table ``sample_efficiency.py`` builds: every distinct launch of the
discretised minimax_h200 space on the shipped simulated h200x4 profile, each config's true
value the mean over ``--replicates`` engine seeds (cached under results/bench/ with that
bench's key, so either bench fills the cache for the other).

Each prior is an earlier study on a perturbed copy of the profile, written to a temporary
folder: ``helpful`` a neighbouring deployment that ranks configs mostly as the truth does
(less HBM bandwidth and FLOP/s, other engine noise), ``misleading`` one whose kernels rank the
other way round (the MoE and attention backends' efficiencies swapped). For every seed the
earlier study is a real ``tune run`` (``run_study``, ``--prior-budget`` trials, the default
sampler, confirmations off) stored in SQLite, and the warm search reads it back through
``load_warm_start``: its picks queued after the baseline, its measurements the sampler's
``Prior``, as ``tune run --warm-start`` does. How far a prior agrees with the truth is shown
per tier: the rank correlation (Spearman) of the earlier study's values against the true
values of the same configs, and the true value of the earlier study's best config at the
tier over the tier's best.

Cold and warm then search the same space from the same seeds, ``--budget`` launches each,
against the table as ``sample_efficiency.py`` does: a launch shows one replicate drawn at
random, configs breaking a rule or rendering to a launch already made cost nothing, and the
queued picks are launches like any other. The figure per tier is the number of launches until
the search's pick is truly within ``--tolerance`` of the tier's best.

    python bench/warm_start.py [--seeds 4] [--budget 60] [--prior-budget 35] [--workers 2]
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import multiprocessing
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.discretise import bench_space_data  # noqa: E402
from bench.efficiency_truth import Record, truths  # noqa: E402
from bench.ranks import spearman  # noqa: E402
from bench.sample_efficiency import (  # noqa: E402
    SPACE,
    cache_path,
    distinct_launches,
    launch_key,
    launch_record,
    replicate_names,
    save,
)
from bench.warm_start_table import Launches, PriorResult, header, reached, render  # noqa: E402
from launchers.simengine.profile import PROFILE_DIR  # noqa: E402
from objectives.objective import get_objective  # noqa: E402
from tuner.record.trial import CONSTRAINT_KEYS, baseline_attrs, write_tier_ok  # noqa: E402
from tuner.run.study import RunOptions, run_study  # noqa: E402
from tuner.run.trial import TrialRunner  # noqa: E402
from tuner.run.warm import WarmStart, load_warm_start, queue_picks  # noqa: E402
from tuner.samplers.registry import DEFAULT_SAMPLER, make_sampler  # noqa: E402
from tuner.space import render_engine_config  # noqa: E402
from tuner.space.sample import rules_violation, suggest, violated_rules  # noqa: E402
from tuner.space.schema import Space  # noqa: E402

PROFILE = PROFILE_DIR / "h200x4.yaml"

Perturb = Callable[[dict[str, Any]], None]


def _slower_node(p: dict[str, Any]) -> None:
    """A neighbouring node: 10% less HBM bandwidth, 12% fewer FLOP/s, every kernel alike."""
    hw = p["hardware"]
    hw["hbm_tbs"] *= 0.90
    hw["tflops_8bit"] *= 0.88
    hw["tflops_16bit"] *= 0.88


def _kernels_reversed(p: dict[str, Any]) -> None:
    """Another engine release whose kernels rank the other way round: the MoE backends'
    efficiencies swapped in pairs (triton with flashinfer_cutlass, deep_gemm with cutlass) and
    FLASH_ATTN's with FLASHINFER's; triton keeps its overflow, which is no efficiency."""
    _swap(p["moe_backends"], "triton", "flashinfer_cutlass", ("gemm_eff", "half_rows", "bw_eff"))
    _swap(p["moe_backends"], "triton", "flashinfer_cutlass", ("layer_us",))
    _swap(p["moe_backends"], "deep_gemm", "cutlass", ("gemm_eff", "half_rows", "bw_eff"))
    attn = ("prefill_eff", "decode_eff", "decode_half_seqs", "mixed_batch_ms")
    _swap(p["attention_backends"], "FLASH_ATTN", "FLASHINFER", attn)


def _swap(table: dict[str, dict[str, Any]], a: str, b: str, keys: Sequence[str]) -> None:
    for k in keys:
        table[a][k], table[b][k] = table[b][k], table[a][k]


PRIORS: dict[str, Perturb] = {"helpful": _slower_node, "misleading": _kernels_reversed}


# --- spaces and profiles --------------------------------------------------------------------


def space_data(prompts: int, seed: int = 0, narrow: dict[str, list[Any]] | None = None) -> dict:
    """``sample_efficiency.bench_space``'s space as YAML data (a study is run from a file),
    with ``narrow`` fixing more knobs (a test's small space)."""
    return bench_space_data(SPACE, prompts, seed, narrow)


def perturbed_profile(name: str, folder: Path) -> Path:
    """The h200x4 profile with prior ``name``'s perturbation, as a file of its own."""
    profile = yaml.safe_load(PROFILE.read_text())
    PRIORS[name](profile)
    path = folder / f"h200x4_{name}.yaml"
    path.write_text(yaml.safe_dump(profile, sort_keys=False))
    return path


def earlier_space_file(data: dict, profile: Path, engine_seed: int, folder: Path) -> Path:
    """The space on the perturbed profile with its own engine noise, as a space file."""
    data = copy.deepcopy(data)
    data["target"] = {"kind": "sim", "profile_file": str(profile), "seed": engine_seed}
    path = folder / f"{profile.stem}_{engine_seed}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# --- the truth --------------------------------------------------------------------------------

_W: dict[str, Any] = {}


def _init_measure(space: Space) -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    runner = TrialRunner(space, get_objective(space.study.objective or ""), 60.0)
    _W.update(space=space, runner=runner, dir=Path(tempfile.mkdtemp(prefix="warm_bench_")))


def _measure(job: tuple[str, dict[str, Any], str]) -> tuple[str, Record]:
    """One launch on one engine seed, recorded as ``sample_efficiency``'s table holds it."""
    key, values, replicate = job
    record = launch_record(_W["runner"], _W["space"], values, replicate, _W["dir"] / "t")
    return f"{replicate}|{key}", record


def measure_all(
    space: Space, table: dict[str, Record], replicates: Sequence[str], workers: int
) -> list[str]:
    """Every distinct launch of ``space`` measured on every replicate; returns the keys."""
    keyed = distinct_launches(space)
    todo = [(k, p, r) for r in replicates for k, p in keyed.items() if f"{r}|{k}" not in table]
    if todo:
        print(f"measuring {len(todo)} launches (exhaustive sweep)...", file=sys.stderr)
        table.update(map_jobs(_measure, todo, workers, _init_measure, (space,)))
    return list(keyed)


def map_jobs(fn: Callable, jobs: Sequence, workers: int, init: Callable, args: tuple) -> Iterator:
    """``fn`` over ``jobs``, each result as it comes: in this process for one worker
    (tests), else in a pool."""
    if workers <= 1:
        init(*args)
        yield from map(fn, jobs)
        return
    with multiprocessing.Pool(workers, init, args) as pool:
        yield from pool.imap_unordered(fn, jobs)


# --- the earlier studies --------------------------------------------------------------------


@dataclass(frozen=True)
class Setup:
    """What every search and earlier study of one bench run shares."""

    data: dict  # the truth's space as YAML data (seed 0)
    table: dict[str, Record]
    replicates: tuple[str, ...]
    budget: int
    prior_budget: int
    folder: Path  # the perturbed profiles, earlier spaces and studies
    # How a config is found in ``table`` (the simulator's resolved launch by default; the
    # rendered command for a table measured on a real engine), and the stem of the
    # perturbed profiles' files in ``folder``.
    key: Callable[[Space, dict[str, Any]], str] = launch_key
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


def search(setup: Setup, seed: int, warm: WarmStart | None) -> tuple[Launches, optuna.Study]:
    """One search of the truth's space: the launches it made, in order, with what each
    showed, and its study (the warm start's picks queued after the baseline, as tune run)."""
    space = setup.space(seed)
    sampler = make_sampler(DEFAULT_SAMPLER, space, warm.prior if warm else None)
    directions = [get_objective(space.study.objective or "").direction] * len(space.workload.tiers)
    study = optuna.create_study(directions=directions, sampler=sampler)
    study.enqueue_trial(space.defaults(), user_attrs=baseline_attrs())
    if warm is not None:
        queue_picks(study, warm)
    trial_fn = _Trials(setup, space, np.random.default_rng(seed))
    for _ in range(setup.budget * 20):  # rules and duplicates are free, but bounded
        if len(trial_fn.launches) >= setup.budget:
            break
        study.optimize(trial_fn, n_trials=1)
    return trial_fn.launches, study


@dataclass
class _Trials:
    """The objective of a search against the table: one noisy replicate per launch."""

    setup: Setup
    space: Space
    rng: np.random.Generator
    launches: Launches = field(default_factory=list)
    seen: dict[str, Record] = field(default_factory=dict)

    def __call__(self, trial: optuna.Trial) -> list[float]:
        values = suggest(trial, self.space)
        rec = self._refused(values) if violated_rules(self.space, values) else self._run(values)
        for name, value in rec["constraints"].items():
            trial.set_constraint(name, value)
        if rec.get("tier_ok"):  # as tune run records it: the sampler reads it per tier
            tiers = map(str, self.space.workload.tiers)
            write_tier_ok(trial, dict(zip(tiers, rec["tier_ok"], strict=True)))
        return list(rec["values"])

    def _run(self, values: dict[str, Any]) -> Record:
        fingerprint = render_engine_config(self.space, values).fingerprint()
        if fingerprint not in self.seen:  # a launch already made is answered from the study
            key = self.setup.key(self.space, values)
            replicate = str(self.rng.choice(list(self.setup.replicates)))
            self.seen[fingerprint] = dict(self.setup.table[f"{replicate}|{key}"])
            self.launches.append((key, self.seen[fingerprint]))
        return self.seen[fingerprint]

    def _refused(self, values: dict[str, Any]) -> Record:
        """Refused before any launch, as in tune run."""
        constraints = dict.fromkeys(CONSTRAINT_KEYS, 0.0)
        constraints["rules"] = rules_violation(self.space, values)
        objective = get_objective(self.space.study.objective or "")
        worst = [objective.worst] * len(self.space.workload.tiers)
        return {"values": worst, "kind": "rules", "constraints": constraints}


Job = tuple[Setup, int, str | None]
Done = tuple[str | None, int, Launches, int, list[float]]


def search_job(job: Job) -> Done:
    """A search in a worker: cold (``prior`` None) or warm from that prior's earlier study;
    also how many picks were queued and the weights the prior ended on."""
    setup, seed, prior = job
    warm = warm_start(setup, prior, seed) if prior else None
    launches, study = search(setup, seed, warm)
    tiers = len(setup.data["workload"]["tiers"])
    return prior, seed, launches, len(warm.queue) if warm else 0, final_weights(study, tiers)


def final_weights(study: optuna.Study, tiers: int) -> list[float]:
    """Per tier, the earlier fit's weight (0, 1/2, 1) the evidence chose last (NaN: no fit
    yet). Read from the sampler's private state: it is the why behind a slow warm tier."""
    fits = getattr(study.sampler, "_fits", {})
    return [float(fits[i][1][0]) if i in fits else math.nan for i in range(tiers)]


def quiet() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)


# --- how far each prior agrees with the truth -----------------------------------------------


def agreement(
    warm: WarmStart,
    space: Space,
    truth: list[dict[str, float]],
    maximize: bool,
    key: Callable[[Space, dict[str, Any]], str] = launch_key,
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


def _truth(space: Space, args: Any) -> tuple[dict[str, Record], list[str], list[dict]]:
    path = cache_path(space)
    table: dict[str, Record] = json.loads(path.read_text()) if path.exists() else {}
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
