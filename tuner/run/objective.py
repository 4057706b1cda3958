"""The objective function of a study and its per-trial bookkeeping.

A trial samples a config, is refused for free when it breaks a rule, reuses the measurement of
an identical launch, or runs the engine through ``TrialRunner``; its outcome is stored as
constraint values and user attrs that ``tune show`` and the exporters read back.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from objectives.tails import tail_note
from tuner.engine import EngineConfig
from tuner.errors import InfraError
from tuner.export import TABLES, ExportResult, export_study
from tuner.record.times import TrialTimes
from tuner.record.trial import (
    TrialOutcome,
    TrialRecord,
    asks_fresh_launch,
    baseline_attrs,
    copied_outcome,
    draw_of,
    infeasible,
    is_baseline,
    lost_params,
    mark_duplicate,
    mark_failed,
    mark_interrupted,
    measured_in_full,
    requeue_attrs,
    write_launch,
    write_outcome,
    write_partial_tiers,
    write_times,
)
from tuner.run.context import StudyContext
from tuner.run.eta import WALL, Clock, eta_note
from tuner.run.quality import gate_outcome
from tuner.run.race import race_for
from tuner.run.signals import why_stopped
from tuner.run.slots import Slot
from tuner.run.trial import TrialRunner
from tuner.run.warm import WarmStart, queue_picks
from tuner.score.quality import Gate
from tuner.space import render_engine_config
from tuner.space.sample import rules_violation, suggest, violated_rules
from tuner.space.schema import Space
from tuner.storage.results import staged_dir

Report = Callable[[str], None]
MAX_CONSECUTIVE_INFRA_FAILURES = 3
MAX_CONSECUTIVE_FREE_TRIALS = 50


class StudyObjective:
    """The Optuna objective of a run: one trial sampled, judged and measured, and the
    bookkeeping around it (progress line, tables, the streaks the stop rule reads)."""

    def __init__(
        self,
        ctx: StudyContext,
        study: optuna.Study,
        report: Report,
        slot: Slot | None = None,
        deadline: float | None = None,
        clock: Clock = WALL,
    ) -> None:
        self.ctx, self.study, self.report, self.slot = ctx, study, report, slot
        self.deadline = deadline  # clock.now() when no new trial starts (--timeout)
        self.clock = clock
        self.runner = TrialRunner(
            ctx.space, ctx.objective, ctx.space.study.ready_timeout_s, ctx.space_path.parent
        )
        self.infra_streak = 0
        self.free_streak = 0
        self.last_infra: str | None = None  # the latest infrastructure fault, for the stop line

    def __call__(self, trial: optuna.Trial) -> list[float]:
        values = suggest(trial, self.ctx.space)
        times = TrialTimes()  # kept however the trial ends: failures spend hours too
        try:
            outcome = self._evaluate(trial, values, times)
        except KeyboardInterrupt as err:
            write_times(trial, times)
            mark_interrupted(trial, why_stopped(err))
            raise
        except InfraError as err:
            self.last_infra = str(err)
            write_times(trial, times)
            mark_failed(trial, f"infrastructure: {err}", infra=True)
            raise
        write_times(trial, times)
        write_outcome(trial, outcome)
        return outcome.values

    def _evaluate(
        self, trial: optuna.Trial, values: dict[str, Any], times: TrialTimes
    ) -> TrialOutcome:
        n_tiers = len(self.runner.tiers)
        broken = violated_rules(self.ctx.space, values)
        if broken:
            out = infeasible(
                self.ctx.objective, n_tiers, "rules", f"breaks rule {broken[0]!r}", "rules"
            )
            out.constraints["rules"] = rules_violation(self.ctx.space, values)
            return out
        labels = {"study": self.ctx.name, "trial": str(trial.number)}
        config = render_engine_config(self.ctx.space, values, labels=labels)
        write_launch(trial, config.fingerprint(), config.shell_command())
        twin = None if asks_fresh_launch(trial) else self._measured_twin(trial, config)
        if twin is not None:
            mark_duplicate(trial, TrialRecord.of(twin))
            return copied_outcome(twin)
        tiers: dict[str, Any] = {}

        def on_tier(tier: Any) -> None:
            tiers[str(tier.concurrency)] = tier.metrics
            write_partial_tiers(trial, tiers)

        if self.slot is not None:  # the slot's port and devices; the record stays slot-free
            config = render_engine_config(
                self.ctx.space,
                values,
                port=self.slot.port,
                devices=self.slot.devices,
                labels=labels,
            )
        done = self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        race = race_for(self.ctx.space, self.ctx.objective, done, measured_in_full(trial))
        with staged_dir(self.ctx.paths.trial_dir(trial.number)) as trial_dir:
            out = self.runner.run(config, trial_dir, on_tier, times, race, draw_of(trial))
        done = self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        gate_outcome(out, done, Gate.of(self.ctx.space), is_baseline(trial))
        return out

    def _measured_twin(self, trial: optuna.Trial, config: EngineConfig) -> FrozenTrial | None:
        # Distinct parameter values can render to the same launch (an 'off' value makes other
        # parameters irrelevant): such a launch is measured once, not paid for again.
        fingerprint = config.fingerprint()
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            r = TrialRecord.of(t)
            same = r.fingerprint == fingerprint and r.draw_seed is None  # the study's own draw
            if r.number != trial.number and same and not r.refused_by_rule:
                return t
        return None

    def stop_reason(self) -> str | None:
        """Why no further trial should start (None: go on); ``tune run`` and every
        ``tune worker`` stop on this one rule."""
        if self.infra_streak >= MAX_CONSECUTIVE_INFRA_FAILURES:
            return f"{self.infra_streak} infrastructure failures in a row"
        if self.free_streak >= MAX_CONSECUTIVE_FREE_TRIALS:
            return (
                f"the last {self.free_streak} samples broke a rule or repeated a measured "
                "launch; the space has little left to explore"
            )
        return None

    def failed_stop(self) -> str | None:
        """Why the run stopped short through no config's fault (None: it did not), with the
        last fault's reason, which is what to fix before running the same command again."""
        if self.infra_streak < MAX_CONSECUTIVE_INFRA_FAILURES:
            return None
        last = f"; the last: {self.last_infra}" if self.last_infra else ""
        return f"{self.infra_streak} infrastructure failures in a row{last}"

    def record(self, study: optuna.Study, trial: FrozenTrial) -> None:
        """Progress line, table refresh and the streaks the stop rule reads (a FAIL's config
        was queued again by the worker loop as it told the trial)."""
        self.report(trial_line(trial, self.ctx, study, self.deadline, self.clock))
        if trial.state == TrialState.FAIL and not TrialRecord.of(trial).interrupted:
            self.infra_streak += 1
        elif trial.state == TrialState.COMPLETE:
            self.infra_streak = 0
        self.free_streak = 0 if counts_toward_budget(trial) else self.free_streak + 1
        write_results(self.ctx, study)


def requeue(study: optuna.Study, trial: FrozenTrial, reason: str | None = None) -> None:
    """Queue ``trial``'s config again, marked as requeued from it, with ``reason`` if given.

    A trial lost before its config was known whole launched nothing: queueing a fragment would
    pass a fresh sample off as a re-run, so nothing is queued (the budget counts finished
    trials, and a new sample fills the place)."""
    if (params := lost_params(trial)) is not None:
        study.enqueue_trial(params, user_attrs=requeue_attrs(trial, reason))


def counts_toward_budget(trial: FrozenTrial) -> bool:
    """Whether a trial used an engine launch: rule breakers and repeats of a measured launch
    cost nothing, so they do not use up the trial budget."""
    r = TrialRecord.of(trial)
    return r.complete and not r.refused_by_rule and r.duplicate_of is None


def in_budget(trial: FrozenTrial) -> bool:
    """Whether a trial uses up the budget (``--trials``): a launch, and not a confirmation or a
    pick's reversion (both are launched on top of the budget)."""
    r = TrialRecord.of(trial)
    return counts_toward_budget(trial) and r.confirm_of is None and r.revert_of is None


def finished_count(study: optuna.Study) -> int:
    """Finished trials that count toward the budget (``--trials``)."""
    return sum(map(in_budget, study.get_trials(deepcopy=False)))


def trial_line(
    trial: FrozenTrial,
    ctx: StudyContext,
    study: optuna.Study,
    deadline: float | None = None,
    clock: Clock = WALL,
) -> str:
    """What one finished trial measured, then when the budget will be met (``eta_note``)."""
    done = finished_count(study)
    return _outcome_line(trial, ctx, done) + eta_note(study, ctx.trials - done, deadline, clock)


def _outcome_line(trial: FrozenTrial, ctx: StudyContext, done: int) -> str:
    head = f"trial {trial.number:>3} [{done}/{ctx.trials}]"
    r = TrialRecord.of(trial)
    if r.baseline:
        head += " baseline"
    if r.confirm_of is not None:
        head += f" confirms {r.confirm_of}"
    if r.draw_seed is not None:
        head += f" on another draw of the workload (seed {r.draw_seed}, c{r.draw_for}'s pick)"
    if r.revert_of is not None and r.revert_knob is not None and r.revert_at is not None:
        knobs = r.revert_knob.replace(",", ", ")
        head += f" is {r.revert_of} with {knobs} at the defaults, measured apart (c{r.revert_at})"
    elif r.revert_of is not None and r.revert_knob is not None:
        head += f" is {r.revert_of} with {r.revert_knob} (and knobs put back before) at default"
    elif r.revert_of is not None:
        at = "" if r.revert_at is None else f" at c{r.revert_at}"
        head += f" is {r.revert_of} with its knobs idle{at} at their defaults"
    if r.warm_from is not None:
        head += f" {r.warm_from.get('study')}'s pick (its trial {r.warm_from.get('trial')})"
    if not r.complete:
        return f"{head} {trial.state.name}: {r.failure or 'infrastructure fault'}"
    if not r.feasible:
        return f"{head} infeasible: {r.failure}"
    key, tiers = ctx.objective.key, ctx.space.workload.tiers
    cells = "  ".join(f"c{c}={r.tier(c).get(key, float('nan')):.1f}" for c in tiers)
    return f"{head} {ctx.objective.name}({ctx.objective.unit}): {cells}{_rests(r, key, tiers)}"


def _rests(r: TrialRecord, key: str, tiers: Sequence[int]) -> str:
    # What a percentile rests on, once when every tier agrees (the usual case): "max of 60".
    notes = [tail_note(key, r.tier(c)) for c in tiers]
    if not any(notes):
        return ""
    if len(set(notes)) == 1:
        return f"  ({notes[0]} at every tier)"
    return "  (" + ", ".join(f"c{c} {n or '-'}" for c, n in zip(tiers, notes, strict=True)) + ")"


def write_results(
    ctx: StudyContext, study: optuna.Study, only: Collection[str] | None = TABLES
) -> ExportResult:
    """The study's result files, through their one writer (``tune export``'s): the tables
    after every trial, every file (``only=None``) when the run ends."""
    return export_study(
        ctx.name, ctx.storage_url, ctx.paths.root, ctx.paths.root.parent, study, only
    )


def seed_queue(study: optuna.Study, ctx: StudyContext) -> None:
    """Baseline first on a new study, then a warm start's picks; on a resumed one, the config
    of every trial that did not finish and was not queued again yet (call it under the study
    lock).

    No FAIL is the config's fault (a config that cannot work is COMPLETE and infeasible), so
    each one not queued again is a config lost: interrupted, or cut short by an error that
    stopped the run (an image not pulled, a dataset not there yet, a bug), fixed since."""
    trials = study.get_trials(deepcopy=False)
    if not trials:
        seed_new_study(study, ctx.space, ctx.warm)
        return
    requeued = {TrialRecord.of(t).requeued_from for t in trials}
    for t in trials:
        if t.state == TrialState.FAIL and t.number not in requeued:
            requeue(study, t)


def seed_new_study(study: optuna.Study, space: Space, warm: WarmStart | None = None) -> None:
    """A new study's queue: the baseline (every parameter at its default) first, then a warm
    start's picks."""
    study.enqueue_trial(space.defaults(), user_attrs=baseline_attrs())
    if warm is not None:
        queue_picks(study, warm)
