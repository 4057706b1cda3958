"""One search of a discretised space against its exhaustive table, as ``tune run`` searches.

The study is seeded by the core (``seed_new_study``: the baseline first, then a warm start's
picks) and sampled by the core's samplers; each launch shows one noisy draw, a replicate
picked at random per launch. As in ``tune run``, configs that break a rule are refused before
any launch, configs rendering to a launch already made are answered from the study, and the
sampler is told each tier's feasibility. ``sample_efficiency`` and ``warm_start`` both search
through here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import optuna

from bench.efficiency_truth import Record
from bench.sweep import LaunchKey, launch_key
from objectives.objective import get_objective
from tuner.record.trial import CONSTRAINT_KEYS, write_tier_ok
from tuner.run.objective import seed_new_study
from tuner.run.warm import WarmStart
from tuner.space import render_engine_config
from tuner.space.sample import rules_violation, suggest, violated_rules
from tuner.space.schema import Space

Launches = list[tuple[str, Record]]
Lookup = Callable[[str, dict[str, Any], str], Record]  # (launch key, values, replicate)


@dataclass
class TableObjective:
    """The objective of a search against the table: one noisy replicate per launch."""

    space: Space
    rng: np.random.Generator
    replicates: Sequence[str]
    lookup: Lookup
    key: LaunchKey = launch_key
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
            key = self.key(self.space, values)
            replicate = str(self.rng.choice(list(self.replicates)))
            self.seen[fingerprint] = dict(self.lookup(key, values, replicate))
            self.seen[fingerprint]["params"] = dict(values)  # for --trace; the table keeps none
            self.launches.append((key, self.seen[fingerprint]))
        return self.seen[fingerprint]

    def _refused(self, values: dict[str, Any]) -> Record:
        """Refused before any launch, as in tune run."""
        constraints = dict.fromkeys(CONSTRAINT_KEYS, 0.0)
        constraints["rules"] = rules_violation(self.space, values)
        objective = get_objective(self.space.study.objective or "")
        worst = [objective.worst] * len(self.space.workload.tiers)
        return {"values": worst, "kind": "rules", "constraints": constraints}


def search(
    objective: TableObjective,
    sampler: optuna.samplers.BaseSampler,
    budget: int,
    warm: WarmStart | None = None,
    done: Callable[[Launches], bool] = lambda _: False,
) -> optuna.Study:
    """Trials until ``budget`` launches were made or ``done`` says the search has reached
    what it looks for; returns the study (``objective.launches`` holds the launches)."""
    space = objective.space
    direction = get_objective(space.study.objective or "").direction
    study = optuna.create_study(directions=[direction] * len(space.workload.tiers), sampler=sampler)
    seed_new_study(study, space, warm)
    for _ in range(budget * 20):  # rules and duplicates are free, but bounded
        if len(objective.launches) >= budget or done(objective.launches):
            break
        study.optimize(objective, n_trials=1)
    return study
