"""The study loop behind ``tune run``: baseline first, resume, failures recorded, Ctrl-C safe.

``prepare`` validates everything (space, objective, target, storage) and writes nothing, so a
refused run leaves no trace in results/. ``run_study`` then creates or resumes the Optuna study
(one objective per concurrency tier, so the sampler looks for each tier's best config) and
runs trials until the study holds the asked number of finished trials.
"""

from __future__ import annotations

import hashlib
import json
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from objectives.objective import Objective, get_objective
from tuner.errors import InfraError, SpaceError, StudyError
from tuner.recommend import (
    TierRecommendation,
    format_recommendations,
    recommend,
    trials_table,
)
from tuner.results import StudyPaths, write_atomic, write_json
from tuner.sampling import jsonable, rules_violation, suggest, violated_rules
from tuner.space import Space, load_space, render_engine_config
from tuner.space.schema import TargetSpec
from tuner.trial import CONSTRAINT_KEYS, TrialOutcome, TrialRunner, infeasible

Report = Callable[[str], None]
MAX_CONSECUTIVE_INFRA_FAILURES = 3


@dataclass
class RunOptions:
    """What ``tune run`` asks for; ``None`` means 'the space's default'."""

    space_path: Path
    objective: str | None = None
    trials: int | None = None
    timeout_s: float | None = None
    launcher: str | None = None
    study: str | None = None
    storage: str | None = None
    results_dir: Path = Path("results")


@dataclass
class StudyContext:
    """Everything a run needs, validated, before anything is written."""

    space: Space
    space_path: Path
    space_text: str
    objective: Objective
    name: str
    paths: StudyPaths
    storage_url: str
    trials: int
    timeout_s: float | None


@dataclass
class StudySummary:
    """How a run ended and what it recommends."""

    name: str
    finished_trials: int
    interrupted: bool
    recommendations: list[TierRecommendation] = field(default_factory=list)
    table: str = ""


def prepare(opts: RunOptions) -> StudyContext:
    """Validate the request; raises ``TunerError`` subclasses and writes nothing."""
    space = load_space(opts.space_path)
    if opts.launcher and opts.launcher != space.target.kind:
        space = _retarget(space, opts.launcher, opts.space_path)
    objective = get_objective(opts.objective or space.study.objective or "")
    name = opts.study or space.study.name or Path(opts.space_path).stem
    paths = StudyPaths.for_study(opts.results_dir, name)
    trials = opts.trials if opts.trials is not None else space.study.trials
    if trials < 1:
        raise StudyError(f"--trials must be at least 1 (got {trials})")
    TrialRunner(space, objective, space.study.ready_timeout_s)  # validates the target settings
    text = Path(opts.space_path).read_text()
    url = opts.storage or paths.default_storage_url
    return StudyContext(
        space, Path(opts.space_path), text, objective, name, paths, url, trials, opts.timeout_s
    )


def _retarget(space: Space, kind: str, path: Path) -> Space:
    if kind != "sim":
        raise SpaceError(
            f"{path}: --launcher {kind}: the space's target is '{space.target.kind}' and only "
            "'sim' can replace it (the settings of any other kind belong in the space's target)"
        )
    target = TargetSpec(kind="sim", **(space.sim or {}))
    return space.model_copy(update={"target": target})


def open_study(ctx: StudyContext) -> optuna.Study:
    """Create or resume the study; a resumed study must match the space and objective."""
    if ctx.storage_url == ctx.paths.default_storage_url:
        ctx.paths.root.mkdir(parents=True, exist_ok=True)
    tiers = list(ctx.space.workload.tiers)
    study = optuna.create_study(
        study_name=ctx.name,
        storage=ctx.storage_url,
        directions=[ctx.objective.direction] * len(tiers),
        sampler=make_sampler(ctx.space),
        load_if_exists=True,
    )
    _check_or_record(study, ctx, tiers)
    return study


def make_sampler(space: Space) -> optuna.samplers.BaseSampler:
    return optuna.samplers.TPESampler(
        multivariate=True, constant_liar=True, seed=space.study.seed, n_startup_trials=8
    )


def _check_or_record(study: optuna.Study, ctx: StudyContext, tiers: list[int]) -> None:
    digest = _space_digest(ctx.space)
    attrs = study.user_attrs
    if not attrs:
        meta = {
            "objective": ctx.objective.name,
            "tiers": tiers,
            "space_digest": digest,
            "space_path": str(ctx.space_path),
            "space_yaml": ctx.space_text,
            "target_kind": ctx.space.target.kind,
            "hardware": ctx.space.hardware,
            "engine": ctx.space.engine.model_dump(),
            "created": time.time(),
        }
        for key, value in meta.items():
            study.set_user_attr(key, value)
        return
    if attrs.get("objective") != ctx.objective.name:
        raise StudyError(
            f"study {ctx.name!r} optimises {attrs.get('objective')!r}, not "
            f"{ctx.objective.name!r}; use --study NEW_NAME for a new study"
        )
    if attrs.get("space_digest") != digest:
        raise StudyError(
            f"study {ctx.name!r} was created from a different space (parameters, rules, target "
            "or workload changed); use --study NEW_NAME for a new study"
        )


def _space_digest(space: Space) -> str:
    keys = {"parameters", "rules", "workload", "slos", "engine", "target", "base"}
    data = space.model_dump(mode="json", include=keys)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


class _Loop:
    """One run's objective function and bookkeeping around the Optuna study."""

    def __init__(self, ctx: StudyContext, study: optuna.Study, report: Report) -> None:
        self.ctx, self.study, self.report = ctx, study, report
        self.runner = TrialRunner(
            ctx.space, ctx.objective, ctx.space.study.ready_timeout_s, ctx.space_path.parent
        )
        self.infra_streak = 0

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
        config = render_engine_config(
            self.ctx.space, values, labels={"study": self.ctx.name, "trial": str(trial.number)}
        )
        trial.set_user_attr("fingerprint", config.fingerprint())
        trial.set_user_attr("engine_command", config.shell_command())
        if (twin := self._measured_twin(trial, config.fingerprint())) is not None:
            return self._copy(trial, twin)
        tiers: dict[str, Any] = {}

        def on_tier(tier: Any) -> None:
            tiers[str(tier.concurrency)] = tier.metrics
            trial.set_user_attr("tiers", jsonable(tiers))  # partial tiers survive a Ctrl-C

        return self.runner.run(config, self.ctx.paths.trial_dir(trial.number), on_tier)

    def _measured_twin(self, trial: optuna.Trial, fingerprint: str) -> FrozenTrial | None:
        # Distinct parameter values can render to the same launch (an 'off' value makes other
        # parameters irrelevant): such a launch is measured once, not paid for again.
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            same = t.number != trial.number and t.user_attrs.get("fingerprint") == fingerprint
            if same and t.user_attrs.get("failure_kind") != "rules":
                return t
        return None

    def _copy(self, trial: optuna.Trial, twin: FrozenTrial) -> TrialOutcome:
        trial.set_user_attr("duplicate_of", twin.number)
        out = TrialOutcome(values=list(twin.values), tiers=dict(twin.user_attrs.get("tiers", {})))
        out.constraints = {k: float(twin.constraints.get(k, 0.0)) for k in CONSTRAINT_KEYS}
        out.failure = twin.user_attrs.get("failure")
        out.failure_kind = twin.user_attrs.get("failure_kind")
        return out

    def _store(self, trial: optuna.Trial, outcome: TrialOutcome) -> None:
        for key, value in outcome.constraints.items():
            trial.set_constraint(key, value)
        trial.set_user_attr("tiers", jsonable(outcome.tiers))
        trial.set_user_attr("feasible", outcome.feasible)
        trial.set_user_attr("failure", outcome.failure)
        trial.set_user_attr("failure_kind", outcome.failure_kind)

    def after_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        """Progress line, table refresh, re-queue of infra failures, and the stop condition."""
        self.report(progress_line(trial, self.ctx, study))
        if trial.state == TrialState.FAIL and not trial.user_attrs.get("interrupted"):
            self._requeue(study, trial)
        elif trial.state == TrialState.COMPLETE:
            self.infra_streak = 0
        write_tables(self.ctx, study)
        if finished_count(study) >= self.ctx.trials:
            study.stop()
        if self.infra_streak >= MAX_CONSECUTIVE_INFRA_FAILURES:
            self.report(f"stopping: {self.infra_streak} infrastructure failures in a row")
            study.stop()

    def _requeue(self, study: optuna.Study, trial: FrozenTrial) -> None:
        # The config was not at fault: measure it again rather than lose it.
        self.infra_streak += 1
        if trial.params:
            study.enqueue_trial(trial.params, user_attrs=_requeue_attrs(trial))


def _requeue_attrs(trial: FrozenTrial) -> dict[str, Any]:
    attrs: dict[str, Any] = {"requeued_from": trial.number}
    if trial.user_attrs.get("baseline"):
        attrs["baseline"] = True
    return attrs


def finished_count(study: optuna.Study) -> int:
    return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))


def progress_line(trial: FrozenTrial, ctx: StudyContext, study: optuna.Study) -> str:
    done = finished_count(study)
    head = f"trial {trial.number:>3} [{done}/{ctx.trials}]"
    if trial.user_attrs.get("baseline"):
        head += " baseline"
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
    trials_table(study, tiers).to_csv(ctx.paths.trials_csv, index=False)
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


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM stops a run like Ctrl-C does: engines stopped, trials marked, results kept."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals to the caller
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_study(opts: RunOptions, report: Report = print) -> StudySummary:
    """Run (or resume) a study until it holds ``trials`` finished trials, or time runs out."""
    ctx = prepare(opts)
    study = open_study(ctx)
    _seed_queue(study, ctx)
    loop = _Loop(ctx, study, report)
    interrupted = False
    done = finished_count(study)
    report(f"study {ctx.name!r}: {done}/{ctx.trials} trials done, storage {ctx.storage_url}")
    try:
        with _sigterm_as_interrupt():
            if finished_count(study) < ctx.trials:
                study.optimize(
                    loop, timeout=ctx.timeout_s, catch=(InfraError,), callbacks=[loop.after_trial]
                )
    except KeyboardInterrupt:
        interrupted = True
        report("interrupted: the running engine was stopped; rerun the same command to resume")
    recs = write_tables(ctx, study)
    table = format_recommendations(recs, ctx.objective)
    return StudySummary(ctx.name, finished_count(study), interrupted, recs, table)


def _seed_queue(study: optuna.Study, ctx: StudyContext) -> None:
    """Baseline first on a new study; configs of interrupted trials again on a resumed one."""
    trials = study.get_trials(deepcopy=False)
    if not trials:
        study.enqueue_trial(ctx.space.defaults(), user_attrs={"baseline": True})
        return
    requeued = {t.user_attrs.get("requeued_from") for t in trials}
    for t in trials:
        if t.user_attrs.get("interrupted") and t.number not in requeued:
            study.enqueue_trial(t.params, user_attrs=_requeue_attrs(t))
