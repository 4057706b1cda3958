"""The night's plan before its first launch: what a trial costs on the hardware, from the space.

A study with nothing measured yet has no pace to plan by, and a night on a GPU node is spent
before its progress line says the budget does not fit. So a run given ``--timeout`` asks the
space first: its baseline launched once on the space's simulated stand-in (the simulated target
itself, or the hardware its ``sim:`` settings describe) in a throwaway folder, in virtual time
(seconds here), with a cold compile cache as the node's first launch has. Its start-up, warm-up
and every tier at its request count, on the hardware's clock, are what one trial costs at most:
the baseline is measured in full, while later launches may stop tiers out of contention early
(``objectives.race``). Once the study has launches of its own, ``tuner.run.eta`` plans from
their measurements instead. A space with no simulated stand-in (no ``sim:`` settings) is planned
only from its first launches.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass
from pathlib import Path

import optuna

from objectives.objective import Objective
from tuner.errors import TunerError
from tuner.export.hours import span
from tuner.record.times import TrialTimes
from tuner.run.context import StudyContext, simulated
from tuner.run.eta import Clock, launch_seconds
from tuner.run.trial import TrialRunner
from tuner.space import render_engine_config
from tuner.space.schema import Space


@dataclass(frozen=True)
class TrialCost:
    """One trial on the hardware's clock, in seconds, as the space's baseline spent it."""

    startup_s: float
    warmup_s: float
    tiers_s: float

    @property
    def total_s(self) -> float:
        return self.startup_s + self.warmup_s + self.tiers_s

    @classmethod
    def of(cls, times: TrialTimes) -> TrialCost | None:
        """None when the launch never got ready: a refused baseline costs nothing to plan by."""
        if not times.ready or times.startup_s is None:
            return None
        return cls(times.startup_s, times.warmup_s or 0.0, sum(times.tiers_s.values()))


def space_cost(space: Space, objective: Objective, base_dir: Path) -> TrialCost | None:
    """What the space's baseline costs on its simulated hardware (None: the space names no
    simulated stand-in, or the stand-in refused or failed the baseline)."""
    if space.target.kind != "sim" and space.sim is None:
        return None
    sim = simulated(space)
    times = TrialTimes()
    config = render_engine_config(sim, {}, labels={"study": "plan", "trial": "baseline"})
    with tempfile.TemporaryDirectory(prefix="tune-plan-") as folder:
        runner = TrialRunner(sim, objective, sim.study.ready_timeout_s, base_dir)
        try:
            runner.run(config, Path(folder) / "baseline", times=times)
        except TunerError:  # an infrastructure fault: the first launches will plan instead
            return None
    return TrialCost.of(times)


def plan_line(cost: TrialCost, trials: int, timeout_s: float | None) -> str:
    """``plan from the space (its baseline on the simulated hardware, every tier in full):
    26.9 min a trial (start-up 1.8 min, warm-up 15 s, tiers 24.8 min); 40 trials need up to
    17.93 h of hardware time: the 8.00 h timeout buys 17 of them (--trials 17 fits, as does
    --timeout 18h)``. The hardware's clock, which ``--timeout`` reads on the simulated engine
    too (``tuner.run.eta.Clock``) and the node's wall clock is on the node."""
    need = trials * cost.total_s
    parts = (
        f"start-up {span(cost.startup_s)}, warm-up {span(cost.warmup_s)}, "
        f"tiers {span(cost.tiers_s)}"
    )
    head = (
        "plan from the space (its baseline on the simulated hardware, every tier in full): "
        f"{span(cost.total_s)} a trial ({parts}); {trials} trial{'s' * (trials != 1)} "
        f"need{'s' * (trials == 1)} up to {span(need)} of hardware time"
    )
    if timeout_s is None:
        return head
    if need <= timeout_s:
        return f"{head}: the {span(timeout_s)} timeout fits them"
    fits = int(timeout_s // cost.total_s)
    return (
        f"{head}: the {span(timeout_s)} timeout buys {fits} of them (--trials {max(fits, 1)} "
        f"fits, as does --timeout {math.ceil(need / 3600)}h)"
    )


def space_plan(ctx: StudyContext, study: optuna.Study, left: int, clock: Clock) -> str:
    """The run's plan line from the space, for a run with ``--timeout`` on a study with no
    launch measured yet (empty otherwise: ``eta.plan_note`` plans from the measurements)."""
    if ctx.timeout_s is None or left <= 0:
        return ""
    if launch_seconds(study.get_trials(deepcopy=False), clock.hardware):
        return ""
    cost = space_cost(ctx.space, ctx.objective, ctx.space_path.parent)
    if cost is None:
        return "plan: none before the first launch (the space names no simulated stand-in)"
    return plan_line(cost, left, ctx.timeout_s)
