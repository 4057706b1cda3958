"""What ending a trial after a tier that missed its SLOs could save, and what it would hide.

A trial measures every tier in rising order. Skipping the rest once a tier has missed its SLOs
saves their benchmark time; it also hides what the config does at the higher tiers, where
limits may be looser. Before any such rule is built, this bounds both sides from measurements
already made:

- saving (``--study NAME --storage URL``): the engine seconds of the tiers a study ran after
  each launch's first missed tier, as a share of all its engine seconds (start-up, warm-up,
  tiers, on the engine's clock: ``tuner.record.times``). No skipping rule saves more; one that
  first asks the sampler's model whether the config can still reach a tier's front saves less.
- hidden (``--table``, sample_efficiency's exhaustive table of a space): the launches that miss
  a tier with tiers after it, how many of those later tiers they were feasible at, and at how
  many they were within ``--tolerance`` of that tier's true best. Each of those is a tier's
  answer that a skip would have thrown away.

    python -m bench.tier_skipping --study minimax_h200-sim --storage sqlite:///results/minimax_h200-sim/study.db
    python -m bench.tier_skipping --table results/bench/sample_efficiency_<key>.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial

from bench import entry
from bench.efficiency_truth import Record, feasible_at, truths, within
from tuner.errors import TunerError
from tuner.export.hours import MEASURED_KINDS
from tuner.record.trial import TrialRecord


@dataclass(frozen=True)
class Saving:
    """A study's engine seconds, and those spent on tiers after a launch's first miss."""

    launches: int
    missed: int  # launches with a tier that missed its SLOs
    engine_s: float
    after_miss_s: float

    @property
    def share(self) -> float:
        return self.after_miss_s / self.engine_s if self.engine_s else 0.0


def study_saving(trials: Sequence[FrozenTrial]) -> Saving:
    launches = missed = 0
    engine_s = after_s = 0.0
    for t in trials:
        r = TrialRecord.of(t)
        if r.times is None:
            continue
        launches += 1
        engine_s += r.times.total_s
        after = _after_first_miss(r.times.tiers_s, r.tier_ok)
        if after is not None:
            missed += 1
            after_s += after
    return Saving(launches, missed, engine_s, after_s)


def _after_first_miss(tiers_s: Mapping[str, float], ok: Mapping[str, bool]) -> float | None:
    """Seconds of the tiers run after the first one that missed (None: none missed)."""
    order = sorted(tiers_s, key=int)
    missed = [i for i, c in enumerate(order) if ok.get(c) is False]
    if not missed:
        return None
    return sum(tiers_s[c] for c in order[missed[0] + 1 :])


@dataclass(frozen=True)
class Hidden:
    """What a skip after the first miss would have hidden in an exhaustive table."""

    launches: int  # distinct configs measured on every replicate
    missed: int  # configs that miss a tier with tiers after it, on some replicate
    later_tiers: int  # the tiers after their first miss
    later_feasible: int  # ... at which the config was feasible on every replicate
    later_near_best: int  # ... and within the tolerance of the tier's true best


def table_hidden(table: Mapping[str, Record], tolerance: float, maximize: bool) -> Hidden:
    keys, replicates = _launches(table)
    n_tiers = len(next(iter(table.values()))["values"])
    truth = truths(dict(table), keys, n_tiers, replicates)
    best = [(max if maximize else min)(t.values()) if t else None for t in truth]
    missed = later = feasible = near = 0
    for key in keys:
        misses = [
            m for r in replicates if (m := _first_miss(table[f"{r}|{key}"], n_tiers)) is not None
        ]
        first = min(misses, default=None)
        if first is None or first == n_tiers - 1:
            continue
        missed += 1
        for i in range(first + 1, n_tiers):
            later += 1
            if key in truth[i]:
                feasible += 1
                b = best[i]
                near += b is not None and within(truth[i][key], b, tolerance, maximize)
    return Hidden(len(keys), missed, later, feasible, near)


def _launches(table: Mapping[str, Record]) -> tuple[list[str], list[str]]:
    """Launch keys measured on every replicate, and the replicates."""
    pairs = [k.split("|", 1) for k in table]
    replicates = sorted({r for r, _ in pairs})
    keys = sorted({k for _, k in pairs})
    return [k for k in keys if all(f"{r}|{k}" in table for r in replicates)], replicates


def _first_miss(rec: Record, n_tiers: int) -> int | None:
    """The first tier the launch measured and missed (a launch that measured none: None)."""
    if not rec.get("tier_ok") and rec.get("kind") not in MEASURED_KINDS:
        return None  # refused, crashed: nothing was run to skip
    return next((i for i in range(n_tiers) if not feasible_at(rec, i)), None)


def render(saving: Saving | None, hidden: Hidden | None, tolerance: float) -> str:
    lines = []
    if saving is not None:
        lines += [
            f"study: {saving.launches} launches, {saving.missed} missed a tier's SLOs",
            f"  engine time on tiers after a launch's first miss: {saving.after_miss_s / 3600:.2f}"
            f" of {saving.engine_s / 3600:.2f} h ({saving.share:.1%}): the most a skip saves",
        ]
    if hidden is not None:
        lines += [
            f"table: {hidden.launches} configs, {hidden.missed} miss a tier with tiers after it",
            f"  tiers after the first miss: {hidden.later_tiers}; feasible there on every "
            f"replicate: {hidden.later_feasible}; within {tolerance:.0%} of that tier's best: "
            f"{hidden.later_near_best}",
        ]
    return "\n".join(lines)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--study", help="a study name in --storage")
    p.add_argument("--storage", help="the study's Optuna storage URL")
    p.add_argument("--table", type=Path, help="a sample_efficiency table (results/bench/*.json)")
    p.add_argument("--tolerance", type=float, default=0.03, help="near the best (default 3%%)")
    p.add_argument("--maximize", action="store_true", help="the table's objective is maximised")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if not (args.study and args.storage) and args.table is None:
        raise TunerError("give --study and --storage, or --table, or both")
    saving = hidden = None
    if args.study and args.storage:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        saving = study_saving(_load_trials(args.study, args.storage))
    if args.table is not None:
        hidden = table_hidden(_read_table(args.table), args.tolerance, args.maximize)
    print(render(saving, hidden, args.tolerance))
    return 0


def _load_trials(name: str, storage: str) -> list[FrozenTrial]:
    try:
        return optuna.load_study(study_name=name, storage=storage).get_trials(deepcopy=False)
    except KeyError:
        raise TunerError(f"no study {name!r} in {storage}") from None


def _read_table(path: Path) -> dict[str, Any]:
    try:
        return dict(json.loads(path.read_text()))
    except OSError as err:
        raise TunerError(f"cannot read {path} ({err.strerror})") from None


if __name__ == "__main__":
    entry.run(main)
