"""The objective function of a study and its per-trial bookkeeping.

A trial samples a config, is refused for free when it breaks a rule, reuses the measurement of
an identical launch, or runs the engine through ``TrialRunner``; its outcome is stored as
constraint values and user attrs that ``tune show`` and the exporters read back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.errors import InfraError
from tuner.export.recommend import (
    TierRecommendation,
    format_recommendations,
    recommend,
    trials_table,
)
from tuner.record.pooling import CONFIRM_ATTR
from tuner.run.context import StudyContext
from tuner.run.slots import Slot
from tuner.run.trial import CONSTRAINT_KEYS, TrialOutcome, TrialRunner, infeasible
from tuner.space import render_engine_config
from tuner.space.sample import jsonable, rules_violation, suggest, violated_rules
from tuner.storage.results import staged_dir, write_atomic, write_json

Report = Callable[[str], None]
MAX_CONSECUTIVE_INFRA_FAILURES = 3
MAX_CONSECUTIVE_FREE_TRIALS = 50
# The launch a config renders to, set once its params are all written and before any launch:
# it identifies twins, and tells lost_params that a sampled config was known whole.
FINGERPRINT_ATTR = "fingerprint"


class TrialLoop:
    """One run's objective function and bookkeeping around the Optuna study."""

    def __init__(
        self, ctx: StudyContext, study: optuna.Study, report: Report, slot: Slot | None = None
    ) -> None:
        self.ctx, self.study, self.report, self.slot = ctx, study, report, slot
        self.runner = TrialRunner(
            ctx.space, ctx.objective, ctx.space.study.ready_timeout_s, ctx.space_path.parent
        )
        self.infra_streak = 0
        self.free_streak = 0
        self.confirming = False  # confirmation launches do not count towards --trials

    def __call__(self, trial: optuna.Trial) -> list[float]:
        values = suggest(trial, self.ctx.space)
        try:
            outcome = self._evaluate(trial, values)
        except KeyboardInterrupt:
            trial.set_user_attr("interrupted", True)
            trial.set_user_attr("failure", "interrupted (Ctrl-C or SIGTERM)")
            raise
        except InfraError as err:
            trial.set_user_attr("failure", f"infrastructure: {err}")
            trial.set_user_attr("failure_kind", "infra")
            raise
        self._store(trial, outcome)
        return outcome.values

    def _evaluate(self, trial: optuna.Trial, values: dict[str, Any]) -> TrialOutcome:
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
        trial.set_user_attr(FINGERPRINT_ATTR, config.fingerprint())
        trial.set_user_attr("engine_command", config.shell_command())
        fresh = trial.user_attrs.get(CONFIRM_ATTR) is not None  # a re-measurement is asked for
        if not fresh and (twin := self._measured_twin(trial, config.fingerprint())) is not None:
            return self._copy(trial, twin)
        tiers: dict[str, Any] = {}

        def on_tier(tier: Any) -> None:
            tiers[str(tier.concurrency)] = tier.metrics
            trial.set_user_attr("tiers", jsonable(tiers))  # partial tiers survive a Ctrl-C

        if self.slot is not None:  # the slot's port and devices; the record stays slot-free
            config = render_engine_config(
                self.ctx.space,
                values,
                port=self.slot.port,
                devices=self.slot.devices,
                labels=labels,
            )
        with staged_dir(self.ctx.paths.trial_dir(trial.number)) as trial_dir:
            return self.runner.run(config, trial_dir, on_tier)

    def _measured_twin(self, trial: optuna.Trial, fingerprint: str) -> FrozenTrial | None:
        # Distinct parameter values can render to the same launch (an 'off' value makes other
        # parameters irrelevant): such a launch is measured once, not paid for again.
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            same = t.number != trial.number and t.user_attrs.get(FINGERPRINT_ATTR) == fingerprint
            if same and t.user_attrs.get("failure_kind") != "rules":
                return t
        return None

    def _copy(self, trial: optuna.Trial, twin: FrozenTrial) -> TrialOutcome:
        trial.set_user_attr("duplicate_of", twin.number)
        out = TrialOutcome(values=list(twin.values), tiers=dict(twin.user_attrs.get("tiers", {})))
        out.constraints = {k: float(twin.constraints.get(k, 0.0)) for k in CONSTRAINT_KEYS}
        out.tier_ok = dict(twin.user_attrs.get("tier_ok", {}))
        out.failure = twin.user_attrs.get("failure")
        out.failure_kind = twin.user_attrs.get("failure_kind")
        return out

    def _store(self, trial: optuna.Trial, outcome: TrialOutcome) -> None:
        for key, value in outcome.constraints.items():
            trial.set_constraint(key, value)
        trial.set_user_attr("tiers", jsonable(outcome.tiers))
        trial.set_user_attr("feasible", outcome.feasible)
        trial.set_user_attr("tier_ok", outcome.tier_ok)
        trial.set_user_attr("failure", outcome.failure)
        trial.set_user_attr("failure_kind", outcome.failure_kind)

    def after_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        """Progress line, table refresh, re-queue of infra failures, and the stop condition."""
        self.record(study, trial)
        if not self.confirming and finished_count(study) >= self.ctx.trials:
            study.stop()
        if self.infra_streak >= MAX_CONSECUTIVE_INFRA_FAILURES:
            self.report(f"stopping: {self.infra_streak} infrastructure failures in a row")
            study.stop()
        if self.free_streak >= MAX_CONSECUTIVE_FREE_TRIALS:
            self.report(
                f"stopping: the last {self.free_streak} samples broke a rule or repeated a "
                "measured launch; the space has little left to explore"
            )
            study.stop()

    def record(self, study: optuna.Study, trial: FrozenTrial) -> None:
        """Progress line, table refresh and re-queue of infra failures (no stop decision)."""
        self.report(progress_line(trial, self.ctx, study))
        if trial.state == TrialState.FAIL and not trial.user_attrs.get("interrupted"):
            self._requeue(study, trial)
        elif trial.state == TrialState.COMPLETE:
            self.infra_streak = 0
        self.free_streak = 0 if counts_toward_budget(trial) else self.free_streak + 1
        write_tables(self.ctx, study)

    def _requeue(self, study: optuna.Study, trial: FrozenTrial) -> None:
        # The config was not at fault: measure it again rather than lose it.
        self.infra_streak += 1
        requeue(study, trial)


def lost_params(trial: FrozenTrial) -> dict[str, Any]:
    """The config of a lost trial to queue again, when it is known whole; else ``{}``.

    A queued config's entry (``fixed_params``) holds all of it, even when the worker was killed
    between two ``suggest`` calls. A sampled config is whole once its engine command was built
    (``FINGERPRINT_ATTR``); before that the worker died mid-sampling, nothing was launched, and
    the params written so far are a fragment of a proposal, not a config to measure."""
    if (fixed := trial.system_attrs.get("fixed_params")) is not None:
        return {**fixed, **trial.params}
    return dict(trial.params) if FINGERPRINT_ATTR in trial.user_attrs else {}


def requeue(study: optuna.Study, trial: FrozenTrial, **attrs: Any) -> None:
    """Queue ``trial``'s config again, marked ``requeued_from``; ``attrs`` add user attrs.

    A trial lost before its config was known whole launched nothing: queueing a fragment would
    pass a fresh sample off as a re-run, so nothing is queued (the budget counts finished
    trials, and a new sample fills the place)."""
    if params := lost_params(trial):
        study.enqueue_trial(params, user_attrs={**requeue_attrs(trial), **attrs})


def requeue_attrs(trial: FrozenTrial) -> dict[str, Any]:
    attrs: dict[str, Any] = {"requeued_from": trial.number}
    for key in ("baseline", CONFIRM_ATTR):
        if trial.user_attrs.get(key) is not None:
            attrs[key] = trial.user_attrs[key]
    return attrs


def counts_toward_budget(trial: FrozenTrial) -> bool:
    """Whether a trial used an engine launch: rule breakers and repeats of a measured launch
    cost nothing, so they do not use up the trial budget."""
    free = trial.user_attrs.get("failure_kind") == "rules" or "duplicate_of" in trial.user_attrs
    return trial.state == TrialState.COMPLETE and not free


def finished_count(study: optuna.Study) -> int:
    """Finished trials that count toward the budget (``--trials``); confirmations are extra."""
    done = study.get_trials(deepcopy=False)
    return sum(counts_toward_budget(t) and CONFIRM_ATTR not in t.user_attrs for t in done)


def progress_line(trial: FrozenTrial, ctx: StudyContext, study: optuna.Study) -> str:
    done = finished_count(study)
    head = f"trial {trial.number:>3} [{done}/{ctx.trials}]"
    if trial.user_attrs.get("baseline"):
        head += " baseline"
    if trial.user_attrs.get(CONFIRM_ATTR) is not None:
        head += f" confirms {trial.user_attrs[CONFIRM_ATTR]}"
    if trial.state != TrialState.COMPLETE:
        reason = trial.user_attrs.get("failure") or "infrastructure fault"
        return f"{head} {trial.state.name}: {reason}"
    if not trial.user_attrs.get("feasible"):
        return f"{head} infeasible: {trial.user_attrs.get('failure')}"
    tiers = trial.user_attrs.get("tiers", {})
    key = ctx.objective.key
    cells = "  ".join(
        f"c{c}={tiers.get(str(c), {}).get(key, float('nan')):.1f}" for c in ctx.space.workload.tiers
    )
    return f"{head} {ctx.objective.name}({ctx.objective.unit}): {cells}"


def write_tables(ctx: StudyContext, study: optuna.Study) -> list[TierRecommendation]:
    """Refresh trials.csv and the recommendation files from the storage."""
    tiers = list(ctx.space.workload.tiers)
    # Through a temp file and a rename, like every result: a crash never leaves half a table.
    write_atomic(ctx.paths.trials_csv, trials_table(study, tiers).to_csv(index=False))
    recs = recommend(study.get_trials(deepcopy=False), ctx.objective, tiers)
    write_json(
        ctx.paths.recommendations_json,
        {
            "study": ctx.name,
            "objective": ctx.objective.name,
            "tiers": [r.to_json() for r in recs],
        },
    )
    write_atomic(ctx.paths.recommendations_txt, format_recommendations(recs, ctx.objective) + "\n")
    return recs
