"""Does the recommended llama-server config beat llama-server's defaults, beyond run-to-run noise?

A study measures each config once. This measures the recommendation for one tier (by default
the top tier) and the defaults again, each ``--repeats`` times on a fresh server, interleaved
(R D, D R, R D, ...) so that drift in the machine's load hits both alike, and prints them side
by side: median, min-max spread, and the ratio default / recommended for each metric. The
recommendation wins on a metric when its whole range is better than the defaults' whole range.
Below the table, the users each server held back (never ran at once while requests waited): a
config that seats fewer users than the tier has streams its seated users' tokens faster, and its
TPOT does not show the wait, its TTFT does.

Each run goes through the study's own trial path (the space's launcher and workload, restricted
to the tier), so the figures are comparable with the study's.

Usage, from the repository root (after `tune run --space search_spaces/llamacpp_cpu.yaml`):
    python -m bench.llamacpp_recommendation --space search_spaces/llamacpp_cpu.yaml
    python -m bench.llamacpp_recommendation --space ... --params '{"threads": 1}' --tier 4
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import entry
from objectives.objective import Objective, get_objective
from tuner.engine import EngineConfig
from tuner.errors import InfraError, TunerError
from tuner.record.trial import TrialOutcome
from tuner.run.trial import TrialRunner
from tuner.space import Space, load_space
from tuner.space.render import render_engine_config

SHOWN = (
    "p99_tpot_ms",
    "median_tpot_ms",
    "p99_itl_ms",
    "median_ttft_ms",
    "p99_ttft_ms",
    "output_throughput",
)
HELD = "users_held"
INFRA_TRIES = 3
HIGHER_IS_BETTER = frozenset({"output_throughput", "request_throughput", "request_goodput"})


@dataclass
class Samples:
    """Repeated measurements of one config: metric -> one value per repeat."""

    label: str
    params: dict[str, Any]
    values: dict[str, list[float]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


def recommended_params(results: Path, tier: int) -> tuple[dict[str, Any], str]:
    """The recommended params for ``tier`` and the study's objective, from recommendations.json."""
    path = results / "recommendations.json"
    try:
        data = json.loads(path.read_text())
    except OSError as err:
        raise TunerError(f"cannot read {path} ({err.strerror}); run `tune run` first") from None
    for rec in data["tiers"]:
        if rec["concurrency"] == tier and rec.get("trial") is not None:
            return dict(rec["params"]), str(data["objective"])
    raise TunerError(f"{path}: no recommendation for tier {tier}")


def one_tier(space: Space, tier: int) -> Space:
    """The space with its workload cut to ``tier``, every other setting as the study ran it."""
    workload = space.workload.model_copy(update={"tiers": [tier]})
    return space.model_copy(update={"workload": workload})


def measure(runner: TrialRunner, space: Space, samples: Samples, run_dir: Path) -> None:
    """One fresh server with ``samples.params``, one benchmark of the tier; appends its metrics.

    A run the infrastructure spoiled (a client starved by the machine's load) is run again, as
    the study re-runs such a trial; after ``INFRA_TRIES`` it is reported as failed.
    """
    outcome = run_fresh(runner, render_engine_config(space, samples.params), run_dir)
    if outcome is None:
        samples.failures.append(f"{run_dir.name}: {INFRA_TRIES} infrastructure faults")
        return
    if outcome.failure:
        samples.failures.append(f"{run_dir.name}: {outcome.failure}")
    for tier_metrics in outcome.tiers.values():
        for key in SHOWN:
            if isinstance(tier_metrics.get(key), int | float):
                samples.values.setdefault(key, []).append(float(tier_metrics[key]))
        held = (tier_metrics.get("server") or {}).get(HELD)
        samples.values.setdefault(HELD, []).append(float(held or 0.0))


def run_fresh(
    runner: TrialRunner, config: EngineConfig, run_dir: Path, tries: int = INFRA_TRIES
) -> TrialOutcome | None:
    """One trial on a fresh engine, run again after an infrastructure fault; None if all
    ``tries`` were."""
    for attempt in range(1, tries + 1):
        try:
            return runner.run(config, run_dir / f"try{attempt}")
        except InfraError as err:
            print(f"{run_dir.name}: infrastructure fault, run again: {err}", file=sys.stderr)
    return None


def interleaved(repeats: int, a: Samples, b: Samples) -> list[Samples]:
    """A B, B A, A B, ...: neither config always runs first after a restart or a load change."""
    order: list[Samples] = []
    for i in range(repeats):
        order += [a, b] if i % 2 == 0 else [b, a]
    return order


def compare(key: str, rec: list[float], base: list[float]) -> str:
    """One table row: medians, spreads, ratio default / recommended, and who wins."""
    higher = key in HIGHER_IS_BETTER
    r_med, b_med = statistics.median(rec), statistics.median(base)
    ratio = (r_med / b_med if higher else b_med / r_med) if r_med and b_med else float("nan")
    if (min(rec) > max(base)) if higher else (max(rec) < min(base)):
        verdict = "recommended better beyond spread"
    elif (max(rec) < min(base)) if higher else (min(rec) > max(base)):
        verdict = "default better beyond spread"
    else:
        verdict = "within spread"
    return f"{key:<18} {_cell(rec)}  {_cell(base)}  {ratio:>6.2f}x  {verdict}"


def _cell(values: list[float]) -> str:
    med, low, high = statistics.median(values), min(values), max(values)
    return f"{med:>9.1f} [{low:>8.1f} - {high:>8.1f}] (spread {high - low:>7.1f})"


def _held(s: Samples) -> str:
    held = s.values.get(HELD) or [0.0]
    return f"{s.label} {statistics.median(held):g} [{min(held):g} - {max(held):g}]"


def report(rec: Samples, base: Samples, tier: int, objective: Objective) -> str:
    lines = [
        f"tier {tier}: recommended {json.dumps(rec.params, sort_keys=True)}",
        f"tier {tier}: default     {json.dumps(base.params, sort_keys=True)}",
        f"objective {objective.name} ({objective.key}); ratio > 1 means the recommendation is "
        "better",
        f"{'metric':<18} {'recommended: median [min - max]':<47}  "
        f"{'default: median [min - max]':<47}  {'ratio':>7}",
    ]
    for key in SHOWN:
        if rec.values.get(key) and base.values.get(key):
            lines.append(compare(key, rec.values[key], base.values[key]))
    lines.append(f"users held of {tier}: " + ", ".join(_held(s) for s in (rec, base)))
    for s in (rec, base):
        lines += [f"{s.label} run failed: {f}" for f in s.failures]
    return "\n".join(lines)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--space", type=Path, required=True, help="the study's space file")
    p.add_argument("--results", type=Path, help="the study's folder (default results/<stem>)")
    p.add_argument("--tier", type=int, help="concurrency tier (default: the space's top tier)")
    p.add_argument("--repeats", type=int, default=5, help="fresh servers per config (default 5)")
    p.add_argument("--params", help="JSON params to compare instead of the recommendation")
    p.add_argument("--objective", help="objective when --params is given (default p99_tpot)")
    p.add_argument("--out", type=Path, help="folder for run logs (default <results>/bench)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    space = load_space(args.space)
    tier = args.tier or max(space.workload.tiers)
    results = args.results or Path("results") / (space.study.name or args.space.stem)
    if args.params:
        params, objective_name = json.loads(args.params), args.objective or "p99_tpot"
    else:
        params, objective_name = recommended_params(results, tier)
    objective = get_objective(objective_name)
    space = one_tier(space, tier)
    runner = TrialRunner(space, objective, space.study.ready_timeout_s, args.space.parent)
    rec, base = Samples("recommended", params), Samples("default", space.defaults())
    out = args.out or results / "bench"
    for i, samples in enumerate(interleaved(args.repeats, rec, base)):
        measure(runner, space, samples, out / f"{i:02d}-{samples.label}")
        print(f"run {i + 1}/{2 * args.repeats} ({samples.label}) done", file=sys.stderr)
    print(report(rec, base, tier, objective))
    return 0


if __name__ == "__main__":
    entry.run(main)
