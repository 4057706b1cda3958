"""Cold against warm on a real engine: vLLM's CPU build, warm-started from the simulated one.

The truth is a small discretised copy of search_spaces/vllm_cpu.yaml (``NARROW``: the token
budget, compiled or eager, n-gram drafts or none; every other knob at its default), each config
launched ``--replicates`` times on a fresh real engine, its true value per tier the mean of
them. The space's TTFT limits are left out: on this machine the real defaults miss them at c4
and c16, so those tiers would have no truth at all. The table is written after every launch to
``--table`` (the sweep takes about a minute a launch) and a rerun measures only what it lacks.

The earlier studies are ``tune run``s of the same space on the simulated engine, as
``warm_start.py``'s are, ``--prior-budget`` trials each: ``helpful`` on the shipped cpu
profile, the simulation of this engine (``sim: {profile: cpu}``); ``misleading`` on a copy
that believes drafts are never accepted and eager execution costs nothing, so it ranks the
drafting, compiled configs last. Searches then replay the real table as ``warm_start.py``'s do
(one replicate drawn per launch) and the table is that bench's.

    python -m bench.warm_start_real [--seeds 10] [--budget 8] [--replicates 2]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from bench import entry
from bench.discretise import bench_space_data
from bench.efficiency_truth import Record, truths, within
from bench.llamacpp_recommendation import run_fresh
from bench.sweep import (
    distinct_launches,
    map_jobs,
    quiet,
    record_of,
    replicate_config,
    replicate_names,
    save,
)
from bench.warm_start import Setup, earlier_study, prior_result, searches
from bench.warm_start_table import render
from launchers.simengine.profile import PROFILE_DIR
from objectives.objective import get_objective
from tuner.errors import TunerError
from tuner.run.trial import TrialRunner
from tuner.space import render_engine_config
from tuner.space.schema import Space

REPO = Path(__file__).resolve().parents[1]
SPACE = REPO / "search_spaces" / "vllm_cpu.yaml"
TABLE = Path(__file__).resolve().parent / "warm_start_real_truth.json"
PROFILE = PROFILE_DIR / "cpu.yaml"
NARROW: dict[str, list[Any]] = {
    "max_num_batched_tokens": [256, 2048],
    "max_num_seqs": [128],
    "long_prefill_token_threshold": [0],
    "execution": ["compiled", "eager"],
    "optimization_level": [2],
    "block_size": [128],
    "num_speculative_tokens": [0, 2],
    "kv_cache_space": ["1"],
    "attn_split_kv": ["1"],
    "kv_cache_dtype": ["auto"],  # lossy, and gated: the speed search keeps the defaults' answers
}
# The engine, its API server and the client share 2 cores: a launch whose client was starved
# (an infrastructure fault, as tune run judges it) is run again, as tune run requeues it.
INFRA_TRIES = 5


def _as_shipped(p: dict[str, Any]) -> None:
    """The cpu profile as it ships: what the simulated engine says of this one."""


def _drafts_and_eager_wrong(p: dict[str, Any]) -> None:
    """A simulation that gets both measured effects backwards: drafts never accepted (the real
    engine accepts nearly all of them on this model) and no cost to eager execution."""
    p["model"]["output_repeat"] = 0.0
    p["speculative"]["ngram"]["acceptance"] = 0.0
    p["overheads"]["eager_rest_us"] = 0.0


PRIORS = {"helpful": _as_shipped, "misleading": _drafts_and_eager_wrong}


def space_data(narrow: dict[str, list[Any]] | None = None) -> dict[str, Any]:
    """The discretised space on the real engine (its own target), without its SLOs."""
    shipped = yaml.safe_load(SPACE.read_text())
    data = bench_space_data(SPACE, int(shipped["workload"]["num_prompts"]), 0, narrow or NARROW)
    data["target"] = shipped["target"]
    data["slos"] = []
    return data


def real_key(space: Space, values: dict[str, Any]) -> str:
    """A config as the real engine is launched with it: its rendered command and env."""
    return render_engine_config(space, values).fingerprint()


def write_profiles(folder: Path) -> None:
    for name, perturb in PRIORS.items():
        profile = yaml.safe_load(PROFILE.read_text())
        perturb(profile)
        (folder / f"cpu_{name}.yaml").write_text(yaml.safe_dump(profile, sort_keys=False))


def missing(table: dict[str, Record], keys: Sequence[str], replicates: Sequence[str]) -> bool:
    return any(f"{r}|{k}" not in table for r in replicates for k in keys)


def measure_truth(path: Path, replicates: Sequence[str], runs: Path) -> None:
    """Every distinct config launched on the real engine once per replicate (replicate by
    replicate, so drift in the machine's load hits every config alike), the table written to
    ``path`` after each launch."""
    space = Space.model_validate(space_data())
    table = _read(path)
    keyed = distinct_launches(space, real_key)
    todo = [(k, p, r) for r in replicates for k, p in keyed.items() if f"{r}|{k}" not in table]
    runner = TrialRunner(space, get_objective(space.study.objective or ""), 600.0, SPACE.parent)
    for i, (key, point, replicate) in enumerate(todo, 1):
        table[f"{replicate}|{key}"] = _launch(runner, space, point, replicate, runs / f"{i:03d}")
        save(path, table)
        print(f"  launch {i}/{len(todo)} ({replicate}) {point}", file=sys.stderr)


def measure_apart(path: Path, replicates: Sequence[str], runs: Path) -> None:
    """``measure_truth`` in a process of its own: the real launches leave the launcher's
    threads behind, and a process with them hung once its searches' worker pools had forked."""
    proc = multiprocessing.get_context("spawn").Process(
        target=measure_truth, args=(path, list(replicates), runs)
    )
    proc.start()
    proc.join()
    if proc.exitcode:
        raise TunerError(
            f"the real sweep stopped (exit {proc.exitcode}); {path} keeps its launches"
        )


def _launch(
    runner: TrialRunner, space: Space, point: dict[str, Any], replicate: str, folder: Path
) -> Record:
    """One real launch, run again after an infrastructure fault (a client starved by load)."""
    outcome = run_fresh(runner, replicate_config(space, point, replicate), folder, INFRA_TRIES)
    if outcome is None:
        raise TunerError(f"{point}: {INFRA_TRIES} infrastructure faults in a row")
    return record_of(space, outcome)


def header(
    keys: Sequence[str], truth: list[dict[str, float]], args: Any, tiers: list[int], maximize: bool
) -> str:
    best = max if maximize else min
    close = [
        sum(within(v, best(t.values()), args.tolerance, maximize) for v in t.values()) if t else 0
        for t in truth
    ]
    counts = "  ".join(f"c{c} {n} of {len(t)}" for c, n, t in zip(tiers, close, truth, strict=True))
    return "\n".join(
        [
            f"truth: {len(keys)} configs of the discretised vllm_cpu space on the real vLLM CPU "
            f"build, mean of {args.replicates} fresh engines each; {args.seeds} seeds x budget "
            f"{args.budget} launches, cold and warm; earlier studies of {args.prior_budget} "
            "trials on the simulated engine",
            f"configs within {args.tolerance:.0%} of each tier's best: {counts}",
        ]
    )


def run_bench(args: Any, narrow: dict[str, list[Any]] | None = None) -> str:
    data = space_data(narrow)
    space = Space.model_validate(data)
    maximize = get_objective(space.study.objective or "").direction == "maximize"
    replicates = replicate_names(args.replicates)
    keys = list(distinct_launches(space, real_key))
    with tempfile.TemporaryDirectory(prefix="warm_real_") as tmp:
        folder = Path(tmp)
        table = _read(args.table)
        if missing(table, keys, replicates):
            measure_apart(args.table, replicates, folder / "runs")
            table = _read(args.table)
        truth = truths(table, keys, len(space.workload.tiers), replicates)
        write_profiles(folder)
        setup = Setup(data, table, tuple(replicates), args.budget, args.prior_budget, folder,
                      key=real_key, profile="cpu")  # fmt: skip
        priors = list(PRIORS)
        jobs = [(setup, name, s) for name in priors for s in range(args.seeds)]
        for _ in map_jobs(earlier_study, jobs, args.workers, quiet, ()):
            pass
        runs = searches(setup, priors, args)
        results = [prior_result(name, setup, runs, truth, args, maximize) for name in priors]
    text = [header(keys, truth, args, list(space.workload.tiers), maximize)]
    text += [render(r, space.workload.tiers, args.budget) for r in results]
    return "\n\n".join(text)


def _read(path: Path) -> dict[str, Record]:
    return dict(json.loads(path.read_text())) if path.exists() else {}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--budget", type=int, default=8, help="Launches per search.")
    ap.add_argument("--prior-budget", type=int, default=8, help="Trials of each earlier study.")
    ap.add_argument("--replicates", type=int, default=2, help="Fresh engines behind the truth.")
    ap.add_argument("--tolerance", type=float, default=0.03)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--table", type=Path, default=TABLE, help="The real measurements (JSON).")
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    quiet()
    print(run_bench(parse_args(sys.argv[1:] if argv is None else argv)))
    return 0


if __name__ == "__main__":
    entry.run(main)
