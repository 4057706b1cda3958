"""Does each tier's recommendation beat the engine's defaults at that tier, beyond run-to-run noise?

A study measures each config once. This launches every distinct recommended config and the
defaults again on fresh engines, ``--repeats`` rounds, each round in a rotated order so that
drift in the machine's load hits all alike; every launch measures every tier, as a trial does.
Then, per tier, it prints that tier's recommendation beside the defaults: median, min-max
spread, the ratio default / recommended, and who wins beyond the spread (see
``bench.llamacpp_recommendation``, whose comparison it shares; that script compares one tier).

Usage, from the repository root (after `tune run --space search_spaces/vllm_cpu.yaml`):
    python -m bench.recommendation --space search_spaces/vllm_cpu.yaml --repeats 3
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import entry
from bench.llamacpp_recommendation import INFRA_TRIES, SHOWN, compare, run_fresh
from objectives.objective import get_objective
from tuner.errors import TunerError
from tuner.run.trial import TrialRunner
from tuner.space import Space, load_space
from tuner.space.render import render_engine_config


@dataclass
class Config:
    """One config to re-measure: the tiers it is recommended for, per-tier metric samples."""

    label: str
    params: dict[str, Any]
    samples: dict[int, dict[str, list[float]]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


def study_recommendations(results: Path) -> tuple[dict[int, dict[str, Any]], str]:
    """Tier -> recommended params, and the study's objective, from recommendations.json."""
    path = results / "recommendations.json"
    try:
        data = json.loads(path.read_text())
    except OSError as err:
        raise TunerError(f"cannot read {path} ({err.strerror}); run `tune run` first") from None
    recs = {int(r["concurrency"]): dict(r["params"]) for r in data["tiers"] if r.get("trial")}
    return recs, str(data["objective"])


def configs_to_measure(recs: dict[int, dict[str, Any]], defaults: dict[str, Any]) -> list[Config]:
    """Each distinct recommended config once (labelled by its tiers), then the defaults."""
    out: list[Config] = []
    for tier, params in sorted(recs.items()):
        same = next((c for c in out if c.params == params), None)
        if same is None:
            out.append(Config(f"c{tier}", params))
        else:
            same.label += f",c{tier}"
    return [*out, Config("default", dict(defaults))]


def rotations(repeats: int, configs: list[Config]) -> list[Config]:
    """Round r starts at config r: no config always runs first after a load change."""
    order: list[Config] = []
    for r in range(repeats):
        k = r % len(configs)
        order += configs[k:] + configs[:k]
    return order


def measure(runner: TrialRunner, space: Space, config: Config, run_dir: Path) -> None:
    """One fresh engine with ``config.params``; appends each tier's metrics to its samples."""
    outcome = run_fresh(runner, render_engine_config(space, config.params), run_dir)
    if outcome is None:
        config.failures.append(f"{run_dir.name}: {INFRA_TRIES} infrastructure faults")
        return
    if outcome.failure:
        config.failures.append(f"{run_dir.name}: {outcome.failure}")
    for tier, metrics in outcome.tiers.items():
        for key in SHOWN:
            if isinstance(metrics.get(key), int | float):
                config.samples.setdefault(int(tier), {}).setdefault(key, []).append(metrics[key])


def report(configs: list[Config], tiers: list[int], objective: str) -> str:
    """Per tier: its recommendation beside the defaults, metric by metric."""
    default = configs[-1]
    lines = [f"objective {objective}; ratio > 1 means the recommendation is better"]
    for tier in tiers:
        rec = next((c for c in configs[:-1] if f"c{tier}" in c.label.split(",")), None)
        if rec is None:
            lines.append(f"\ntier {tier}: no recommendation (no feasible config)")
            continue
        lines.append(f"\ntier {tier}: recommended {json.dumps(rec.params, sort_keys=True)}")
        lines += _rows(rec.samples.get(tier, {}), default.samples.get(tier, {}))
    for c in configs:
        lines += [f"{c.label} run failed: {f}" for f in c.failures]
    return "\n".join(lines)


def _rows(rec: dict[str, list[float]], base: dict[str, list[float]]) -> list[str]:
    header = f"{'metric':<18} {'recommended: median [min - max]':<47}  "
    header += f"{'default: median [min - max]':<47}  {'ratio':>7}"
    rows = [compare(k, rec[k], base[k]) for k in SHOWN if rec.get(k) and base.get(k)]
    return [header, *rows] if rows else ["  no measurement of both configs at this tier"]


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--space", type=Path, required=True, help="the study's space file")
    p.add_argument("--results", type=Path, help="the study's folder (default results/<stem>)")
    p.add_argument("--repeats", type=int, default=3, help="rounds of fresh engines (default 3)")
    p.add_argument("--out", type=Path, help="folder for run logs (default <results>/bench-all)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    space = load_space(args.space)
    results = args.results or Path("results") / (space.study.name or args.space.stem)
    recs, objective = study_recommendations(results)
    configs = configs_to_measure(recs, space.defaults())
    runner = TrialRunner(space, get_objective(objective), space.study.ready_timeout_s)
    out = args.out or results / "bench-all"
    order = rotations(args.repeats, configs)
    for i, config in enumerate(order):
        measure(runner, space, config, out / f"{i:02d}-{config.label.replace(',', '-')}")
        print(f"run {i + 1}/{len(order)} ({config.label}) done", file=sys.stderr)
    print(report(configs, list(space.workload.tiers), objective))
    return 0


if __name__ == "__main__":
    entry.run(main)
